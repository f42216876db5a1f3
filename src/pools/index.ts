// Pools of Odoo hosts (issue 49, DESIGN §22): a template's copies on every host of its Odoo
// version, kept in step with it (a sweep every 10 minutes, and after setup_odoo, build and update);
// drain, which moves a host's tenants to the pool's other hosts a few at a time.
import type { AppContext } from '../context.js';
import type { Feature } from '../feature.js';
import { featureJobs } from '../feature.js';
import { createDrains } from './drain-service.js';
import { poolJobs } from './pool-job-specs.js';
import { registerPoolRoutes } from './pool-routes.js';
import { createTemplateCopies } from './template-copies.js';
import { publicJobId } from '../core/queue.js';

const SWEEP_EVERY_MS = 10 * 60_000;
/** A failed copy is made again after this long. */
const RETRY_FAILED_MS = 10 * 60_000;

export const pools: Feature = {
  name: 'pools',
  routes: registerPoolRoutes,
  jobs: featureJobs(
    poolJobs,
    (ctx) => {
      const copies = createTemplateCopies(ctx);
      const drains = createDrains(ctx);
      return {
        template_copies_sync: (payload, job) =>
          copies.sync(payload.database_template_id, { user_id: payload.user_id, job_id: publicJobId(job.queueName, job.id!) }),
        pools_sweep: async (payload) => {
          const due = await copies.needingSync(RETRY_FAILED_MS);
          for (const id of due)
            await ctx.queues.enqueue(poolJobs.template_copies_sync, { database_template_id: id, user_id: payload.user_id });
          // A drain whose job Redis lost is queued again (a no-op while it waits or runs: its id is the drain's).
          const draining = await ctx.db.hostDrain.findMany({ where: { state: 'draining' }, select: { id: true, user_id: true } });
          for (const d of draining) await ctx.queues.enqueue(poolJobs.host_drain, { drain_id: d.id, user_id: d.user_id });
          return { templates: due, drains: draining.map((d) => d.id) };
        },
        host_drain: (payload, job) => drains.run(payload, job),
      };
    },
    {},
  ),
  // After a setup (a host joined a pool), a build or an update: the template's copies on the pool's
  // other hosts are made (again) now rather than at the next sweep. An update changed the template's
  // contents: its version goes up first, so the copies made before are out of step.
  onOdooChange: (ctx: AppContext) => async (change) => {
    if (change.kind === 'host_set_up') {
      await ctx.queues.enqueue(poolJobs.pools_sweep, { user_id: null });
      return;
    }
    const id = change.database_template_id;
    // Not through Prisma's update: updated_at is the version standbys follow, not this.
    if (change.kind === 'template_updated')
      await ctx.db.$executeRaw`UPDATE database_templates SET content_version = content_version + 1 WHERE id = ${id}`;
    await ctx.queues.enqueue(poolJobs.template_copies_sync, { database_template_id: id, user_id: null });
  },
  schedules: (ctx: AppContext) => ctx.queues.schedule('pools-sweep', { every: SWEEP_EVERY_MS }, poolJobs.pools_sweep, { user_id: null }),
};

export { poolJobs } from './pool-job-specs.js';
