// A staging copy made from a backup instead of from the live instance (create_staging with
// backup_id): the subscription's backup server restores that backup into the copy's database and
// filestore. Only a backup server that says it can restore into another database than the live one
// (svc's own: its ping answers restore_into) is asked: another might ignore the target and restore
// over the live instance. The rest of create_staging (the copy's own role, identity, neutralize)
// follows as for a copy of the live instance.
import type { AppContext } from '../context.js';
import { UserError } from '../core/errors.js';
import { backupServerFor, createBackupApi, createRestoreFollower, REMOTE_STATES } from '../backup/index.js';
import type { StagingInstance, Subscription } from '../generated/prisma/client.js';

type Ctx = Pick<AppContext, 'db' | 'secretBox' | 'config'>;

export function createStagingFromBackup(ctx: Ctx) {
  const api = createBackupApi(ctx);
  const followRestore = createRestoreFollower(ctx);
  const target = (sub: Pick<Subscription, 'id'>, userId: number | null) => ({
    model_name: 'svc.subscription' as const,
    rec_id: sub.id,
    user_id: userId,
  });

  return {
    /** A 400 unless `backupId` is a completed backup of the subscription's database on a backup server that restores into a copy. */
    async check(sub: Pick<Subscription, 'id' | 'backup_server_id' | 'database_name'>, backupId: number, userId: number | null) {
      const server = await backupServerFor(ctx.db, sub.backup_server_id);
      if (!(await api.restoresInto(server, target(sub, userId))))
        throw new UserError(
          `Backup server ${server.id} cannot restore a backup into another database than the live one: a staging copy is made from the live instance`,
        );
      const listed = await api.backups(server, target(sub, userId), sub.database_name!);
      const backup = listed.find((b) => String(b.id) === String(backupId) && b.db_name === sub.database_name);
      if (!backup) throw new UserError(`Backup ${backupId} is not a backup of ${sub.database_name} on backup server ${server.id}`);
      if (REMOTE_STATES[backup.state.toLowerCase()] !== 'ok')
        throw new UserError(`Backup ${backupId} of ${sub.database_name} is ${backup.state}: only a completed backup can be restored`);
    },

    /** The backup restored into the copy's database (owned by the tenant's role) and filestore; answers what the server said. */
    async restoreInto(sub: Pick<Subscription, 'id' | 'backup_server_id' | 'database_name'>, row: StagingInstance, userId: number | null) {
      const server = await backupServerFor(ctx.db, sub.backup_server_id);
      const answer = await api.restore(server, target(sub, userId), sub.database_name!, row.backup_id!, row.database_name);
      if (answer.id === undefined || answer.id === null)
        throw new UserError(`Backup server ${server.id} answered the restore without its id`);
      await followRestore(server, target(sub, userId), answer.id);
      return `backup ${row.backup_id} restored into ${row.database_name} by backup server ${server.id} (restore ${answer.id})`;
    },
  };
}
