import { z } from 'zod';
import { defineJobs, job } from '../core/jobs.js';
import { refId } from '../core/http/schemas.js';

export const monitorJobs = defineJobs({
  // The polls themselves are not jobs: the monitor runner of each worker (monitor-runner.ts) runs them.
  // Daily: deletes monitor logs older than the Keep Root Server Log Period.
  monitor_log_retention: job({
    queue: 'maintenance',
    payload: z.object({}),
    key: () => 'monitor_log_retention',
    afterCrash: 'rerun',
  }),
  // After a stop_monitor committed: tells the features that react to it (alerts resolve the
  // server's firing alerts). Their handling is idempotent, so a retry or a rerun is harmless.
  monitor_stopped: job({
    queue: 'monitor',
    payload: z.object({ root_server_id: refId, at: z.iso.datetime(), by: z.string().nullable().default(null) }),
    key: (p) => `${p.root_server_id}:${p.at}`,
    attempts: 3,
    afterCrash: 'rerun',
  }),
});
