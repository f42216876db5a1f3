// Trial signup: the public pages with the e-mail code, trial
// packages, requests and verifications, and the processing into a partner and a subscription.
import type { Feature } from '../feature.js';
import { trialJobHandlers } from './trial-jobs.js';
import { trialPackageModel, trialRequestModel, trialVerificationModel } from './trial-models.js';
import { registerTrialPackageRoutes } from './trial-package-routes.js';
import { registerTrialPageRoutes } from './trial-page-routes.js';
import { registerTrialRequestRoutes } from './trial-request-routes.js';
import { trialRequestWebhookMethods } from './trial-request-webhook-methods.js';
import { registerTrialVerificationRoutes } from './trial-verification-routes.js';

export const trial: Feature = {
  name: 'trial',
  models: [trialPackageModel, trialRequestModel, trialVerificationModel],
  async routes(app, ctx) {
    registerTrialPackageRoutes(app, ctx);
    registerTrialRequestRoutes(app, ctx);
    registerTrialVerificationRoutes(app, ctx);
    // Public pages (not under /api/v1): the trial form, code entry, confirmation.
    await registerTrialPageRoutes(app, ctx);
  },
  jobs: trialJobHandlers,
  webhookMethods: trialRequestWebhookMethods,
};
