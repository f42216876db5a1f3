import { z } from 'zod';
import { defineJobs, job, requestedBy } from '../core/jobs.js';

export const usageJobs = defineJobs({
  // Every 5 minutes a round runs when usage_interval_minutes passed since the last; on demand at once.
  collect_usage: job({
    queue: 'maintenance',
    payload: z.object({ now: z.boolean().default(false), ...requestedBy }),
    key: (p) => (p.now ? 'now' : 'scheduled'),
    // A round claims nothing remote: measured again, it measures again (notices are claimed once).
    afterCrash: 'rerun',
  }),
});
