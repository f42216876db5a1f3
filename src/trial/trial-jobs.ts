// Trial jobs: the processing of a trial request (Auto Run Subscription).
import { authorOfUser } from '../core/chatter.js';
import { ConflictError } from '../core/errors.js';
import { featureJobs } from '../feature.js';
import { trialJobs } from './trial-job-specs.js';
import { processTrialRequest } from './trial-processing.js';

export const trialJobHandlers = featureJobs(
  trialJobs,
  (ctx) => ({
    async process_trial_request(payload) {
      try {
        return await processTrialRequest(ctx, payload.trial_request_id, await authorOfUser(ctx.db, payload.user_id));
      } catch (err) {
        // Processed or cancelled meanwhile (e.g. by an operator): nothing left to do.
        if (err instanceof ConflictError) return { skipped: err.message };
        throw err;
      }
    },
  }),
  {},
);
