// Odoo comes back after a reboot where systemd does not run it (a supervised process: nothing starts
// it at boot). When monitoring sees a host back online after it was offline, or odoo_status finds its
// service stopped, svc queues odoo_start_again, but only while the server's odoo_state says Odoo
// should run (`running`): an operator's stop_odoo (`stopped`), a set-up under way (`installing`) or
// a `failed` Odoo is left as it is. One such job per server at a time (its deduplication key), so
// two detections start it once. The job (odoo-service.ts startAgain) starts it the way restart_odoo
// does only when the host still has it stopped and not stopped by stop_odoo.
import type { AppContext } from '../context.js';
import type { MonitorPollObserver } from '../feature.js';
import type { RootServer } from '../generated/prisma/client.js';
import { odooJobs } from './odoo-job-specs.js';

export type StartAgainReason = 'back_online' | 'status';

export const START_AGAIN_WHY: Record<StartAgainReason, string> = {
  back_online: 'the server came back online after it was offline',
  status: 'odoo_status found it stopped',
};

/** Whether svc starts the host's Odoo again when it finds it stopped: one it set up that should run. */
export function shouldRun(server: Pick<RootServer, 'state' | 'odoo_state' | 'odoo_http_port' | 'odoo_version_id'>): boolean {
  return (
    server.state === 'confirmed' && server.odoo_state === 'running' && server.odoo_http_port !== null && server.odoo_version_id !== null
  );
}

/** Queues odoo_start_again when the server's Odoo should run; answers its job id, or null (left alone). */
export async function queueStartAgain(ctx: Pick<AppContext, 'db' | 'queues'>, serverId: number, reason: StartAgainReason) {
  const server = await ctx.db.rootServer.findUnique({ where: { id: serverId } });
  if (!server || !shouldRun(server)) return null;
  return ctx.queues.enqueue(odooJobs.odoo_start_again, { root_server_id: serverId, reason, user_id: null });
}

/** Monitoring's polls (onMonitorPoll): a host back online after it was offline gets its Odoo checked and started. */
export function startOdooWhenBackOnline(ctx: Pick<AppContext, 'db' | 'queues' | 'log'>): MonitorPollObserver {
  return async (events) => {
    for (const event of events) {
      if (event.outcome !== 'ok' || event.previous_state !== 'offline') continue;
      // One server's failure is logged, never the others' (odoo_status finds it stopped later too).
      await queueStartAgain(ctx, event.root_server_id, 'back_online').catch((err: Error) =>
        ctx.log.error({ err, root_server_id: event.root_server_id }, 'odoo_start_again not queued for a server back online'),
      );
    }
  };
}
