// Subscriptions: the resource, its state methods, the deployment, backups,
// restores and drops of its database, and the trial lifecycle (mails, expiry, drop after grace).
import type { Feature } from '../feature.js';
import { registerSubscriptionSchedules, subscriptionJobHandlers } from './subscription-jobs.js';
import { subscriptionModel } from './subscription-models.js';
import { registerSubscriptionRoutes } from './subscription-routes.js';
import { subscriptionWebhookMethods } from './subscription-webhook-methods.js';

export const subscriptions: Feature = {
  name: 'subscriptions',
  models: [subscriptionModel],
  routes: registerSubscriptionRoutes,
  jobs: subscriptionJobHandlers,
  schedules: registerSubscriptionSchedules,
  webhookMethods: subscriptionWebhookMethods,
};
