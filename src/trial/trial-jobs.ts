import type { AppContext } from '../context.js';
import type { JobHandlers } from '../worker.js';
import { ConflictError } from '../core/errors.js';
import { authorOfUser } from '../chatter/chatter-service.js';
import { processTrialRequest } from './trial-processing.js';

export function createTrialJobs(ctx: AppContext): Pick<JobHandlers, 'process_trial_request'> {
  return {
    async process_trial_request(payload) {
      try {
        return await processTrialRequest(ctx, payload.trial_request_id, await authorOfUser(ctx.db, payload.user_id));
      } catch (err) {
        // Processed or cancelled meanwhile (e.g. by an operator): nothing left to do.
        if (err instanceof ConflictError) return { skipped: err.message };
        throw err;
      }
    },
  };
}
