import { z } from 'zod';
import { defineJobs, job } from '../core/jobs.js';

export const webhookJobs = defineJobs({
  // Daily retention of the call log (settings.webhook_call_log_days).
  prune_webhook_calls: job({
    queue: 'maintenance',
    payload: z.object({}),
    key: () => 'prune_webhook_calls',
    afterCrash: 'rerun',
  }),
});
