// Staging copies of customers' instances (DESIGN §20, docs/staging.md): create_staging makes a
// neutralized online copy of a running subscription's database on its Odoo host; copies are
// listed per subscription, follow the rollouts of their host (refresh) and are dropped after
// STAGING_DAYS or on request.
import type { AppContext } from '../context.js';
import type { Feature } from '../feature.js';
import { featureJobs } from '../feature.js';
import { stagingJobs } from './staging-job-specs.js';
import { registerStagingRoutes } from './staging-routes.js';
import { createStagingRefresh } from './staging-refresh.js';
import { createStagingService } from './staging-service.js';

/** How often copies past their expiry (and copies whose job Redis lost) are looked for. */
const EXPIRE_EVERY_MS = 10 * 60_000;
/** How often copies a rollout left stale (or whose refresh Redis lost) are looked for. */
const FOLLOW_EVERY_MS = 60_000;

export const staging: Feature = {
  name: 'staging',
  routes: registerStagingRoutes,
  jobs: featureJobs(
    stagingJobs,
    (ctx) => {
      const service = createStagingService(ctx);
      const refresh = createStagingRefresh(ctx);
      return {
        staging_create: (payload, job) => service.create(payload, job),
        staging_drop: (payload, job) => service.drop(payload, job),
        staging_refresh: (payload, job) => refresh.refresh(payload, job),
        staging_follow: () => refresh.follow(),
        staging_expire: async (_payload, job) => ({ lost: await service.failLost(job), ...(await service.expire(job)) }),
      };
    },
    {},
  ),
  schedules: async (ctx: AppContext) => {
    await ctx.queues.schedule('staging-expire', { every: EXPIRE_EVERY_MS }, stagingJobs.staging_expire, { user_id: null });
    await ctx.queues.schedule('staging-follow', { every: FOLLOW_EVERY_MS }, stagingJobs.staging_follow, { user_id: null });
  },
};
