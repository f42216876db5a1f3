// Code rollouts (docs/rollouts.md): a git deploy to a host that runs Odoo, into a path on its
// addons path, restarts Odoo gracefully and updates the changed modules of every tenant database
// on the host, one tenant at a time by default, each with a safety copy it is restored from when
// its update fails; a rollout resumes after a crash of the service.
import type { AppContext } from '../context.js';
import type { Feature } from '../feature.js';
import { featureJobs } from '../feature.js';
import { rolloutJobs } from './rollout-job-specs.js';
import { registerRolloutRoutes } from './rollout-routes.js';
import { createRolloutRunner } from './rollout-runner.js';
import { createRolloutService } from './rollout-service.js';

/** How often unfinished rollouts are looked for (their host's job queued again, if Redis lost it). */
const RESUME_EVERY_MS = 60_000;

export const rollouts: Feature = {
  name: 'rollouts',
  routes: registerRolloutRoutes,
  jobs: featureJobs(
    rolloutJobs,
    (ctx) => {
      const runner = createRolloutRunner(ctx);
      const service = createRolloutService(ctx);
      return {
        rollout_host: (payload, job) => runner.runHost(payload, job),
        rollout_resume: () => service.resume(),
      };
    },
    {},
  ),
  schedules: (ctx: AppContext) =>
    ctx.queues.schedule('rollout-resume', { every: RESUME_EVERY_MS }, rolloutJobs.rollout_resume, { user_id: null }),
  onGitDeploy: (ctx: AppContext) => {
    const service = createRolloutService(ctx);
    return (event) => service.afterDeploy(event);
  },
};

// For staging copies (src/staging), updated as a tenant is.
export { updateScript, waitForUpdate } from './rollout-scripts.js';
export { updateError } from './rollout-tenant.js';
