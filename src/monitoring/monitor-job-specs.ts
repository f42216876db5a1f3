import { z } from 'zod';
import { defineJobs, job } from '../core/jobs.js';

export const monitorJobs = defineJobs({
  // The polls themselves are not jobs: the monitor runner of each worker (monitor-runner.ts) runs them.
  // Daily: deletes monitor logs older than the Keep Root Server Log Period.
  monitor_log_retention: job({
    queue: 'maintenance',
    payload: z.object({}),
    key: () => 'monitor_log_retention',
    afterCrash: 'rerun',
  }),
});
