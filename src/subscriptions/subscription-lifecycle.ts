// The trial lifecycle run, every 5 minutes and on demand: suspend the running trials
// whose end has passed, queue the drop of expired trials whose grace has passed (when the setting
// drop_expired_trials is on), and send the mails that are due. Safe to run twice at once: each
// suspension re-checks the subscription under its row lock, each drop and each mail is claimed
// by a conditional update first. One subscription's failure does not stop the others.
import type { AppContext } from '../context.js';
import { postMessageOnce } from '../core/chatter.js';
import { subscriptionJobs } from './subscription-job-specs.js';
import { queueInstanceSync } from './subscription-instance-sync.js';
import { createLifecycleMail, type MailRunResult } from './subscription-mail.js';
import { onSubscription, postNotice, type Actor } from './subscription-audit.js';
import { createSuspensionService } from './subscription-suspension.js';
import { unjudgedMeasures, usageStateOf, type Usage } from './subscription-usage.js';

/** An automatic drop that failed (backup server down, ...) is tried again after this long, not every run. */
export const AUTO_DROP_RETRY_MS = 6 * 3600_000;

export interface LifecycleResult {
  suspended: number[];
  suspend_failed: { subscription_id: number; error: string }[];
  drops_queued: { subscription_id: number; job_id: string }[];
  /** over_limit suspensions lifted */
  reactivated: number[];
  instance_syncs_queued: number[];
  mails: MailRunResult;
}

export async function runTrialLifecycle(ctx: AppContext, actor: Actor): Promise<LifecycleResult> {
  const { db } = ctx;
  const suspension = createSuspensionService(ctx);
  const result: LifecycleResult = {
    suspended: [],
    suspend_failed: [],
    drops_queued: [],
    reactivated: [],
    instance_syncs_queued: [],
    mails: { sent: 0, failed: [] },
  };

  // 1. Expiry.
  const expired = await db.subscription.findMany({
    where: {
      is_trial: true,
      OR: [{ state: 'running' }, { state: 'suspended', suspend_reason: 'over_limit' }],
      operation: null,
      trial_end_date: { lte: new Date() },
    },
    select: { id: true },
    orderBy: { id: 'asc' },
  });
  for (const { id } of expired) {
    try {
      if (await suspension.expireTrial(id, actor)) result.suspended.push(id);
    } catch (err) {
      const error = (err as Error).message;
      result.suspend_failed.push({ subscription_id: id, error });
      await postMessageOnce(db, {
        ...onSubscription(id),
        body: `The trial ended but the subscription could not be suspended: ${error}. The next lifecycle run tries again.`,
        message_type: 'notification',
        subtype_xmlid: 'mail.mt_alert',
      });
    }
  }

  // 2. Drops after the grace period, each claimed (drop_attempted_at) before it is queued.
  const settings = await db.settings.findUniqueOrThrow({ where: { id: 1 } });
  if (settings.drop_expired_trials) {
    const now = new Date();
    const due = {
      is_trial: true,
      state: 'suspended' as const,
      suspend_reason: 'trial_expired' as const,
      grace_end_date: { lte: now },
      database_dropped_at: null,
      operation: null,
      OR: [{ drop_attempted_at: null }, { drop_attempted_at: { lt: new Date(now.getTime() - AUTO_DROP_RETRY_MS) } }],
    };
    const candidates = await db.subscription.findMany({ where: due, select: { id: true }, orderBy: { id: 'asc' } });
    for (const { id } of candidates) {
      const claimed = await db.subscription.updateMany({ where: { id, ...due }, data: { drop_attempted_at: now } });
      if (claimed.count !== 1) continue;
      const jobId = await ctx.queues.enqueue(subscriptionJobs.drop_subscription_database, {
        subscription_id: id,
        skip_backup: false,
        user_id: null,
      });
      await postNotice(
        db,
        id,
        `The grace period ended and drop_expired_trials is on: drop_database queued (job ${jobId}), with a final backup.`,
        null,
      );
      result.drops_queued.push({ subscription_id: id, job_id: jobId });
    }
  }

  // 3. Suspensions for being over the limits that the limits now allow (an operator raised them).
  const overLimit = await db.subscription.findMany({
    where: { state: 'suspended', suspend_reason: 'over_limit', operation: null },
    orderBy: { id: 'asc' },
  });
  for (const sub of overLimit) {
    const usage = sub.usage as unknown as Usage | null;
    if (!usage || unjudgedMeasures(sub, usage).length > 0 || usageStateOf(sub, usage).state === 'exceeded') continue;
    try {
      if (await suspension.liftOverLimit(sub.id, actor, 'Its limits now allow its last measured usage: reactivated.')) {
        result.reactivated.push(sub.id);
      }
    } catch (err) {
      await postMessageOnce(db, {
        ...onSubscription(sub.id),
        body: `Its limits now allow its last usage, but it could not be reactivated: ${(err as Error).message}. The next lifecycle run tries again.`,
        message_type: 'notification',
        subtype_xmlid: 'mail.mt_alert',
      });
    }
  }

  // 4. Package limits a change could not write into a running instance yet.
  const pending = await db.subscription.findMany({
    where: { state: 'running', instance_sync_pending_at: { not: null } },
    select: { id: true },
    orderBy: { id: 'asc' },
  });
  for (const { id } of pending) await queueInstanceSync(ctx, id);
  result.instance_syncs_queued = pending.map((p) => p.id);

  // 5. Mails (the expiry mails of step 1 included).
  result.mails = await createLifecycleMail(ctx).sendDue();
  return result;
}
