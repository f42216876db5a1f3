import { z } from 'zod';
import { defineJobs, job, requestedBy } from '../core/jobs.js';

export const standbyJobs = defineJobs({
  // Every minute, and after a deployment took a standby: removes stale standbys, makes missing ones.
  maintain_standby_pool: job({
    queue: 'maintenance',
    payload: z.object({ ...requestedBy }),
    key: () => 'pool',
    // Idempotent: a run first removes what a dead run left (creating rows), then fills the pool.
    afterCrash: 'rerun',
  }),
});
