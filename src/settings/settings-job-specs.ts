import { z } from 'zod';
import { defineJobs, job, requestedBy } from '../core/jobs.js';

export const settingsJobs = defineJobs({
  rotate_encryption_key: job({
    queue: 'maintenance',
    payload: z.object({ ...requestedBy }),
    key: () => 'rotate_encryption_key',
    // Idempotent (rows already on the new key are skipped): a crash or an error is retried.
    afterCrash: 'rerun',
    attempts: 3,
  }),
});
