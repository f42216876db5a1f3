// The package limits inside a customer's instance (svc.* config parameters) follow the
// subscription: a change of is_trial, trial_end_date, user_limit, storage_limit_gb or model_limits
// marks the subscription pending (instance_sync_pending_at, in the change's own transaction) and
// queues sync_instance, which writes them into a running database at once. A failure leaves it
// pending, says so in the chatter, and the lifecycle run queues it again; a suspended database is
// written when it runs again.
import type { AppContext } from '../context.js';
import { postMessageOnce } from '../core/chatter.js';
import { setPackageLimits } from '../instances/index.js';
import type { Subscription } from '../generated/prisma/client.js';
import { onSubscription, postNotice } from './subscription-audit.js';
import { onInstance } from './subscription-database.js';
import { supportContact } from './subscription-suspension-page.js';
import { subscriptionJobs } from './subscription-job-specs.js';

/** The fields the instance holds as svc.* parameters. */
export const INSTANCE_FIELDS = ['is_trial', 'trial_end_date', 'user_limit', 'storage_limit_gb', 'model_limits'] as const;

/** Whether `after` changes what the instance of `before` holds (and it has one to change). */
export function changesInstance(before: Subscription, after: Record<string, unknown>): boolean {
  if (before.database_created_at === null && before.state !== 'deploying') return false;
  const value = (v: unknown) => (v instanceof Date ? v.toISOString() : JSON.stringify(v ?? null));
  return INSTANCE_FIELDS.some((f) => f in after && after[f] !== undefined && value(after[f]) !== value(before[f]));
}

export async function queueInstanceSync(ctx: Pick<AppContext, 'queues' | 'log'>, subscriptionId: number) {
  try {
    await ctx.queues.enqueue(subscriptionJobs.sync_instance, { subscription_id: subscriptionId });
  } catch (err) {
    // Still pending: the lifecycle run queues it again.
    ctx.log.warn({ err, subscription_id: subscriptionId }, 'sync_instance could not be queued');
  }
}

/** Writes the pending limits of one subscription into its instance; loops while they change meanwhile. */
export async function syncInstance(ctx: Pick<AppContext, 'db' | 'secretBox' | 'config'>, subscriptionId: number) {
  for (let round = 0; round < 5; round++) {
    const sub = await ctx.db.subscription.findUnique({ where: { id: subscriptionId } });
    if (!sub?.instance_sync_pending_at) return { written: round > 0 };
    if (sub.state !== 'running') return { written: false, waiting: `the subscription is ${sub.state}` };
    try {
      const contact = await supportContact(ctx.db);
      await onInstance(ctx, sub, (query) => setPackageLimits(query, sub, contact));
    } catch (err) {
      await postMessageOnce(ctx.db, {
        ...onSubscription(subscriptionId),
        body: `The package limits could not be written into database ${sub.database_name}: ${(err as Error).message}. The lifecycle run tries again.`,
        message_type: 'notification',
        subtype_xmlid: 'mail.mt_alert',
      });
      throw err;
    }
    // Cleared only if nothing changed since it was read; else written again.
    const { count } = await ctx.db.subscription.updateMany({
      where: { id: subscriptionId, instance_sync_pending_at: sub.instance_sync_pending_at },
      data: { instance_sync_pending_at: null },
    });
    if (count === 1) {
      await postNotice(ctx.db, subscriptionId, `Package limits written into database ${sub.database_name} (svc.* parameters).`, null);
      return { written: true };
    }
  }
  return { written: true, still_pending: true };
}
