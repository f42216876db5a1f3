// Inbound webhooks: webhook records, POST /svc/webhook/<token>, the call log and
// its retention. The methods a webhook may call come from every feature (the registry).
import type { Feature } from '../feature.js';
import { webhookJobHandlers, scheduleWebhookJobs } from './webhook-jobs.js';
import { webhookModel } from './webhook-models.js';
import { registerWebhookRoutes } from './webhook-routes.js';

export const webhooks: Feature = {
  name: 'webhooks',
  models: [webhookModel],
  routes: registerWebhookRoutes,
  jobs: webhookJobHandlers,
  schedules: scheduleWebhookJobs,
};

// What other features use from this one: they import it from here, never from the files.
export { newWebhookToken, webhookUrl } from './webhook-token.js';
