// setup_odoo marks its server `installing` while it runs and records its job there (odoo_job_id).
// A job Redis lost (its data emptied while it ran) would leave the server installing for ever, so
// every 10 minutes (odoo_lost_setups) such a server is recorded as interrupted, as a worker crash
// would be: `failed`, saying to run setup_odoo again (it converges), in its chatter and action log.
import type { AppContext } from '../context.js';
import type { Interruption, JobSpec } from '../core/jobs.js';
import { LOST_WITH_REDIS, recordInterruption } from '../jobs/index.js';
import { odooJobs } from './odoo-job-specs.js';

export const LOST_SETUPS_EVERY_MS = 10 * 60_000;

const lostSetup: Interruption<JobSpec, AppContext> = {
  record: (p) => ({ model_name: 'svc.root.server', rec_id: (p as { root_server_id: number }).root_server_id }),
  action_type: 'ssh_command',
  async onInterrupted(tx, payload, jobId) {
    await tx.rootServer.updateMany({
      where: { id: (payload as { root_server_id: number }).root_server_id, odoo_state: 'installing', odoo_job_id: jobId },
      data: {
        odoo_state: 'failed',
        odoo_error: `[interrupted] ${LOST_WITH_REDIS} (setup_odoo, job ${jobId}); Odoo's state on the host is unknown: run setup_odoo again (it converges).`,
      },
    });
  },
};

/** Fails the servers left installing by a setup_odoo job Redis lost; answers their ids. */
export async function failLostSetups(ctx: AppContext) {
  const installing = await ctx.db.rootServer.findMany({
    where: { odoo_state: 'installing', odoo_job_id: { not: null } },
    select: { id: true, odoo_job_id: true },
    orderBy: { id: 'asc' },
  });
  const failed: number[] = [];
  for (const server of installing) {
    const jobId = server.odoo_job_id!;
    if (await ctx.queues.find(jobId, [odooJobs.odoo_setup.queue])) continue;
    // Read again after Redis answered: a set-up leaves `installing` before its job ends.
    const still = await ctx.db.rootServer.count({ where: { id: server.id, odoo_state: 'installing', odoo_job_id: jobId } });
    if (still === 0) continue;
    ctx.log.warn({ root_server_id: server.id, job_id: jobId }, 'a setup_odoo job Redis lost left its server installing: failed');
    const payload = { root_server_id: server.id, user_id: null };
    await recordInterruption(ctx, { name: odooJobs.odoo_setup.name, id: jobId, payload }, lostSetup, 'redis');
    failed.push(server.id);
  }
  return { failed };
}
