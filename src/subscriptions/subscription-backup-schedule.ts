// Daily backups (the backup_schedule job, every 5 minutes): inside the settings' daily window
// (UTC), the backup job — the same one the `backup` action queues, with its deduplicated job id,
// so a manual and a scheduled backup of one subscription never run at once — is queued for each
// running subscription with a database that has no completed backup since the window opened,
// oldest backup first, while fewer than backup_concurrency backups (with restores and drops, which
// back up too) are queued or running overall and none on the subscription's Odoo host. A
// subscription busy with another operation is left for a later run; one queued and not done (its
// backup failed) is queued again an hour later, not at every run. Each run also judges the 26 h
// backup alert (src/backup/backup-overdue.ts), window or not. Safe to run twice at once: each
// queueing is claimed by a conditional update of backup_attempted_at first.
import type { AppContext } from '../context.js';
import type { Settings, Subscription } from '../generated/prisma/client.js';
import { backupServerFor, createBackupOverdue, type OverdueResult } from '../backup/index.js';
import type { Actor } from './subscription-audit.js';
import { subscriptionJobs } from './subscription-job-specs.js';

export const BACKUP_SCHEDULE_EVERY_MS = 5 * 60_000;
/** A scheduled backup that did not end done is queued again after this long. */
export const BACKUP_RETRY_MS = 3600_000;
const HOUR_MS = 3600_000;
const DAY_MS = 24 * HOUR_MS;
const PAGE = 200;

/** The operations that back up or restore a tenant: they count against the concurrency and hold their host. */
const BACKING_UP = ['backup', 'restore', 'drop_database'] as const;

/** When the window `now` is in opened (UTC), or null outside it. A 24-hour window is always open, from start_hour. */
export function openWindow(now: Date, settings: Pick<Settings, 'backup_window_start_hour' | 'backup_window_hours'>): Date | null {
  const midnight = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate());
  let start = midnight + settings.backup_window_start_hour * HOUR_MS;
  if (start > now.getTime()) start -= DAY_MS;
  return now.getTime() < start + settings.backup_window_hours * HOUR_MS ? new Date(start) : null;
}

export interface BackupScheduleResult {
  /** When the current window opened; null: outside it (or the schedule is off), nothing queued. */
  window_opened_at: string | null;
  /** Backups queued or running when the run started (by the schedule or by hand). */
  in_flight: number;
  queued: { subscription_id: number; job_id: string }[];
  /** Due, left for a later run: their Odoo host has a backup running, or they have no backup server to use. */
  waiting: { subscription_id: number; reason: string }[];
  alerts: OverdueResult;
}

export async function runBackupSchedule(ctx: AppContext, actor: Actor, now = new Date()): Promise<BackupScheduleResult> {
  const { db } = ctx;
  const alerts = await createBackupOverdue(ctx).evaluate(now);
  const settings = await db.settings.findUniqueOrThrow({ where: { id: 1 } });
  const opened = settings.backup_schedule_enabled ? openWindow(now, settings) : null;
  const result: BackupScheduleResult = { window_opened_at: opened?.toISOString() ?? null, in_flight: 0, queued: [], waiting: [], alerts };
  if (!opened || (await db.backupServer.count()) === 0) return result;

  // What is backing up now: the backups queue's jobs not yet ended, and the claims (a job Redis
  // lost keeps its claim until recover_lost_operations ends it).
  const spec = subscriptionJobs.backup_subscription;
  const jobs = await ctx.queues.queue(spec.queue).getJobs(['active', 'waiting', 'delayed', 'prioritized']);
  const queuedIds = jobs.flatMap((j) => (j && typeof j.data?.subscription_id === 'number' ? [j.data.subscription_id as number] : []));
  const busy = await db.subscription.findMany({
    where: { OR: [{ id: { in: queuedIds } }, { operation: { in: [...BACKING_UP] } }] },
    select: { id: true, root_server_id: true },
  });
  const inFlight = new Set(busy.map((s) => s.id));
  const busyHosts = new Set(busy.flatMap((s) => (s.root_server_id === null ? [] : [s.root_server_id])));
  result.in_flight = inFlight.size;
  let slots = settings.backup_concurrency - inFlight.size;

  const retryBefore = new Date(now.getTime() - BACKUP_RETRY_MS);
  const due = {
    state: 'running' as const,
    database_created_at: { not: null },
    operation: null,
    OR: [{ last_backup_at: null }, { last_backup_at: { lt: opened } }],
    AND: [{ OR: [{ backup_attempted_at: null }, { backup_attempted_at: { lt: retryBefore } }] }],
  };
  // Pages of due subscriptions; the ones claimed leave the query's answer, so the next page starts after those left.
  for (let offset = 0; slots > 0; ) {
    const page: Subscription[] = await db.subscription.findMany({
      where: due,
      orderBy: [{ last_backup_at: { sort: 'asc', nulls: 'first' } }, { id: 'asc' }],
      skip: offset,
      take: PAGE,
    });
    for (const sub of page) {
      if (slots === 0) break;
      if (inFlight.has(sub.id)) continue;
      if (sub.root_server_id !== null && busyHosts.has(sub.root_server_id)) {
        result.waiting.push({
          subscription_id: sub.id,
          reason: `a backup is running on its Odoo host (root server ${sub.root_server_id})`,
        });
        continue;
      }
      try {
        await backupServerFor(db, sub.backup_server_id);
      } catch (err) {
        result.waiting.push({ subscription_id: sub.id, reason: (err as Error).message });
        continue;
      }
      // Claimed as read: another run (or a state change) meanwhile leaves it alone.
      const claimed = await db.subscription.updateMany({
        where: { id: sub.id, ...due, backup_attempted_at: sub.backup_attempted_at },
        data: { backup_attempted_at: now },
      });
      if (claimed.count !== 1) continue;
      const jobId = await ctx.queues.enqueue(spec, { subscription_id: sub.id, user_id: actor.userId });
      result.queued.push({ subscription_id: sub.id, job_id: jobId });
      inFlight.add(sub.id);
      if (sub.root_server_id !== null) busyHosts.add(sub.root_server_id);
      slots--;
      offset--;
    }
    if (page.length < PAGE) break;
    offset += page.length;
  }
  return result;
}
