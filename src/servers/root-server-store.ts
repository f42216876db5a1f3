// Reading and changing root server rows with their rules: tracked fields go to the chatter, and
// SSH work needs a confirmed server (a cancelled one refuses every SSH action).
import type { Db, DbTx } from '../core/db.js';
import { ConflictError, NotFoundError, ValidationError } from '../core/errors.js';
import type { Prisma, RootServer } from '../generated/prisma/client.js';
import { trackChanges, type Author } from '../core/chatter.js';
import { rootServerModel } from './root-server-models.js';

export async function loadRootServer(db: Db | DbTx, id: number): Promise<RootServer> {
  const server = await db.rootServer.findUnique({ where: { id } });
  if (!server) throw new NotFoundError('Root server');
  return server;
}

/** Refuses a list of root server ids (400 on `field`) naming those that do not exist. */
export async function assertRootServersExist(client: Pick<Db, 'rootServer'>, ids: number[], field = 'root_server_ids') {
  if (ids.length === 0) return;
  const found = await client.rootServer.findMany({ where: { id: { in: ids } }, select: { id: true } });
  const known = new Set(found.map((r) => r.id));
  const unknown = ids.filter((id) => !known.has(id));
  if (unknown.length > 0) throw new ValidationError(`Unknown root server ids: ${unknown.join(', ')}`, field);
}

/**
 * What the service itself changes on a root server (state, command output, monitoring, code
 * editor). Where it connects and with what is the REST update's alone (records.update), which
 * clears the credentials when the destination moves: the compiler keeps those fields out of here.
 */
type ServiceUpdate = Omit<
  Prisma.RootServerUpdateInput,
  'ip' | 'port' | 'username' | 'password' | 'key' | 'code_server_password' | 'host_key'
>;

/** Updates a root server and records the tracked changes, in the caller's transaction. */
export async function updateRootServer(tx: DbTx, id: number, data: ServiceUpdate, author: Author | null = null) {
  const before = await loadRootServer(tx, id);
  const after = await tx.rootServer.update({ where: { id }, data });
  await trackChanges(tx, { model_name: 'svc.root.server', rec_id: id }, rootServerModel.tracked, before, after, author);
  return after;
}

/** SSH actions need a confirmed server: a draft one has not proven its credentials, a cancelled one is disabled. */
export function requireConfirmed(server: Pick<RootServer, 'state'>) {
  if (server.state === 'cancel') throw new ConflictError('The root server is cancelled: it refuses every SSH action');
  if (server.state !== 'confirmed') throw new ConflictError('Confirm the root server first (actions/confirm tests its SSH connection)');
}
