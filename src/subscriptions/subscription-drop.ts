// The drop of a subscription's database (drop_database), run as a job under the subscription's
// claim (subscription-claim.ts): the final backup (which must end done, unless skip_backup), then
// DROP DATABASE, then cancelled, then the filestore (removed only when the final backup holds it).
// Each step is in the chatter before it starts; a failure before the drop leaves everything as it
// was, one during or after it is settled by asking PostgreSQL.
import type { AppContext } from '../context.js';
import type { DbTx } from '../core/db.js';
import { authorOfUser, type Author } from '../core/chatter.js';
import type { Subscription } from '../generated/prisma/client.js';
import { createFilestores, loadPlacement, removeTenantCredentials } from '../instances/index.js';
import type { RemoteBackup } from '../backup/index.js';
import { actorFields, postAlert, postNotice, type Actor } from './subscription-audit.js';
import { backupDone, createBackupOperations } from './subscription-backup.js';
import { checkOperable, claimSubscription, releaseClaim } from './subscription-claim.js';
import { databaseStatus, dropDatabase, setConnections } from './subscription-database.js';
import { lockSubscription, setSubscriptionState } from './subscription-service.js';
import { REMOTE_TX } from './subscription-suspension.js';

export function createDropOperation(ctx: Pick<AppContext, 'db' | 'secretBox' | 'config' | 'queues'>) {
  const { db } = ctx;
  const backups = createBackupOperations(ctx);
  const filestores = createFilestores(ctx);

  /** The subscription's database is gone: cancelled, with the date, claim ended. */
  async function markDropped(tx: DbTx, id: number, author: Author | null, body: string) {
    const before = await lockSubscription(tx, id);
    const after = await setSubscriptionState(tx, before, 'cancelled', author, {
      database_dropped_at: new Date(),
      database_created_at: null,
      database_system_identifier: null,
      database_oid: null,
      database_role: null,
      database_role_password: null,
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
        const body = `${why} Database ${sub.database_name} no longer exists: the drop happened; subscription cancelled.`;
        await markDropped(tx, id, author, body);
        return;
      }
      await releaseClaim(tx, id, jobId);
      let closed = '';
      if (status.openForSuperusers) closed = ` ${await setConnections(ctx, sub, 'closed', actor, 'drop_database (closed again)', tx)}.`;
      const body = `${why} Database ${sub.database_name} still exists: nothing was dropped; the subscription is unchanged.${closed}`;
      await postAlert(tx, id, body, author);
    } catch (err) {
      await releaseClaim(tx, id, jobId);
      await postAlert(
        tx,
        id,
        `${why} Whether database ${sub.database_name} still exists could not be checked: ${(err as Error).message}. ` +
          'Run drop_database again: it finds out, and marks the subscription cancelled if the database is gone.',
        author,
      );
    }
  }

  /**
   * The dropped database's filestore on its Odoo host, removed only when the final backup says it
   * holds it (`filestore: true` in the backup server's list) or the operator chose skip_backup;
   * otherwise it is kept on the host, renamed <filestore>.dropped-<time>, and the chatter says why
   * and where. The drop is done whatever
   * happens here: a failure is an alert in the chatter (the command and its output are in the root
   * server's action log). The tenant's credentials file goes either way (its database is gone).
   */
  async function removeFilestore(sub: Subscription, actor: Actor, author: Author | null, final: RemoteBackup | 'skip_backup') {
    const { host } = await loadPlacement(db, sub.id);
    if (!host) return;
    const name = sub.database_name!;
    const audit = { ...actorFields(actor), operation: 'drop_database' };
    const keep = final !== 'skip_backup' && final.filestore !== true;
    try {
      if (final !== 'skip_backup' && keep) {
        // Set aside under a name of its own: a deployment made again under the name (to restore a backup into) finds the place free.
        const stamp = new Date()
          .toISOString()
          .replace(/[-:]|\.\d+/g, '')
          .toLowerCase();
        const kept = await filestores.setAside(host, name, `dropped-${stamp}`, audit);
        await postAlert(
          db,
          sub.id,
          `Filestore of ${name} kept on root server ${host.id} (${host.name ?? host.ip}) at ${kept}: ` +
            `the final backup ${final.id} does not say it holds the filestore (the backup server lists it without "filestore": true), ` +
            "so removing it could lose the instance's attachments. Remove it by hand once it is kept elsewhere.",
          author,
        );
      } else {
        const out = await filestores.remove(host, name, audit);
        const why =
          final === 'skip_backup'
            ? 'skip_backup: no backup holds it'
            : `the final backup ${final.id} holds it${typeof final.files === 'number' ? ` (${final.files} files)` : ''}`;
        await postNotice(db, sub.id, `Filestore removed on root server ${host.id} (${why}): ${out}`, author);
      }
      if (sub.database_role) await removeTenantCredentials(ctx, host, name, audit);
    } catch (err) {
      const what = keep ? `set aside (it stays at ${filestores.path(host, name)})` : 'removed';
      await postAlert(db, sub.id, `The filestore of ${name} could not be ${what}: ${(err as Error).message}`, author);
    }
  }

  return {
    /** API checks before the drop job is queued. */
    async checkDrop(id: number) {
      await checkOperable(db, id, 'drop_database');
    },

    async drop(id: number, skipBackup: boolean, actor: Actor) {
      const author = await authorOfUser(db, actor.userId);
      const sub = await claimSubscription(db, id, 'drop_database', actor.jobId, { drop_attempted_at: new Date() });
      const name = sub.database_name!;
      const how = skipBackup ? `, without a backup (skip_backup by ${author?.name ?? 'the service'})` : ': final backup first';
      await postNotice(db, id, `drop_database of ${name} started (job ${actor.jobId})${how}.`, author);
      let dropSent = false;
      try {
        const status = await databaseStatus(ctx, sub);
        const { where } = status;
        if (!status.exists) {
          const body = `Database ${name} does not exist on ${where}: nothing to back up or drop; subscription cancelled.`;
          await db.$transaction((tx) => markDropped(tx, id, author, body));
          return { subscription_id: id, database_name: name, backup: null, dropped: false };
        }
        let backup: RemoteBackup | null = null;
        if (!skipBackup) {
          const final = await backups.backUp(sub, actor, author, status);
          backup = final.backup;
          await postNotice(db, id, backupDone('Final backup', final.backup, sub, final.server), author);
        }
        await postNotice(db, id, `Dropping database ${name} on ${where} (DROP DATABASE WITH (FORCE)).`, author);
        dropSent = true;
        await dropDatabase(ctx, sub, actor);
        await db.$transaction((tx) => markDropped(tx, id, author, `Database ${name} dropped; subscription cancelled.`));
        await removeFilestore(sub, actor, author, backup ?? 'skip_backup');
        return { subscription_id: id, database_name: name, backup, dropped: true };
      } catch (err) {
        const message = `drop_database failed: ${(err as Error).message}.`;
        if (dropSent) {
          await db.$transaction((tx) => reconcileDrop(tx, id, actor.jobId, author, message), REMOTE_TX);
        } else {
          await db.$transaction(async (tx) => {
            await releaseClaim(tx, id, actor.jobId);
            await postAlert(tx, id, `${message} Nothing was dropped; the subscription is unchanged.`, author);
          });
        }
        throw err;
      }
    },

    /** An interrupted drop (the job's interruption handler, in its transaction): settled by asking PostgreSQL. */
    interrupted: (tx: DbTx, id: number, jobId: string) => reconcileDrop(tx, id, jobId, null, 'drop_database was interrupted.'),
  };
}
