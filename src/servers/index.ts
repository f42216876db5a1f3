// Root servers over SSH (spec §2.4, §3.3, §4.4): the resource, state actions, SSH jobs and the
// methods inbound webhooks may call.
import type { Feature } from '../feature.js';
import { rootServerJobHandlers } from './root-server-jobs.js';
import { rootServerModel } from './root-server-models.js';
import { registerRootServerRoutes } from './root-server-routes.js';
import { rootServerWebhookMethods } from './root-server-webhook-methods.js';

export const servers: Feature = {
  name: 'servers',
  models: [rootServerModel],
  routes: registerRootServerRoutes,
  jobs: rootServerJobHandlers,
  webhookMethods: rootServerWebhookMethods,
};
