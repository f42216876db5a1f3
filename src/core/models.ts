// The record families of the service: the spec's model name, the REST resource, and the Prisma
// delegate. Chatter, activities, the action log and inbound webhooks address records through it.
import type { UserGroup } from '../auth/groups.js';

export interface ModelInfo {
  resource: string;
  delegate: string;
  /** Minimum group that may read the record and its chatter. */
  readGroup: UserGroup;
}

export const MODELS = {
  'res.users': { resource: 'users', delegate: 'user', readGroup: 'administrator' },
  'svc.subscription.trial.package': { resource: 'trial-packages', delegate: 'trialPackage', readGroup: 'user' },
  'svc.subscription.trial.request': { resource: 'trial-requests', delegate: 'trialRequest', readGroup: 'user' },
  'svc.subscription.trial.otp': { resource: 'trial-verifications', delegate: 'trialVerification', readGroup: 'user' },
  'res.partner': { resource: 'partners', delegate: 'partner', readGroup: 'user' },
  'svc.subscription': { resource: 'subscriptions', delegate: 'subscription', readGroup: 'user' },
  'svc.database.template': { resource: 'database-templates', delegate: 'databaseTemplate', readGroup: 'user' },
  'svc.saas.webhook': { resource: 'webhooks', delegate: 'webhook', readGroup: 'administrator' },
  'svc.root.server': { resource: 'root-servers', delegate: 'rootServer', readGroup: 'user' },
  'svc.postgresql.server': { resource: 'postgresql-servers', delegate: 'postgresqlServer', readGroup: 'user' },
  'svc.saas.backup.server': { resource: 'backup-servers', delegate: 'backupServer', readGroup: 'user' },
  'svc.ntfy.server': { resource: 'notification-servers', delegate: 'notificationServer', readGroup: 'user' },
  'svc.saas.git.account': { resource: 'git-accounts', delegate: 'gitAccount', readGroup: 'administrator' },
  'svc.saas.git.repository': { resource: 'git-repositories', delegate: 'gitRepository', readGroup: 'administrator' },
  'svc.saas.git.commit': { resource: 'git-commits', delegate: 'gitCommit', readGroup: 'administrator' },
} as const satisfies Record<string, ModelInfo>;

export type ModelName = keyof typeof MODELS;

export function isModelName(name: string): name is ModelName {
  return Object.hasOwn(MODELS, name);
}

/** The PostgreSQL table of each record family (raw SQL, e.g. the webhook endpoint's fast path). */
export const MODEL_TABLES = {
  'res.users': 'users',
  'svc.subscription.trial.package': 'trial_packages',
  'svc.subscription.trial.request': 'trial_requests',
  'svc.subscription.trial.otp': 'trial_verifications',
  'res.partner': 'partners',
  'svc.subscription': 'subscriptions',
  'svc.database.template': 'database_templates',
  'svc.saas.webhook': 'webhooks',
  'svc.root.server': 'root_servers',
  'svc.postgresql.server': 'postgresql_servers',
  'svc.saas.backup.server': 'backup_servers',
  'svc.ntfy.server': 'notification_servers',
  'svc.saas.git.account': 'git_accounts',
  'svc.saas.git.repository': 'git_repositories',
  'svc.saas.git.commit': 'git_commits',
} as const satisfies Record<ModelName, string>;
