// The backup alert: a running subscription with a database and no completed backup in the last
// 26 h. The alerts machinery (src/alerts/) watches root servers through rules; this one watches
// subscriptions, so it is kept as the certificate-expiry notice of a domain is: on the record
// (backup_overdue_since: firing since then, null: not), claimed by a conditional update so it
// fires once however many runs race, told in the subscription's chatter (mail.mt_alert) and by
// push through the default notification server, resolved — with a notice each way — by the next
// completed backup (or when the subscription stops running). An installation with running
// subscriptions and no backup server at all gets one alert on the settings instead of one per
// subscription (no_backup_server_alert_at).
import type { AppContext } from '../context.js';
import { postMessage, type RecordRef } from '../core/chatter.js';
import type { Db, DbTx } from '../core/db.js';
import type { Subscription } from '../generated/prisma/client.js';
import { formatDuration } from '../alerts/index.js';
import { createNotificationService } from '../notifications/index.js';
import { backupServerFor } from './backup-server-for.js';

/** A running subscription without a completed backup for this long is an alert. */
export const BACKUP_OVERDUE_MS = 26 * 3600_000;

type Ctx = Pick<AppContext, 'db' | 'secretBox' | 'config' | 'queues'>;
export interface Notice {
  on: RecordRef;
  title: string;
  message: string;
}

const onSubscription = (id: number): RecordRef => ({ model_name: 'svc.subscription', rec_id: id });
const ON_SETTINGS: RecordRef = { model_name: 'svc.settings', rec_id: 1 };
const label = (sub: Pick<Subscription, 'id' | 'name' | 'database_name'>) => `subscription ${sub.id} ${sub.name} (${sub.database_name})`;
const post = (db: Db | DbTx, n: Notice) =>
  postMessage(db, { ...n.on, body: `${n.title}\n${n.message}`, message_type: 'notification', subtype_xmlid: 'mail.mt_alert' });

/**
 * After a backup of `id` was seen done at `at`: last_backup_at moves forward (never back), and a
 * firing backup alert resolves when that backup is recent, with its notice in the chatter (in
 * `tx`). Answers the notice, for the caller to push once its transaction is done (tellOperators).
 */
export async function recordBackupDone(tx: Db | DbTx, id: number, at: Date, now = new Date()): Promise<Notice | null> {
  await tx.subscription.updateMany({
    where: { id, OR: [{ last_backup_at: null }, { last_backup_at: { lt: at } }] },
    data: { last_backup_at: at },
  });
  const cutoff = new Date(now.getTime() - BACKUP_OVERDUE_MS);
  const sub = await tx.subscription.findUnique({ where: { id } });
  if (!sub?.backup_overdue_since || !sub.last_backup_at || sub.last_backup_at <= cutoff) return null;
  const resolved = await tx.subscription.updateMany({
    where: { id, backup_overdue_since: sub.backup_overdue_since },
    data: { backup_overdue_since: null },
  });
  if (resolved.count !== 1) return null;
  const notice = {
    on: onSubscription(id),
    title: `[RESOLVED] ${label(sub)}: backed up again`,
    message: `A backup of ${sub.database_name} completed at ${sub.last_backup_at.toISOString()}; the alert had fired for ${formatDuration(now.getTime() - sub.backup_overdue_since.getTime())}.`,
  };
  await postMessage(tx, { ...notice.on, body: `${notice.title}\n${notice.message}`, message_type: 'notification' });
  return notice;
}

export interface OverdueResult {
  fired: number[];
  resolved: number[];
  /** The installation's alert (no backup server at all): fired, resolved, or unchanged (null). */
  no_backup_server: 'fired' | 'resolved' | null;
}

export function createBackupOverdue(ctx: Ctx) {
  const { db } = ctx;
  const notifications = createNotificationService(ctx);

  /** The push of a notice through the default notification server (none: nothing to push); a failure is said where the notice is. */
  async function tellOperators(n: Notice | null) {
    if (!n) return;
    const server = await db.notificationServer.findFirst({
      where: { is_default: true },
      orderBy: { company_id: 'asc' },
      select: { id: true },
    });
    if (!server) return;
    try {
      await notifications.sendNotification(server.id, { title: n.title, message: n.message, priority: 4 }, null);
    } catch (err) {
      await postMessage(db, {
        ...n.on,
        body: `The push notice "${n.title}" could not be sent through notification server ${server.id}: ${(err as Error).message}`,
        message_type: 'notification',
      });
    }
  }

  /** Fires the alert of `sub` unless it fired or a backup came meanwhile (the update re-checks). */
  async function fire(sub: Subscription, cutoff: Date, now: Date): Promise<boolean> {
    // Why no backup can be made, when that is the reason (several backup servers, none chosen).
    const why = await backupServerFor(db, sub.backup_server_id).then(
      () => '',
      (err: Error) => ` It is not backed up: ${err.message}.`,
    );
    const notice: Notice = {
      on: onSubscription(sub.id),
      title: `[ALERT] ${label(sub)}: no completed backup for 26 h`,
      message: sub.last_backup_at
        ? `Its last completed backup was at ${sub.last_backup_at.toISOString()} (${formatDuration(now.getTime() - sub.last_backup_at.getTime())} ago).`
        : `No completed backup of it is known since its database was created (${sub.database_created_at!.toISOString()}).`,
    };
    notice.message += why;
    const fired = await db.$transaction(async (tx) => {
      const claimed = await tx.subscription.updateMany({
        where: {
          id: sub.id,
          state: 'running',
          backup_overdue_since: null,
          database_created_at: { not: null, lte: cutoff },
          OR: [{ last_backup_at: null }, { last_backup_at: { lte: cutoff } }],
        },
        data: { backup_overdue_since: now },
      });
      if (claimed.count !== 1) return false;
      await post(tx, {
        ...notice,
        message: `${notice.message} Its backup jobs' outcomes are in this chatter; backup runs one now, compute_backup_state reads the backup server's list.`,
      });
      return true;
    });
    if (fired) await tellOperators(notice);
    return fired;
  }

  /** Resolves a firing alert of a subscription that no longer runs a database (no backup expected). */
  async function resolveStopped(sub: Subscription, now: Date): Promise<boolean> {
    const notice: Notice = {
      on: onSubscription(sub.id),
      title: `[RESOLVED] ${label(sub)}: no longer running`,
      message: `The subscription is ${sub.database_dropped_at ? 'dropped' : sub.state}: no daily backup is expected; the alert had fired for ${formatDuration(now.getTime() - sub.backup_overdue_since!.getTime())}.`,
    };
    const resolved = await db.$transaction(async (tx) => {
      const done = await tx.subscription.updateMany({
        where: {
          id: sub.id,
          backup_overdue_since: sub.backup_overdue_since,
          NOT: { state: 'running', database_created_at: { not: null } },
        },
        data: { backup_overdue_since: null },
      });
      if (done.count !== 1) return false;
      await postMessage(tx, { ...notice.on, body: `${notice.title}\n${notice.message}`, message_type: 'notification' });
      return true;
    });
    if (resolved) await tellOperators(notice);
    return resolved;
  }

  /** The installation's alert: running subscriptions to back up and no backup server to do it. */
  async function installation(needing: number, servers: number, now: Date): Promise<OverdueResult['no_backup_server']> {
    const firing = servers === 0 && needing > 0;
    const notice: Notice = firing
      ? {
          on: ON_SETTINGS,
          title: `[ALERT] No backup server: ${needing} running subscription${needing === 1 ? ' is' : 's are'} backed up by nothing`,
          message: 'Add a backup server (POST /api/v1/backup-servers); the daily backups start in the next window.',
        }
      : {
          on: ON_SETTINGS,
          title: '[RESOLVED] No backup server',
          message:
            servers > 0 ? 'A backup server was added: the daily backups run in the window.' : 'No running subscription needs a backup.',
        };
    const changed = await db.$transaction(async (tx) => {
      const done = await tx.settings.updateMany({
        where: { id: 1, no_backup_server_alert_at: firing ? null : { not: null } },
        data: { no_backup_server_alert_at: firing ? now : null },
      });
      if (done.count !== 1) return false;
      if (firing) await post(tx, notice);
      else await postMessage(tx, { ...notice.on, body: `${notice.title}\n${notice.message}`, message_type: 'notification' });
      return true;
    });
    if (!changed) return null;
    await tellOperators(notice);
    return firing ? 'fired' : 'resolved';
  }

  return {
    tellOperators,

    /**
     * One pass (the backup schedule's, every few minutes): fires the alert of each running
     * subscription whose database is older than 26 h and has no backup completed within 26 h,
     * resolves those of subscriptions that stopped running (a completed backup resolves its own,
     * recordBackupDone), and judges the installation's alert. The 26 h count starts no earlier
     * than backups_watched_since (the release that brought the alert).
     */
    async evaluate(now = new Date()): Promise<OverdueResult> {
      const result: OverdueResult = { fired: [], resolved: [], no_backup_server: null };
      const settings = await db.settings.findUniqueOrThrow({ where: { id: 1 } });
      const cutoff = new Date(now.getTime() - BACKUP_OVERDUE_MS);
      const watched = settings.backups_watched_since <= cutoff;
      const overdue = {
        state: 'running' as const,
        database_created_at: { not: null, lte: cutoff },
        OR: [{ last_backup_at: null }, { last_backup_at: { lte: cutoff } }],
      };
      const [servers, needing] = await Promise.all([db.backupServer.count(), watched ? db.subscription.count({ where: overdue }) : 0]);
      result.no_backup_server = await installation(needing, servers, now);

      if (watched && servers > 0) {
        const due = await db.subscription.findMany({ where: { ...overdue, backup_overdue_since: null }, orderBy: { id: 'asc' } });
        for (const sub of due) if (await fire(sub, cutoff, now)) result.fired.push(sub.id);
      }
      const stopped = await db.subscription.findMany({
        where: { backup_overdue_since: { not: null }, NOT: { state: 'running', database_created_at: { not: null } } },
        orderBy: { id: 'asc' },
      });
      for (const sub of stopped) if (await resolveStopped(sub, now)) result.resolved.push(sub.id);
      return result;
    },
  };
}
