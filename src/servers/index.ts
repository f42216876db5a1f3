// Root servers over SSH: the resource, state actions, SSH jobs and the
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

// What other features use from this one: they import it from here, never from the files.
export { CADDY_LOG, CADDY_SITES_DIR, caddyCommand, geventPortOf, HOST_SECRET_HEADER, TENANT_HEADER_SPELLINGS } from './caddy.js';
export { DATABASE_NAME, type HostPattern, TLS_ASK_PATH, tenantHostPatterns, tenantsOfHostname } from './tenant-sites.js';
export { checkedResult, formatResult, openRemoteSession, stepFailed } from './remote-session.js';
export { basePathOf } from './odoo-base-path.js';
export type { Audit, RemoteSession } from './remote-session.js';
export {
  METRIC_COLUMNS,
  METRIC_COLUMN_LIST,
  METRIC_NAMES,
  intervalMs,
  metricFields,
  metricsRowOut,
  rounded,
} from './root-server-metrics.js';
export type { MetricRow, Metrics } from './root-server-metrics.js';
export { rootServerOut } from './root-server-schemas.js';
export { createRootServerService } from './root-server-service.js';
export { connectRootServer } from './root-server-ssh.js';
export { assertRootServersExist, loadRootServer, requireConfirmed, updateRootServer } from './root-server-store.js';
