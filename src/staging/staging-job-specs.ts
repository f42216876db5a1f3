// The staging jobs. Each is idempotent and run again after a crash: create starts over (what an
// earlier run left of its copy is dropped first), drop and expire drop what is still there, refresh
// puts the copy back from its safety copy and updates it again, follow queues what is stale.
import { z } from 'zod';
import { refId } from '../core/http/schemas.js';
import { defineJobs, job, requestedBy } from '../core/jobs.js';

const onCopy = z.object({ staging_instance_id: refId, ...requestedBy });
/** Whom the ready mail goes to: the operator who asked (default), or the customer. */
const onCreate = onCopy.extend({ notify_customer: z.boolean().default(false) });
const perCopy = (p: { staging_instance_id: number }) => String(p.staging_instance_id);

export const stagingJobs = defineJobs({
  staging_create: job({ queue: 'staging', payload: onCreate, key: perCopy, afterCrash: 'rerun' }),
  staging_drop: job({ queue: 'staging', payload: onCopy, key: perCopy, afterCrash: 'rerun' }),
  staging_expire: job({ queue: 'staging', payload: z.object({ ...requestedBy }), key: () => 'all', afterCrash: 'rerun' }),
  // A refresh run again resumes: its copy is put back from the safety copy first, then updated.
  staging_refresh: job({ queue: 'staging', payload: onCopy, key: perCopy, afterCrash: 'rerun' }),
  staging_follow: job({ queue: 'staging', payload: z.object({ ...requestedBy }), key: () => 'all', afterCrash: 'rerun' }),
});
