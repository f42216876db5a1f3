// Where the host's Odoo finds the role of each customer database (tenant-role.ts): one file per
// database, <base>/config/tenant-roles/<database>, JSON {"user", "password"}, root:odoo 0640 in a
// root:odoo 0750 directory, as the configuration itself. svc's addon reads it (tenant_db.py). The
// password goes on the command's stdin and is masked in the action log.
import type { RootServer } from '../generated/prisma/client.js';
import { shellQuote } from '../core/ssh.js';
import type { Audit } from '../servers/index.js';
import { filestorePath, type FilestoreHost, runOnOdooHost } from './filestore.js';
import { basePathOf } from '../servers/index.js';

const TIMEOUT_MS = 2 * 60_000;

/** The directory of the files (its name is the addon's: tenant_db.DIRECTORY). */
const tenantRolesDir = (basePath: string) => `${basePath}/config/tenant-roles`;

function paths(ctx: FilestoreHost, server: RootServer, database: string) {
  filestorePath('/', database); // the same rule for a database name as a file name
  const dir = tenantRolesDir(basePathOf(ctx.config, server));
  return { dir, file: `${dir}/${database}` };
}

/** Writes the database's credentials (replacing any), readable by root and odoo only. */
export function writeTenantCredentials(
  ctx: FilestoreHost,
  server: RootServer,
  database: string,
  login: { role: string; password: string },
  audit: Audit,
) {
  const { dir, file } = paths(ctx, server, database);
  const script = [
    'set -e',
    `dir=${shellQuote(dir)}; file=${shellQuote(file)}; tmp="$file.svc-new"`,
    'mkdir -p -- "$dir" && chown root:odoo -- "$dir" && chmod 750 -- "$dir"',
    'umask 077',
    'cat > "$tmp"',
    'chown root:odoo -- "$tmp" && chmod 640 -- "$tmp"',
    'mv -f -- "$tmp" "$file"',
    'echo "$file written"',
  ].join('\n');
  const content = JSON.stringify({ user: login.role, password: login.password });
  const shown = JSON.stringify({ user: login.role, password: '********' });
  return runOnOdooHost(ctx, server, { ...audit, secrets: [...(audit.secrets ?? []), login.password] }, script, TIMEOUT_MS, {
    stdin: content,
    label: `${script} <<EOF\n${shown}\nEOF`,
  });
}

/** Removes the database's credentials (nothing when there are none). */
export function removeTenantCredentials(ctx: FilestoreHost, server: RootServer, database: string, audit: Audit) {
  const { file } = paths(ctx, server, database);
  const script = `rm -f -- ${shellQuote(file)} ${shellQuote(`${file}.svc-new`)} && echo ${shellQuote(`${file} removed`)}`;
  return runOnOdooHost(ctx, server, audit, script, TIMEOUT_MS);
}
