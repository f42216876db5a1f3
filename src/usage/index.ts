// Usage and package limits: every tenant measured on a schedule (database size, active users,
// limited records, filestore), its usage_state, notices to the customer, and suspension over the
// limits after a grace period when the settings say so.
import type { Job } from 'bullmq';
import type { AppContext } from '../context.js';
import { publicJobId } from '../core/queue.js';
import type { Feature } from '../feature.js';
import { featureJobs } from '../feature.js';
import { usageJobs } from './usage-job-specs.js';
import { createUsageRound } from './usage-round.js';
import { registerUsageRoutes } from './usage-routes.js';

/** The scheduler's tick; a round runs at the first tick usage_interval_minutes after the last. */
const TICK_MS = 5 * 60_000;

/** Whether a scheduled round is due: one per usage_interval_minutes across every worker (a key in Redis). */
async function due(ctx: AppContext): Promise<boolean> {
  const { usage_interval_minutes: minutes } = await ctx.db.settings.findUniqueOrThrow({ where: { id: 1 } });
  // A little less than the interval: a tick that comes a moment early still counts.
  const ttl = minutes * 60_000 - 30_000;
  return (await ctx.redis.set(`${ctx.config.QUEUE_PREFIX}:usage-round`, new Date().toISOString(), 'PX', ttl, 'NX')) === 'OK';
}

async function collectUsage(ctx: AppContext, payload: { now: boolean; user_id: number | null }, job: Job) {
  if (!payload.now && !(await due(ctx))) return { skipped: 'not due (usage_interval_minutes)' };
  return createUsageRound(ctx).collect({ userId: payload.user_id, jobId: publicJobId(job.queueName, job.id!) });
}

export const usage: Feature = {
  name: 'usage',
  routes: registerUsageRoutes,
  jobs: featureJobs(usageJobs, (ctx) => ({ collect_usage: (payload, job) => collectUsage(ctx, payload, job) }), {}),
  schedules: (ctx) => ctx.queues.schedule('collect-usage', { every: TICK_MS }, usageJobs.collect_usage, { now: false, user_id: null }),
};
