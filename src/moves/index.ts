// Moves of customers' instances (DESIGN §20, docs/moves.md): a running subscription's database and
// filestore go to another Odoo host and its PostgreSQL server with a short freeze; the old copy is
// kept MOVE_KEEP_DAYS (move_back until then) and then dropped.
import type { AppContext } from '../context.js';
import type { Feature } from '../feature.js';
import { featureJobs } from '../feature.js';
import { moveJobs } from './move-job-specs.js';
import { registerMoveRoutes } from './move-routes.js';
import { createMoveService } from './move-service.js';

/** How often moves are swept: lost ones queued again, old copies past their keep period dropped. */
const SWEEP_EVERY_MS = 10 * 60_000;

export const moves: Feature = {
  name: 'moves',
  routes: registerMoveRoutes,
  jobs: featureJobs(
    moveJobs,
    (ctx) => {
      const service = createMoveService(ctx);
      return {
        subscription_move: (payload, job) => service.run(payload, job),
        moves_sweep: (_payload, job) => service.sweep(job),
      };
    },
    {},
  ),
  schedules: (ctx: AppContext) => ctx.queues.schedule('moves-sweep', { every: SWEEP_EVERY_MS }, moveJobs.moves_sweep, { user_id: null }),
};

export { sendFilestore } from './move-copy.js';
export { createMoveService } from './move-service.js';
