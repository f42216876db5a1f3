// A deployment, backup, restore or drop claims its subscription while it runs (operation and
// operation_job_id) and releases the claim before it ends, on failure too; a worker that dies
// meanwhile leaves a stalled job, which crash recovery records as interrupted (src/jobs). When
// Redis itself loses its data (restarted without persistence, emptied), the job is gone and nothing
// would ever release the claim: the subscription would stay deploying, or every later backup,
// restore or drop of it would be refused, for ever. So a claim whose job Redis no longer has is
// recorded as an interruption, as a crash would be: the action log and the chatter say so and the
// claim ends (the operation's own onInterrupted). A deployment's leftovers are removed first.
import type { AppContext } from '../context.js';
import type { Interruption, JobSpec } from '../core/jobs.js';
import type { Subscription } from '../generated/prisma/client.js';
import type { SubscriptionOperation } from '../generated/prisma/enums.js';
import { recordInterruption } from '../jobs/index.js';
import { postAlert, type actorFields } from './subscription-audit.js';
import { subscriptionJobs } from './subscription-job-specs.js';

/** The job of each operation that claims through operation_job_id (a move's claim is its move row's: src/moves sweeps those). */
const JOB_OF = {
  deploy: subscriptionJobs.deploy_subscription,
  backup: subscriptionJobs.backup_subscription,
  restore: subscriptionJobs.restore_subscription,
  drop_database: subscriptionJobs.drop_subscription_database,
} as const satisfies Partial<Record<SubscriptionOperation, JobSpec>>;

type ClaimingJob = (typeof JOB_OF)[keyof typeof JOB_OF]['name'];
type Audit = ReturnType<typeof actorFields>;

/** How a claim whose job was lost ends. */
export interface LostOperation {
  interruption: Interruption<JobSpec, AppContext>;
  /**
   * Removes what the lost job made, before the interruption is recorded (the claim still keeps
   * everything else off the subscription); answers the alert for its chatter.
   */
  cleanUp?(sub: Subscription, jobId: string, audit: Audit): Promise<string>;
}

/** Ends the claims whose job Redis lost; answers the subscriptions released. `audit`: the sweep's own job. */
export async function recoverLostOperations(ctx: AppContext, lost: Record<ClaimingJob, LostOperation>, audit: Audit) {
  const claimed = await ctx.db.subscription.findMany({
    where: { operation: { in: Object.keys(JOB_OF) as (keyof typeof JOB_OF)[] }, operation_job_id: { not: null } },
    orderBy: { id: 'asc' },
  });
  const released: number[] = [];
  for (const sub of claimed) {
    const spec = JOB_OF[sub.operation as keyof typeof JOB_OF];
    const jobId = sub.operation_job_id!;
    if (await ctx.queues.find(jobId, [spec.queue])) continue;
    // Read again after Redis answered: a job releases its claim before it completes, so a claim
    // still held by a job Redis does not have is one whose job was lost (not one that just ended).
    const still = await ctx.db.subscription.findFirst({ where: { id: sub.id, operation_job_id: jobId } });
    if (!still) continue;
    ctx.log.warn({ subscription_id: sub.id, job_id: jobId }, 'a subscription was claimed by a job Redis lost: recorded as interrupted');
    const how = lost[spec.name];
    const alert = await how.cleanUp?.(still, jobId, audit);
    await recordInterruption(
      ctx,
      { name: spec.name, id: jobId, payload: { subscription_id: sub.id, user_id: null } },
      how.interruption,
      'redis',
    );
    if (alert) await postAlert(ctx.db, sub.id, alert, null);
    released.push(sub.id);
  }
  return { released };
}
