import type { AppContext } from '../context.js';
import type { JobHandlers } from '../worker.js';
import { deploySubscription } from './subscription-deployment.js';

export function createSubscriptionJobs(ctx: AppContext): Pick<JobHandlers, 'deploy_subscription'> {
  return {
    deploy_subscription: (payload, job) =>
      deploySubscription(ctx, payload.subscription_id, { userId: payload.user_id, jobId: `${job.queueName}-${job.id}` }),
  };
}
