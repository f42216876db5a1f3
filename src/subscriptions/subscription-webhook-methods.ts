// Subscription state methods callable by inbound webhooks (e.g. a payment provider's callback).
// They run in the webhook's transaction; a refused transition (409) rolls the call back.
import type { AppContext } from '../context.js';
import type { WebhookMethodTable } from '../core/webhook-methods.js';
import { subscriptionJobs } from './subscription-job-specs.js';
import { assertState, DEPLOYABLE_STATES, lockSubscription, transitionSubscription } from './subscription-service.js';

export function subscriptionWebhookMethods(ctx: Pick<AppContext, 'queues'>): WebhookMethodTable {
  return {
    'svc.subscription': {
      action_confirm: async (id, { tx }) => void (await transitionSubscription(tx, id, 'confirm', null)),
      action_cancel: async (id, { tx }) => void (await transitionSubscription(tx, id, 'cancel', null)),
      action_reset_to_draft: async (id, { tx }) => void (await transitionSubscription(tx, id, 'reset_to_draft', null)),
      // The deployment is a job; the job claims the state itself, so queueing it before the
      // webhook's transaction commits is safe (the state is checked here and again by the job).
      action_deploy: async (id, { tx }) => {
        assertState(await lockSubscription(tx, id), DEPLOYABLE_STATES, 'deploy');
        await ctx.queues.enqueue(subscriptionJobs.deploy_subscription, { subscription_id: id, user_id: null });
      },
    },
  };
}
