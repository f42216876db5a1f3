import { z } from 'zod';
import { refId } from '../core/http/schemas.js';
import { defineJobs, job, requestedBy } from '../core/jobs.js';

export const trialJobs = defineJobs({
  // A new trial request of a package with Auto Run Subscription.
  process_trial_request: job({
    queue: 'trials',
    payload: z.object({ trial_request_id: refId, ...requestedBy }),
    key: (p) => String(p.trial_request_id),
    // One local transaction guarded by the request's state (a second run finds it done and skips);
    // the remote part is the deploy_subscription job it queues.
    afterCrash: 'rerun',
  }),
});
