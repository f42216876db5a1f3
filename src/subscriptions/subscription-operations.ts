// Backups, restores and the drop of a subscription's database (DESIGN §7, §9), run as jobs. Each
// claims the subscription first (`operation`, under the row lock, from the states it needs), so
// only one runs at a time and the state does not change meanwhile; it is released at the end, on
// failure too. Every step is written to the chatter and the action log as it happens, so a job cut
// short shows how far it got; the interruption handlers below finish the record.
import type { AppContext } from '../context.js';
import type { Db, DbTx } from '../core/db.js';
import { ConflictError, NotFoundError, UserError } from '../core/errors.js';
import { startActionLog } from '../core/action-log.js';
import { authorOfUser, trackChanges, type Author } from '../core/chatter.js';
import { sleep } from '../core/sleep.js';
import type { Subscription } from '../generated/prisma/client.js';
import type { BackupState, SubscriptionOperation, SubscriptionState } from '../generated/prisma/enums.js';
import { createFilestores } from '../instances/filestore.js';
import { createBackupApi, type BackupServerRecord, type RemoteBackup } from '../backup/backup-api.js';
import { backupServerFor, REMOTE_STATES } from '../backup/backup-state.js';
import { actorFields, onSubscription, postAlert, postNotice, type Actor } from './subscription-audit.js';
import { assertOwnDatabase, databaseStatus, dropDatabase, setConnections, type DatabaseStatus } from './subscription-database.js';
import { assertIdle, assertState, lockSubscription, setSubscriptionState } from './subscription-service.js';
import { REMOTE_TX } from './subscription-suspension.js';

/** States whose database exists and can be backed up (a cancelled one keeps it until dropped). */
const BACKUP_STATES: readonly SubscriptionState[] = ['running', 'suspended', 'cancelled'];
const RESTORE_STATES: readonly SubscriptionState[] = ['running'];
const DROP_STATES: readonly SubscriptionState[] = ['suspended', 'cancelled'];
const MAX_POLL_MS = 30_000;

type Deps = Pick<AppContext, 'db' | 'box' | 'config'>;

const isDone = (b: RemoteBackup) => REMOTE_STATES[b.state.toLowerCase()] === 'ok';

/** The checks an operation starts with, at the API (a quick 409/400) and again when its job claims the row. */
function assertOperable(sub: Subscription, states: readonly SubscriptionState[], action: string) {
  assertState(sub, states, action);
  assertIdle(sub, action);
  if (sub.database_dropped_at) {
    throw new ConflictError(`The database of subscription ${sub.id} was dropped on ${sub.database_dropped_at.toISOString()}`);
  }
  assertOwnDatabase(sub);
}

export function createDatabaseOperations(ctx: Deps) {
  const { db, config } = ctx;
  const api = createBackupApi(ctx);
  const filestores = createFilestores(ctx);

  async function claim(
    id: number,
    operation: SubscriptionOperation,
    states: readonly SubscriptionState[],
    jobId: string | null,
    extra = {},
  ) {
    return db.$transaction(async (tx) => {
      const before = await lockSubscription(tx, id);
      assertOperable(before, states, operation);
      return tx.subscription.update({ where: { id }, data: { operation, operation_job_id: jobId, ...extra } });
    });
  }

  /** Ends the claim of `jobId` (and only its own). */
  const release = (tx: Db | DbTx, id: number, jobId: string | null) =>
    tx.subscription.updateMany({ where: { id, operation_job_id: jobId }, data: { operation: null, operation_job_id: null } });

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
      if (state === 'failed') throw new UserError(`The backup server reports backup ${mine.id} of ${dbName} as ${mine.state}`);
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
  ): Promise<T> {
    const status = await existingDatabase(sub, known);
    const opened = !status.allowConnections;
    if (opened) {
      await setConnections(ctx, sub, 'superusers', actor);
      await postNotice(
        db,
        sub.id,
        `Database ${sub.database_name} opened to superusers for the backup (CONNECTION LIMIT 0 keeps other roles out).`,
        author,
      );
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
        await setConnections(ctx, sub, 'closed', actor);
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

  /** The subscription's database is gone: cancelled, with the date, claim ended. */
  async function markDropped(tx: DbTx, id: number, author: Author | null, body: string) {
    const before = await lockSubscription(tx, id);
    const after = await setSubscriptionState(tx, before, 'cancelled', author, {
      database_dropped_at: new Date(),
      database_created_at: null,
      database_system_identifier: null,
      database_oid: null,
      operation: null,
      operation_job_id: null,
      suspended_at: null,
      suspend_reason: null,
    });
    await postNotice(tx, id, body, author);
    return after;
  }

  /**
   * After a drop that may or may not have happened (an error or a crash after DROP DATABASE was
   * sent): PostgreSQL is asked. Gone → cancelled; still there → unchanged (closed again if the
   * backup had opened it); no answer → unchanged, with an alert saying how to find out.
   */
  async function reconcileDrop(tx: DbTx, id: number, jobId: string | null, author: Author | null, why: string) {
    const sub = await lockSubscription(tx, id);
    if (sub.operation_job_id !== jobId) return; // the job never claimed it: nothing was done
    const actor = { userId: author?.id ?? null, jobId };
    try {
      const status = await databaseStatus(ctx, sub, tx);
      if (!status.exists) {
        await markDropped(
          tx,
          id,
          author,
          `${why} Database ${sub.database_name} no longer exists: the drop happened; subscription cancelled.`,
        );
        return;
      }
      await release(tx, id, jobId);
      let closed = '';
      if (status.openForSuperusers) closed = ` ${await setConnections(ctx, sub, 'closed', actor, tx)}.`;
      await postAlert(
        tx,
        id,
        `${why} Database ${sub.database_name} still exists: nothing was dropped; the subscription is unchanged.${closed}`,
        author,
      );
    } catch (err) {
      await release(tx, id, jobId);
      await postAlert(
        tx,
        id,
        `${why} Whether database ${sub.database_name} still exists could not be checked: ${(err as Error).message}. ` +
          'Run drop_database again: it finds out, and marks the subscription cancelled if the database is gone.',
        author,
      );
    }
  }

  /** Ends an interrupted backup or restore: the claim is released and a database opened for a backup is closed again. */
  async function releaseInterrupted(tx: DbTx, id: number, jobId: string) {
    const sub = await lockSubscription(tx, id);
    if (sub.operation_job_id !== jobId) return;
    await release(tx, id, jobId);
    if (!sub.database_template_id) return;
    try {
      const status = await databaseStatus(ctx, sub, tx);
      if (status.openForSuperusers)
        await postNotice(tx, id, `${await setConnections(ctx, sub, 'closed', { userId: null, jobId }, tx)}.`, null);
    } catch (err) {
      await postAlert(tx, id, `Could not check that database ${sub.database_name} is closed again: ${(err as Error).message}`, null);
    }
  }

  /**
   * The dropped database's filestore on the template's Odoo host. The drop is done whatever happens
   * here: a failure is an alert in the chatter (the command and its output are in the root server's
   * action log).
   */
  async function removeFilestore(sub: Subscription, actor: Actor, author: Author | null) {
    const template = sub.database_template_id
      ? await db.databaseTemplate.findUnique({ where: { id: sub.database_template_id }, include: { root_server: true } })
      : null;
    if (!template?.root_server) return;
    try {
      const out = await filestores.remove(template.root_server, sub.database_name!, actorFields(actor));
      await postNotice(db, sub.id, `Filestore removed on root server ${template.root_server.id}: ${out}`, author);
    } catch (err) {
      await postAlert(db, sub.id, `The filestore of ${sub.database_name} could not be removed: ${(err as Error).message}`, author);
    }
  }

  /** A job's step in the action log (`database`), finished with its outcome. */
  const step = (id: number, actor: Actor, input_text: string) =>
    startActionLog(db, { ...onSubscription(id), action_type: 'database', input_text, ...actorFields(actor) });

  /**
   * A backup or restore: claimed, its step in the action log, then `work`; on either outcome the
   * claim is released, the chatter told and the step finished, in one transaction.
   */
  async function operate<T>(
    id: number,
    operation: 'backup' | 'restore',
    states: readonly SubscriptionState[],
    actor: Actor,
    what: string,
    inputText: (sub: Subscription) => string,
    work: (sub: Subscription, author: Author | null) => Promise<{ done: string; result: T }>,
  ): Promise<T> {
    const author = await authorOfUser(db, actor.userId);
    const sub = await claim(id, operation, states, actor.jobId);
    const row = await step(id, actor, inputText(sub));
    try {
      const { done, result } = await work(sub, author);
      await db.$transaction(async (tx) => {
        await release(tx, id, actor.jobId);
        await postNotice(tx, id, done, author);
        await row.finish('success', done, tx);
      });
      return result;
    } catch (err) {
      const message = `${what} failed: ${(err as Error).message}`;
      await db.$transaction(async (tx) => {
        await release(tx, id, actor.jobId);
        await postAlert(tx, id, `${message}. The subscription is unchanged.`, author);
        await row.finish('failure', message, tx);
      });
      throw err;
    }
  }

  return {
    /** API checks before a backup job is queued. */
    async checkBackup(id: number) {
      assertOperable(await getSubscription(db, id), BACKUP_STATES, 'backup');
    },

    async checkDrop(id: number) {
      assertOperable(await getSubscription(db, id), DROP_STATES, 'drop_database');
    },

    /** API checks before a restore is queued; answers the backup to restore (the latest done one unless named). */
    async resolveRestore(id: number, backupId: string | number | undefined, userId: number | null): Promise<string | number> {
      const sub = await getSubscription(db, id);
      assertOperable(sub, RESTORE_STATES, 'restore');
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
      operate(
        id,
        'backup',
        BACKUP_STATES,
        actor,
        'Backup',
        (sub) => `backup of database ${sub.database_name}`,
        async (sub, author) => {
          const server = await backupServerFor(db, sub.backup_server_id);
          const backup = await withBackupAccess(sub, actor, author, () => runBackup(sub, server, actor, author));
          return { done: backupDone('Backup', backup, sub, server), result: { subscription_id: id, backup_server_id: server.id, backup } };
        },
      ),

    restore: (id: number, backupId: string | number, actor: Actor) =>
      operate(
        id,
        'restore',
        RESTORE_STATES,
        actor,
        'Restore',
        (sub) => `restore of database ${sub.database_name} from backup ${backupId}`,
        async (sub) => {
          const server = await backupServerFor(db, sub.backup_server_id);
          await existingDatabase(sub);
          const answer = await api.restore(server, { ...onSubscription(id), ...actorFields(actor) }, sub.database_name!, backupId);
          if (answer.state && REMOTE_STATES[answer.state.toLowerCase()] === 'failed') {
            throw new UserError(`The backup server answered the restore with state "${answer.state}"`);
          }
          const done = `Database ${sub.database_name} restored from backup ${backupId} by backup server ${server.id}${answer.state ? ` (state: ${answer.state})` : ''}.`;
          return { done, result: { subscription_id: id, backup_server_id: server.id, backup_id: backupId, answer } };
        },
      ),

    /**
     * The final backup (which must end done, unless skip_backup), then DROP DATABASE, then
     * cancelled. Each step is in the chatter before it starts; a failure before the drop leaves
     * everything as it was, one during or after it is settled by asking PostgreSQL.
     */
    async drop(id: number, skipBackup: boolean, actor: Actor) {
      const author = await authorOfUser(db, actor.userId);
      const sub = await claim(id, 'drop_database', DROP_STATES, actor.jobId, { drop_attempted_at: new Date() });
      const name = sub.database_name!;
      await postNotice(
        db,
        id,
        `drop_database of ${name} started (job ${actor.jobId})${skipBackup ? `, without a backup (skip_backup by ${author?.name ?? 'the service'})` : ': final backup first'}.`,
        author,
      );
      let dropSent = false;
      try {
        const status = await databaseStatus(ctx, sub);
        const { where } = status;
        if (!status.exists) {
          await db.$transaction((tx) =>
            markDropped(tx, id, author, `Database ${name} does not exist on ${where}: nothing to back up or drop; subscription cancelled.`),
          );
          return { subscription_id: id, database_name: name, backup: null, dropped: false };
        }
        let backup: RemoteBackup | null = null;
        if (!skipBackup) {
          const server = await backupServerFor(db, sub.backup_server_id);
          backup = await withBackupAccess(sub, actor, author, () => runBackup(sub, server, actor, author), status);
          await postNotice(db, id, backupDone('Final backup', backup, sub, server), author);
        }
        await postNotice(db, id, `Dropping database ${name} on ${where} (DROP DATABASE WITH (FORCE)).`, author);
        dropSent = true;
        await dropDatabase(ctx, sub, actor);
        await db.$transaction((tx) => markDropped(tx, id, author, `Database ${name} dropped; subscription cancelled.`));
        await removeFilestore(sub, actor, author);
        return { subscription_id: id, database_name: name, backup, dropped: true };
      } catch (err) {
        const message = `drop_database failed: ${(err as Error).message}.`;
        if (dropSent) {
          await db.$transaction((tx) => reconcileDrop(tx, id, actor.jobId, author, message), REMOTE_TX);
        } else {
          await db.$transaction(async (tx) => {
            await release(tx, id, actor.jobId);
            await postAlert(tx, id, `${message} Nothing was dropped; the subscription is unchanged.`, author);
          });
        }
        throw err;
      }
    },

    /** Interruption handlers (src/jobs/job-interruption.ts), in its transaction. */
    interrupted: {
      operation: releaseInterrupted,
      drop: (tx: DbTx, id: number, jobId: string) => reconcileDrop(tx, id, jobId, null, 'drop_database was interrupted.'),
    },
  };
}

async function getSubscription(db: Db, id: number) {
  const sub = await db.subscription.findUnique({ where: { id } });
  if (!sub) throw new NotFoundError('Subscription');
  return sub;
}

function backupDone(what: string, backup: RemoteBackup, sub: Subscription, server: { id: number }) {
  return `${what} ${backup.id} of ${sub.database_name} done on backup server ${server.id}${backup.url ? `: ${backup.url}` : ''}.`;
}
