// A subscription's backup_state: the latest backup its backup server lists for its database,
// mapped done/ok → ok, pending/running → running, failed/error → failed, none → none. The server is the subscription's backup_server_id, or the only backup server there is.
// Also callable by inbound webhooks (a backup server's callback) as `_compute_backup_state`.
import type { AppContext } from '../context.js';
import type { DbTx } from '../core/db.js';
import { NotFoundError, UserError } from '../core/errors.js';
import { trackChanges, type Author } from '../core/chatter.js';
import type { BackupState } from '../generated/prisma/enums.js';
import { createBackupApi, type RemoteBackup } from './backup-api.js';
import { createBackupOverdue, recordBackupDone, type Notice } from './backup-overdue.js';
import { backupServerFor } from './backup-server-for.js';

export { backupServerFor };

/** The states the backup server gives a backup, as backup_state (an unknown one is an error, never guessed). */
export const REMOTE_STATES: Record<string, BackupState> = {
  done: 'ok',
  ok: 'ok',
  pending: 'running',
  running: 'running',
  failed: 'failed',
  error: 'failed',
};

export interface BackupStateResult {
  subscription_id: number;
  backup_server_id: number | null;
  backup_state: BackupState;
  latest_backup: RemoteBackup | null;
  last_backup_at: string | null;
}

/** When a listed backup was made, as a date no later than `now`; null when the server does not say. */
function madeAt(backup: RemoteBackup, now: Date): Date | null {
  const ms = backup.created_at ? Date.parse(backup.created_at) : Number.NaN;
  return Number.isNaN(ms) ? null : new Date(Math.min(ms, now.getTime()));
}

export function createBackupStateService(ctx: Pick<AppContext, 'db' | 'secretBox' | 'config' | 'queues'>) {
  const api = createBackupApi(ctx);
  const overdue = createBackupOverdue(ctx);

  /**
   * Asks the backup server and stores the mapped state (tracked in the subscription's chatter).
   * `tx` lets a caller (the inbound webhook) make the update part of its own transaction; the
   * api_call action-log row is written outside it, so a failure stays visible. The latest
   * completed backup listed moves last_backup_at forward (to when it was made, as the server says).
   */
  async function computeBackupState(subscriptionId: number, opts: { tx?: DbTx; author?: Author | null } = {}): Promise<BackupStateResult> {
    const run = async (tx: DbTx) => {
      const before = await tx.subscription.findUnique({ where: { id: subscriptionId } });
      if (!before) throw new NotFoundError('Subscription');

      let state: BackupState = 'none';
      let latest: RemoteBackup | null = null;
      let serverId: number | null = before.backup_server_id;
      let resolved: Notice | null = null;
      if (before.database_name) {
        const server = await backupServerFor(tx, before.backup_server_id);
        serverId = server.id;
        const target = { model_name: 'svc.subscription' as const, rec_id: subscriptionId, user_id: opts.author?.id ?? null };
        const backups = await api.backups(server, target, before.database_name);
        const ours = backups.filter((b) => b.db_name === before.database_name);
        latest = ours[0] ?? null;
        if (latest) {
          const mapped = REMOTE_STATES[latest.state.toLowerCase()];
          if (!mapped) throw new UserError(`The backup server reports an unknown backup state "${latest.state}"`);
          state = mapped;
        }
        const done = ours.find((b) => REMOTE_STATES[b.state.toLowerCase()] === 'ok');
        const at = done && before.database_created_at ? madeAt(done, new Date()) : null;
        if (at) resolved = await recordBackupDone(tx, subscriptionId, at);
      }

      if (state !== before.backup_state) {
        const after = await tx.subscription.update({ where: { id: subscriptionId }, data: { backup_state: state } });
        await trackChanges(
          tx,
          { model_name: 'svc.subscription', rec_id: subscriptionId },
          ['backup_state'],
          before,
          after,
          opts.author ?? null,
        );
      }
      const { last_backup_at } = await tx.subscription.findUniqueOrThrow({
        where: { id: subscriptionId },
        select: { last_backup_at: true },
      });
      const result = {
        subscription_id: subscriptionId,
        backup_server_id: serverId,
        backup_state: state,
        latest_backup: latest,
        last_backup_at: last_backup_at?.toISOString() ?? null,
      };
      return { result, resolved };
    };
    const { result, resolved } = await (opts.tx
      ? run(opts.tx)
      : ctx.db.$transaction(run, { timeout: ctx.config.OUTBOUND_TIMEOUT_MS + 5_000 }));
    await overdue.tellOperators(resolved);
    return result;
  }

  return { computeBackupState };
}
