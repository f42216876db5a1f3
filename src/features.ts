// Every feature of the service, in one explicit list (no autoloading): adding a feature is adding
// its folder with a manifest (index.ts) and one line here. composeFeatures() builds what the
// features give each other: the models, the job catalog, the webhook methods and the observers.
import type { AppContext } from './context.js';
import { createJobCatalog } from './core/jobs.js';
import type { MetricsSource } from './core/metrics.js';
import { createModelRegistry } from './core/models.js';
import { composeWebhookMethods } from './core/webhook-methods.js';
import type { Feature, Registry } from './feature.js';
import { health } from './health/index.js';
import { auth } from './auth/index.js';
import { settings } from './settings/index.js';
import { actionLog } from './action-log/index.js';
import { chatter } from './chatter/index.js';
import { jobs } from './jobs/index.js';
import { postgresql } from './postgresql/index.js';
import { backup } from './backup/index.js';
import { notifications } from './notifications/index.js';
import { partners } from './partners/index.js';
import { databaseTemplates } from './database-templates/index.js';
import { instances } from './instances/index.js';
import { subscriptions } from './subscriptions/index.js';
import { usage } from './usage/index.js';
import { trial } from './trial/index.js';
import { webhooks } from './webhooks/index.js';
import { servers } from './servers/index.js';
import { monitoring } from './monitoring/index.js';
import { git } from './git/index.js';
import { alerts } from './alerts/index.js';
import { domains } from './domains/index.js';
import { maintenance } from './maintenance/index.js';
import { metrics } from './metrics/index.js';
import { odoo } from './odoo/index.js';
import { rollouts } from './rollouts/index.js';
import { staging } from './staging/index.js';
import { moves } from './moves/index.js';
import { placement } from './placement/index.js';
import { pools } from './pools/index.js';

export const FEATURES: readonly Feature[] = [
  health,
  auth,
  settings,
  actionLog,
  chatter,
  jobs,
  postgresql,
  backup,
  notifications,
  partners,
  databaseTemplates,
  instances,
  subscriptions,
  usage,
  trial,
  webhooks,
  servers,
  monitoring,
  git,
  alerts,
  domains,
  odoo,
  rollouts,
  staging,
  moves,
  placement,
  pools,
  maintenance,
  metrics,
];

/** What the features contribute, composed for one process. */
export function composeFeatures(ctx: AppContext, features: readonly Feature[] = FEATURES): Registry {
  const metricsSources: MetricsSource[] = [];
  const registry: Registry = {
    models: createModelRegistry(features.flatMap((f) => f.models ?? [])),
    jobs: createJobCatalog(features.flatMap((f) => Object.values(f.jobs?.specs ?? {}))),
    webhookMethods: composeWebhookMethods(...features.map((f) => f.webhookMethods?.(ctx) ?? {})),
    monitorPollObservers: features.flatMap((f) => (f.onMonitorPoll ? [f.onMonitorPoll(ctx)] : [])),
    monitorStopObservers: features.flatMap((f) => (f.onMonitorStop ? [f.onMonitorStop(ctx)] : [])),
    rootServerObservers: features.flatMap((f) => (f.onRootServerChange ? [f.onRootServerChange(ctx)] : [])),
    gitDeployObservers: features.flatMap((f) => (f.onGitDeploy ? [f.onGitDeploy(ctx)] : [])),
    odooChangeObservers: features.flatMap((f) => (f.onOdooChange ? [f.onOdooChange(ctx)] : [])),
    metricsSources,
  };
  // Sources may need the rest of the registry (the job catalog's queues).
  for (const f of features) metricsSources.push(...(f.metrics?.(ctx, registry) ?? []));
  return registry;
}
