// Which backup server backs a subscription up: its backup_server_id, or the only one there is.
import type { Db, DbTx } from '../core/db.js';
import { UserError } from '../core/errors.js';

/** A subscription's backup server: its backup_server_id, or the only backup server there is. */
export async function backupServerFor(db: Db | DbTx, backupServerId: number | null) {
  if (backupServerId !== null) return db.backupServer.findUniqueOrThrow({ where: { id: backupServerId } });
  const servers = await db.backupServer.findMany({ take: 2 });
  if (servers.length === 1) return servers[0]!;
  throw new UserError(
    servers.length === 0
      ? 'There is no backup server'
      : 'The subscription has no backup server and there are several: set its backup_server_id',
  );
}
