// The backup and the restore of a subscription's database, run as jobs under the subscription's
// claim (subscription-claim.ts). Every step is written to the chatter and the action log as it
// happens, so a job cut short shows how far it got; `interrupted` finishes the record.
import type { AppContext } from '../context.js';
import type { DbTx } from '../core/db.js';
import { UserError } from '../core/errors.js';
import { startActionLog } from '../core/action-log.js';
import { authorOfUser, trackChanges, type Author } from '../core/chatter.js';
import { sleep } from '../core/sleep.js';
import type { Subscription } from '../generated/prisma/client.js';
import type { BackupState } from '../generated/prisma/enums.js';
import {
  createBackupApi,
  createBackupOverdue,
  createRestoreFollower,
  type BackupServerRecord,
  type RemoteBackup,
  backupServerFor,
  recordBackupDone,
  REMOTE_STATES,
} from '../backup/index.js';
import { actorFields, onSubscription, postAlert, postNotice, type Actor } from './subscription-audit.js';
import { checkOperable, claimSubscription, releaseClaim } from './subscription-claim.js';
import { databaseStatus, setConnections, type DatabaseStatus } from './subscription-database.js';
import { lockSubscription } from './subscription-service.js';

const MAX_POLL_MS = 30_000;
/** The action-log row of closing a database again after an interrupted backup or restore. */
const INTERRUPTED_CLOSE = 'backup interrupted (closed again)';

const isDone = (b: RemoteBackup) => REMOTE_STATES[b.state.toLowerCase()] === 'ok';

/** The chatter's line for a backup that ended done. */
export function backupDone(what: string, backup: RemoteBackup, sub: Subscription, server: { id: number }) {
  return `${what} ${backup.id} of ${sub.database_name} done on backup server ${server.id}${backup.url ? `: ${backup.url}` : ''}.`;
}

export function createBackupOperations(ctx: Pick<AppContext, 'db' | 'secretBox' | 'config' | 'queues'>) {
  const { db, config } = ctx;
  const api = createBackupApi(ctx);
  const followRestore = createRestoreFollower(ctx);
  const overdue = createBackupOverdue(ctx);

  async function setBackupState(id: number, state: BackupState, author: Author | null) {
    await db.$transaction(async (tx) => {
      const before = await tx.subscription.findUniqueOrThrow({ where: { id } });
      if (before.backup_state === state) return;
      const after = await tx.subscription.update({ where: { id }, data: { backup_state: state } });
      await trackChanges(tx, onSubscription(id), ['backup_state'], before, after, author);
    });
  }

  /**
   * POST {backup_db_path}, then reads GET /api/backups?db_name= until the backup made by this
   * request is done or failed, within BACKUP_WAIT_MS. The backup is the one whose id the request
   * answered, else the first listed that was not listed before the request (no clock comparison
   * between the two machines).
   */
  async function runBackup(sub: Subscription, server: BackupServerRecord & { id: number }, actor: Actor, author: Author | null) {
    const target = { ...onSubscription(sub.id), ...actorFields(actor) };
    const dbName = sub.database_name!;
    const known = new Set((await api.backups(server, target, dbName)).map((b) => String(b.id)));
    const accepted = await api.requestBackup(server, target, dbName);
    if (accepted.state && REMOTE_STATES[accepted.state.toLowerCase()] === 'failed') {
      throw new UserError(`The backup server answered the backup request of ${dbName} with state "${accepted.state}"`);
    }
    await setBackupState(sub.id, 'running', author);
    const deadline = Date.now() + config.BACKUP_WAIT_MS;
    let wait = config.BACKUP_POLL_MS;
    let last = accepted.state ?? 'not listed yet';
    for (let left = deadline - Date.now(); left > 0; left = deadline - Date.now()) {
      await sleep(Math.min(wait, left));
      wait = Math.min(wait * 2, MAX_POLL_MS);
      const listed = await api.backups(server, target, dbName);
      const mine =
        accepted.id !== undefined && accepted.id !== null
          ? listed.find((b) => String(b.id) === String(accepted.id))
          : listed.find((b) => b.db_name === dbName && !known.has(String(b.id)));
      if (!mine) continue;
      last = mine.state;
      const state = REMOTE_STATES[mine.state.toLowerCase()];
      if (!state) throw new UserError(`The backup server reports an unknown state "${mine.state}" for backup ${mine.id} of ${dbName}`);
      if (state === 'running') continue;
      await setBackupState(sub.id, state, author);
      if (state === 'failed')
        throw new UserError(
          `The backup server reports backup ${mine.id} of ${dbName} as ${mine.state}${mine.error ? `: ${mine.error}` : ''}`,
        );
      // Seen done now: last_backup_at (what the daily schedule and the 26 h alert go by).
      await overdue.tellOperators(await recordBackupDone(db, sub.id, new Date()));
      return mine;
    }
    throw new UserError(
      `The backup of ${dbName} was not reported done within ${config.BACKUP_WAIT_MS} ms (last state: ${last}); ` +
        'it may still finish on the backup server (compute_backup_state reads it)',
    );
  }

  /**
   * The database this subscription's deployment created, there now: the only name a backup server
   * is ever sent.
   */
  async function existingDatabase(sub: Subscription, known?: DatabaseStatus) {
    const status = known ?? (await databaseStatus(ctx, sub));
    if (!status.exists) throw new UserError(`Database ${sub.database_name} does not exist on ${status.where}`);
    return status;
  }

  /**
   * The backup server must connect to the database: a closed one (suspended) is opened to
   * superusers only for the backup, and closed again afterwards whatever happened.
   */
  async function withBackupAccess<T>(
    sub: Subscription,
    actor: Actor,
    author: Author | null,
    work: () => Promise<T>,
    known?: DatabaseStatus,
  ) {
    const status = await existingDatabase(sub, known);
    const opened = !status.allowConnections;
    if (opened) {
      await setConnections(ctx, sub, 'superusers', actor, 'backup (open to superusers)');
      const body = `Database ${sub.database_name} opened to superusers for the backup (CONNECTION LIMIT 0 keeps other roles out).`;
      await postNotice(db, sub.id, body, author);
    }
    let result: T | undefined;
    let failure: unknown;
    try {
      result = await work();
    } catch (err) {
      failure = err;
    }
    if (opened) {
      try {
        await setConnections(ctx, sub, 'closed', actor, 'backup (closed again)');
        await postNotice(db, sub.id, `Database ${sub.database_name} closed to connections again.`, author);
      } catch (err) {
        const message = `Database ${sub.database_name} could not be closed again after the backup: ${(err as Error).message}. It accepts superusers only.`;
        await postAlert(db, sub.id, message, author);
        failure ??= new UserError(message);
      }
    }
    if (failure) throw failure;
    return result as T;
  }

  /** A backup made now on the subscription's backup server, waited for until it is done. */
  async function backUp(sub: Subscription, actor: Actor, author: Author | null, known?: DatabaseStatus) {
    const server = await backupServerFor(db, sub.backup_server_id);
    const backup = await withBackupAccess(sub, actor, author, () => runBackup(sub, server, actor, author), known);
    return { server, backup };
  }

  /**
   * A backup or restore: claimed, its step in the action log (`step`), then `work`; on either
   * outcome the claim is released, the chatter told and the step finished, in one transaction.
   */
  async function operate<T>(o: {
    id: number;
    operation: 'backup' | 'restore';
    actor: Actor;
    step: (sub: Subscription) => string;
    work: (sub: Subscription, author: Author | null) => Promise<{ done: string; result: T }>;
  }): Promise<T> {
    const { id, actor } = o;
    const author = await authorOfUser(db, actor.userId);
    const sub = await claimSubscription(db, id, o.operation, actor.jobId);
    const row = await startActionLog(db, {
      ...onSubscription(id),
      action_type: 'database',
      input_text: o.step(sub),
      ...actorFields(actor),
    });
    try {
      const { done, result } = await o.work(sub, author);
      await db.$transaction(async (tx) => {
        await releaseClaim(tx, id, actor.jobId);
        await postNotice(tx, id, done, author);
        await row.finish('success', done, tx);
      });
      return result;
    } catch (err) {
      const message = `${o.operation === 'backup' ? 'Backup' : 'Restore'} failed: ${(err as Error).message}`;
      await db.$transaction(async (tx) => {
        await releaseClaim(tx, id, actor.jobId);
        await postAlert(tx, id, `${message}. The subscription is unchanged.`, author);
        await row.finish('failure', message, tx);
      });
      throw err;
    }
  }

  return {
    backUp,

    /** API checks before a backup job is queued. */
    async checkBackup(id: number) {
      await checkOperable(db, id, 'backup');
    },

    /** API checks before a restore is queued; answers the backup to restore (the latest done one unless named). */
    async resolveRestore(id: number, backupId: string | number | undefined, userId: number | null): Promise<string | number> {
      const sub = await checkOperable(db, id, 'restore');
      const server = await backupServerFor(db, sub.backup_server_id);
      const listed = (await api.backups(server, { ...onSubscription(id), user_id: userId }, sub.database_name!)).filter(
        (b) => b.db_name === sub.database_name,
      );
      const named = backupId === undefined ? listed.find(isDone) : listed.find((b) => String(b.id) === String(backupId));
      if (!named) {
        const ids = listed.map((b) => `${b.id} (${b.state})`).join(', ') || 'none';
        throw new UserError(
          backupId === undefined
            ? `Backup server ${server.id} lists no completed backup of ${sub.database_name} (backups: ${ids})`
            : `Backup ${backupId} is not a backup of ${sub.database_name} on backup server ${server.id} (it lists: ${ids})`,
        );
      }
      if (!isDone(named))
        throw new UserError(`Backup ${named.id} of ${sub.database_name} is ${named.state}: only a completed backup can be restored`);
      return named.id;
    },

    backup: (id: number, actor: Actor) =>
      operate({
        id,
        operation: 'backup',
        actor,
        step: (sub) => `backup of database ${sub.database_name}`,
        work: async (sub, author) => {
          const { server, backup } = await backUp(sub, actor, author);
          return { done: backupDone('Backup', backup, sub, server), result: { subscription_id: id, backup_server_id: server.id, backup } };
        },
      }),

    restore: (id: number, backupId: string | number, actor: Actor) =>
      operate({
        id,
        operation: 'restore',
        actor,
        step: (sub) => `restore of database ${sub.database_name} from backup ${backupId}`,
        work: async (sub) => {
          const server = await backupServerFor(db, sub.backup_server_id);
          await existingDatabase(sub);
          const target = { ...onSubscription(id), ...actorFields(actor) };
          let answer = await api.restore(server, target, sub.database_name!, backupId);
          if (answer.state && REMOTE_STATES[answer.state.toLowerCase()] === 'failed') {
            throw new UserError(`The backup server answered the restore with state "${answer.state}"`);
          }
          // A server that restores in the background (svc's own) answers the restore's id: it is followed to its end.
          if (answer.id !== undefined && answer.id !== null && REMOTE_STATES[answer.state?.toLowerCase() ?? ''] === 'running') {
            answer = await followRestore(server, target, answer.id);
          }
          const done = `Database ${sub.database_name} restored from backup ${backupId} by backup server ${server.id}${answer.state ? ` (state: ${answer.state})` : ''}.`;
          return { done, result: { subscription_id: id, backup_server_id: server.id, backup_id: backupId, answer } };
        },
      }),

    /**
     * An interrupted backup or restore (the job's interruption handler, in its transaction): the
     * claim is released and a database opened for a backup is closed again.
     */
    async interrupted(tx: DbTx, id: number, jobId: string) {
      const sub = await lockSubscription(tx, id);
      if (sub.operation_job_id !== jobId) return;
      await releaseClaim(tx, id, jobId);
      if (!sub.database_template_id) return;
      try {
        const status = await databaseStatus(ctx, sub, tx);
        if (status.openForSuperusers)
          await postNotice(tx, id, `${await setConnections(ctx, sub, 'closed', { userId: null, jobId }, INTERRUPTED_CLOSE, tx)}.`, null);
      } catch (err) {
        await postAlert(tx, id, `Could not check that database ${sub.database_name} is closed again: ${(err as Error).message}`, null);
      }
    },
  };
}
