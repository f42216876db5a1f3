// A customer's filestore (attachments, logos) on the Odoo host that serves the template's databases:
// <data_dir>/filestore/<database> (data_dir: <ODOO_BASE_PATH>/data, the layout of
// setup_dir_structure). One set of programs copies, renames and removes filestores
// (host/filestore-*.sh), for a new customer database as for a safety copy (safety-copy.ts): a copy
// is made of hard links where the file system allows (cp -al, as click-odoo-copydb does), under a
// temporary name renamed when complete, so no half-copied directory is ever taken for a filestore.
// Every command goes to the root server's action log.
import type { AppContext } from '../context.js';
import { UserError } from '../core/errors.js';
import { hostProgram, shCommand } from '../core/host-program.js';
import type { RootServer } from '../generated/prisma/client.js';
import { basePathOf, openRemoteSession, type Audit, requireConfirmed } from '../servers/index.js';

const COPY = hostProgram(new URL('./host/filestore-copy.sh', import.meta.url));
const RENAME = hostProgram(new URL('./host/filestore-rename.sh', import.meta.url));
const REMOVE = hostProgram(new URL('./host/filestore-remove.sh', import.meta.url));

/** Large filestores take a while to link, longer to copy. */
const COPY_TIMEOUT_MS = 30 * 60_000;
const QUICK_TIMEOUT_MS = 5 * 60_000;

/** A database name as a directory name: no path separator, no dot first. */
const SAFE_NAME = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}$/;

/** Where the host's Odoo keeps its data (OdooLayout's dataDir): filestore/<database> under it. */
export interface OdooDataDir {
  dataDir: string;
}

/** A database's name, checked to name a file or directory of its own (its filestore, its flag, its credentials). */
export function fileNameOf(database: string): string {
  if (!SAFE_NAME.test(database)) throw new UserError(`${JSON.stringify(database)} cannot name a filestore directory`);
  return database;
}

const filestoreIn = (l: OdooDataDir, database: string) => `${l.dataDir}/filestore/${fileNameOf(database)}`;

export const filestorePath = (basePath: string, database: string): string => filestoreIn({ dataDir: `${basePath}/data` }, database);

/** Copies a filestore to `dst`, which must not exist; an empty directory when there is none to copy. */
const copyFilestoreScript = (src: string, dst: string) => shCommand(COPY, 'filestore-copy', src, dst, 'new');

/** Renames a filestore to `dst`, which must not exist. */
const renameFilestoreScript = (src: string, dst: string) => shCommand(RENAME, 'filestore-rename', src, dst, 'new');

/** Removes a filestore and any copy of it left half-made. */
const removeFilestoreScript = (dst: string) => shCommand(REMOVE, 'filestore-remove', dst);

/** The safety copy of a database's filestore (replacing one an earlier run left); none when the database has no filestore. */
export const copyFilestore = (l: OdooDataDir, database: string, copy: string) =>
  shCommand(COPY, 'filestore-copy', filestoreIn(l, database), filestoreIn(l, copy), 'replace');

/** Puts the filestore back from its safety copy (idempotent: without a copy, there is nothing to do). */
export const restoreFilestore = (l: OdooDataDir, database: string, copy: string) =>
  shCommand(RENAME, 'filestore-rename', filestoreIn(l, copy), filestoreIn(l, database), 'replace');

/** Removes what is left of a safety copy's filestore. */
export const removeFilestoreCopy = (l: OdooDataDir, copy: string) => removeFilestoreScript(filestoreIn(l, copy));

export type FilestoreHost = Pick<AppContext, 'db' | 'secretBox' | 'config'>;

/**
 * Runs one command on a confirmed Odoo host (with `stdin`, shown in the action log as `label`) and
 * answers its output; any failure is a UserError naming the server and `what` the command was for
 * (RemoteSession.check).
 */
export async function runOnOdooHost(
  ctx: FilestoreHost,
  server: RootServer,
  audit: Audit,
  command: string,
  timeoutMs: number,
  input: { stdin?: string; label?: string; what?: string } = {},
): Promise<string> {
  const { what, ...opts } = input;
  const host = `Odoo host ${server.name ?? server.ip} (root server ${server.id})`;
  requireConfirmed(server);
  const session = await openRemoteSession(ctx, server, audit).catch((err: Error) => {
    throw new UserError(`${host} could not be reached: ${err.message}`);
  });
  try {
    return (await session.check(command, what ? `${what} on ${host}` : `On ${host}`, { timeoutMs, ...opts })).stdout.trim();
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
