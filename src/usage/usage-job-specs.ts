import { z } from 'zod';
import { defineJobs, job, requestedBy } from '../core/jobs.js';

export const usageJobs = defineJobs({
  // Every 5 minutes a round runs when usage_interval_minutes passed since the last; on demand at once.
  collect_usage: job({
    queue: 'maintenance',
    payload: z.object({ now: z.boolean().default(false), ...requestedBy }),
    key: (p) => (p.now ? 'now' : 'scheduled'),
    // Idempotent, so run again after a crash: measuring again only measures again, notices are
    // claimed once, and a suspension (the one remote change) is decided under the row lock on the
    // state it finds (a running, exceeded subscription), its mail sent only by the run that made it.
    afterCrash: 'rerun',
  }),
});
