// Trial request actions callable by inbound webhooks. Processing runs its own transaction and
// deployment, so the webhook queues it (as Auto Run Subscription does) after checking the state.
import type { AppContext } from '../context.js';
import { ConflictError } from '../core/errors.js';
import type { WebhookMethodTable } from '../core/webhook-methods.js';
import { lockTrialRequest, transitionTrialRequest } from './trial-request-service.js';
import { trialJobs } from './trial-job-specs.js';

export function trialRequestWebhookMethods(ctx: Pick<AppContext, 'queues'>): WebhookMethodTable {
  return {
    'svc.subscription.trial.request': {
      action_cancel: async (id, { tx }) => void (await transitionTrialRequest(tx, id, 'cancel', null)),
      action_reset_to_new: async (id, { tx }) => void (await transitionTrialRequest(tx, id, 'reset_to_new', null)),
      action_create_subscription: async (id, { tx }) => {
        const request = await lockTrialRequest(tx, id);
        if (request.state !== 'new' || request.subscription_id !== null) {
          throw new ConflictError(`Trial request ${id} is ${request.state}; create_subscription needs new without a subscription`);
        }
        await ctx.queues.enqueue(trialJobs.process_trial_request, { trial_request_id: id, user_id: null });
      },
    },
  };
}
