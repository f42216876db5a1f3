// A backup, restore or drop claims its subscription while it runs (subscription-claim.ts) and
// releases the claim before it ends, on failure too; a worker that dies meanwhile leaves a stalled
// job, which crash recovery records as interrupted (src/jobs). When Redis itself loses its data
// (restarted without persistence, emptied), the job is gone and nothing would ever release the
// claim: every later backup, restore or drop of that subscription would be refused for ever. So a
// claim whose job Redis no longer has is recorded as an interruption, as a crash would be: the
// action log and the chatter say so and the claim ends (the operation's own onInterrupted).
import type { AppContext } from '../context.js';
import type { Interruption, JobSpec } from '../core/jobs.js';
import type { SubscriptionOperation } from '../generated/prisma/enums.js';
import { recordInterruption } from '../jobs/index.js';
import { subscriptionJobs } from './subscription-job-specs.js';

/** The job of each operation that claims through operation_job_id (a move's claim is its move row's: src/moves sweeps those). */
const JOB_OF = {
  backup: subscriptionJobs.backup_subscription,
  restore: subscriptionJobs.restore_subscription,
  drop_database: subscriptionJobs.drop_subscription_database,
} as const satisfies Partial<Record<SubscriptionOperation, JobSpec>>;

type ClaimingJob = (typeof JOB_OF)[keyof typeof JOB_OF]['name'];

/** Releases the claims whose job Redis lost; answers the subscriptions released. */
export async function recoverLostOperations(ctx: AppContext, interruptions: Record<ClaimingJob, Interruption<JobSpec, AppContext>>) {
  const claimed = await ctx.db.subscription.findMany({
    where: { operation: { in: Object.keys(JOB_OF) as (keyof typeof JOB_OF)[] }, operation_job_id: { not: null } },
    select: { id: true, operation: true, operation_job_id: true },
    orderBy: { id: 'asc' },
  });
  const released: number[] = [];
  for (const sub of claimed) {
    const spec = JOB_OF[sub.operation as keyof typeof JOB_OF];
    const jobId = sub.operation_job_id!;
    if (await ctx.queues.find(jobId, [spec.queue])) continue;
    // Read again after Redis answered: a job releases its claim before it completes, so a claim
    // still held by a job Redis does not have is one whose job was lost (not one that just ended).
    const still = await ctx.db.subscription.count({ where: { id: sub.id, operation_job_id: jobId } });
    if (still === 0) continue;
    ctx.log.warn({ subscription_id: sub.id, job_id: jobId }, 'a subscription was claimed by a job Redis lost: recorded as interrupted');
    await recordInterruption(
      ctx,
      { name: spec.name, id: jobId, payload: { subscription_id: sub.id, user_id: null } },
      interruptions[spec.name],
      'redis',
    );
    released.push(sub.id);
  }
  return { released };
}
