// A customer's filestore (attachments, logos) on the Odoo host that serves the template's databases:
// <ODOO_BASE_PATH>/data/filestore/<database>, the layout of setup_dir_structure. Odoo never changes
// a stored file in place, so a copy may share the template's files through hard links (cp -al, as
// click-odoo-copydb does); where the file system refuses, a plain copy. A copy is made under a
// temporary name and renamed when complete, so no half-copied directory is ever taken for a
// filestore. Every command goes to the root server's action log.
import type { AppContext } from '../context.js';
import { UserError } from '../core/errors.js';
import { shellQuote } from '../core/ssh.js';
import type { RootServer } from '../generated/prisma/client.js';
import { basePathOf, formatResult, openRemoteSession, type Audit, requireConfirmed } from '../servers/index.js';

/** Large filestores take a while to link, longer to copy. */
const COPY_TIMEOUT_MS = 30 * 60_000;
const QUICK_TIMEOUT_MS = 5 * 60_000;

/** A database name as a directory name: no path separator, no dot first. */
const SAFE_NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}$/;

export function filestorePath(basePath: string, database: string): string {
  if (!SAFE_NAME.test(database)) throw new UserError(`${JSON.stringify(database)} cannot name a filestore directory`);
  return `${basePath}/data/filestore/${database}`;
}

const vars = (pairs: Record<string, string>) =>
  Object.entries(pairs)
    .map(([k, v]) => `${k}=${shellQuote(v)}`)
    .join('; ');

/** Copies src to dst (which must not exist); an empty directory when the template has none. */
export function copyFilestoreScript(src: string, dst: string): string {
  return [
    `${vars({ src, dst, parent: dst.slice(0, dst.lastIndexOf('/')) })}; tmp="$dst.svc-tmp-$$"`,
    'if [ -e "$dst" ]; then echo "$dst already exists" >&2; exit 3; fi',
    'mkdir -p -- "$parent"',
    'rm -rf -- "$dst".svc-tmp-*',
    'if [ -d "$src" ]; then',
    '  if cp -al -- "$src" "$tmp" 2>/dev/null; then how="hard links to $src"',
    '  else rm -rf -- "$tmp"; cp -a -- "$src" "$tmp" || { rm -rf -- "$tmp"; exit 1; }; how="a copy of $src"; fi',
    'else',
    '  mkdir -- "$tmp" || exit 1; chown --reference="$parent" -- "$tmp" 2>/dev/null || true; how="empty: $src does not exist"',
    'fi',
    'mv -T -- "$tmp" "$dst" || { rm -rf -- "$tmp"; exit 1; }',
    'echo "$dst: $how"',
  ].join('\n');
}

/** Renames src to dst (which must not exist). */
export function renameFilestoreScript(src: string, dst: string): string {
  return [
    vars({ src, dst }),
    'if [ -e "$dst" ]; then echo "$dst already exists" >&2; exit 3; fi',
    'if [ ! -d "$src" ]; then echo "$src does not exist" >&2; exit 4; fi',
    'mv -T -- "$src" "$dst" && echo "$src → $dst"',
  ].join('\n');
}

/** Removes dst and any copy of it left half-made. */
export function removeFilestoreScript(dst: string): string {
  return [vars({ dst }), 'rm -rf -- "$dst" "$dst".svc-tmp-*', 'echo "$dst removed"'].join('\n');
}

export type FilestoreHost = Pick<AppContext, 'db' | 'secretBox' | 'config'>;

/** Runs one script on an Odoo host (with `input` on its stdin, shown as `label`) and answers its output; a failure is a UserError naming the server. */
export async function runOnOdooHost(
  ctx: FilestoreHost,
  server: RootServer,
  audit: Audit,
  script: string,
  timeoutMs: number,
  input?: { stdin: string; label: string },
): Promise<string> {
  const name = server.name ?? server.ip;
  requireConfirmed(server);
  let session;
  try {
    session = await openRemoteSession(ctx, server, audit);
  } catch (err) {
    throw new UserError(`Odoo host ${name} (root server ${server.id}) could not be reached: ${(err as Error).message}`);
  }
  try {
    const res = await session.run(script, { timeoutMs, ...input });
    if (res.exitCode !== 0 || res.timedOut) {
      throw new UserError(`On Odoo host ${name} (root server ${server.id}): ${session.mask(formatResult(res, timeoutMs)).slice(-2000)}`);
    }
    return res.stdout.trim();
  } finally {
    session.close();
  }
}

export function createFilestores(ctx: FilestoreHost) {
  const path = (server: RootServer, database: string) => filestorePath(basePathOf(ctx.config, server), database);
  return {
    path,
    copy: (server: RootServer, from: string, to: string, audit: Audit) =>
      runOnOdooHost(ctx, server, audit, copyFilestoreScript(path(server, from), path(server, to)), COPY_TIMEOUT_MS),
    rename: (server: RootServer, from: string, to: string, audit: Audit) =>
      runOnOdooHost(ctx, server, audit, renameFilestoreScript(path(server, from), path(server, to)), QUICK_TIMEOUT_MS),
    remove: (server: RootServer, database: string, audit: Audit) =>
      runOnOdooHost(ctx, server, audit, removeFilestoreScript(path(server, database)), QUICK_TIMEOUT_MS),
    /** Renames a database's filestore to `<its path>.<suffix>`: kept, out of the way of a database made again under the name. Answers where it is. */
    async setAside(server: RootServer, database: string, suffix: string, audit: Audit) {
      if (!/^[a-z0-9-]{1,40}$/.test(suffix)) throw new UserError(`${JSON.stringify(suffix)} cannot end a filestore directory's name`);
      const from = path(server, database);
      await runOnOdooHost(ctx, server, audit, renameFilestoreScript(from, `${from}.${suffix}`), QUICK_TIMEOUT_MS);
      return `${from}.${suffix}`;
    },
  };
}
