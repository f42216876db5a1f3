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

// What other features use from this one: they import it from here, never from the files.
export { databaseStep, postAlert, postNotice } from './subscription-audit.js';
export type { Actor, StepAudit } from './subscription-audit.js';
export { onInstance, type SharedSession } from './subscription-database.js';
export { subscriptionJobs } from './subscription-job-specs.js';
export { createCustomerMail } from './subscription-mail.js';
export { packageFieldsIn, packageFieldsOut } from './subscription-schemas.js';
export { refuseNoRetention } from './subscription-retention.js';
export { createTrialSubscription, lockSubscription, reserveSubscriptionId, subscriptionUrl } from './subscription-service.js';
export { createSuspensionService } from './subscription-suspension.js';
export { describeMeasure, judgedUsageState, rises, unjudgedMeasures, usageStateOf, WITHHELD_ROUNDS_LIMIT } from './subscription-usage.js';
export type { Measure, Usage } from './subscription-usage.js';
