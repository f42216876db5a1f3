import { z } from 'zod';
import { refId } from '../core/http/schemas.js';
import { defineJobs, job } from '../core/jobs.js';

export const monitorJobs = defineJobs({
  // One poll of one monitored root server; created by its job scheduler. Read-only (reads /proc
  // over SSH) and periodic: a lost poll is simply taken again.
  monitor_poll: job({ queue: 'monitor', payload: z.object({ root_server_id: refId }), afterCrash: 'rerun' }),
  // Daily: deletes monitor logs older than the Keep Root Server Log Period.
  monitor_log_retention: job({
    queue: 'maintenance',
    payload: z.object({}),
    key: () => 'monitor_log_retention',
    afterCrash: 'rerun',
  }),
});
