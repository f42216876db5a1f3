// Monitoring jobs: the daily retention of monitor logs, and telling the features of a
// stop_monitor; registerMonitorSchedules() runs at worker start. The polls run in the monitor
// runner (monitor-runner.ts), the worker's background task.
import type { AppContext } from '../context.js';
import { featureJobs } from '../feature.js';
import { monitorJobs } from './monitor-job-specs.js';
import type { Registry } from '../feature.js';
import { startMonitorRunner } from './monitor-runner.js';
import { createMonitorService } from './monitor-service.js';
import { deleteOldMonitorLogs } from './monitor-log-service.js';

/** Daily at 03:17 (UTC): outside business hours in most places, and off the top of the hour. */
const RETENTION_PATTERN = '17 3 * * *';

export const monitorJobHandlers = featureJobs(
  monitorJobs,
  (ctx, registry) => {
    return {
      async monitor_log_retention(_payload, job) {
        const { keep_root_server_log_period: days } = await ctx.db.settings.findUniqueOrThrow({ where: { id: 1 } });
        const result = await deleteOldMonitorLogs(ctx.db, days, { afterBatch: (deleted) => job.updateProgress({ deleted }) });
        return { ...result, days };
      },
      async monitor_stopped(payload) {
        const event = { root_server_id: payload.root_server_id, at: new Date(payload.at), by: payload.by };
        for (const observe of registry.monitorStopObservers) await observe(event);
        return { told: registry.monitorStopObservers.length };
      },
    };
  },
  {},
);

/** The monitor runner of this worker process: polls the servers it holds a lease on. */
export function startMonitoring(ctx: AppContext, registry: Registry) {
  return startMonitorRunner(ctx, { observers: registry.monitorPollObservers });
}

/** The retention schedule and the schedule of every monitored server (idempotent). */
export async function registerMonitorSchedules(ctx: AppContext) {
  await ctx.queues.schedule('monitor-log-retention', { pattern: RETENTION_PATTERN, tz: 'UTC' }, monitorJobs.monitor_log_retention, {});
  const monitored = await createMonitorService(ctx).reconcile();
  ctx.log.info({ monitored }, 'monitoring schedules in place');
}
