// Trial jobs: the processing of a trial request (Auto Run Subscription).
import { authorOfUser } from '../core/chatter.js';
import { ConflictError } from '../core/errors.js';
import { featureJobs } from '../feature.js';
import { trialJobs } from './trial-job-specs.js';
import { processTrialRequest, queueMissedDeployment } from './trial-processing.js';

export const trialJobHandlers = featureJobs(
  trialJobs,
  (ctx) => ({
    async process_trial_request(payload) {
      const author = await authorOfUser(ctx.db, payload.user_id);
      try {
        return await processTrialRequest(ctx, payload.trial_request_id, author);
      } catch (err) {
        if (!(err instanceof ConflictError)) throw err;
        // Processed already: by this job before its worker died (then its deployment may still be
        // missing), or by an operator meanwhile, or cancelled.
        const deploymentJobId = await queueMissedDeployment(ctx, payload.trial_request_id, author);
        return deploymentJobId ? { resumed: true, deployment_job_id: deploymentJobId } : { skipped: err.message };
      }
    },
  }),
  {},
);
