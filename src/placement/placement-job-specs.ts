import { z } from 'zod';
import { defineJobs, job, requestedBy } from '../core/jobs.js';

export const placementJobs = defineJobs({
  // Every 5 minutes: each pool's free room against the threshold (the room alert).
  check_pool_room: job({
    queue: 'maintenance',
    payload: z.object({ ...requestedBy }),
    key: () => 'pools',
    // Idempotent: the alert is claimed by a conditional update.
    afterCrash: 'rerun',
  }),
});
