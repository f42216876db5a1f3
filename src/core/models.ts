// The record families of the service: the spec's model name, the REST resource, the Prisma
// delegate and the table. Chatter, activities, the action log and inbound webhooks address records
// through it.
import type { UserGroup } from '../auth/groups.js';
import type { Db, DbTx } from './db.js';

export interface ModelInfo {
  resource: string;
  delegate: string;
  /** PostgreSQL table, for the few raw-SQL paths (the webhook endpoint's message insert). */
  table: string;
  /** Minimum group that may read the record and its chatter. */
  readGroup: UserGroup;
}

export const MODELS = {
  'res.users': { resource: 'users', delegate: 'user', table: 'users', readGroup: 'administrator' },
  'svc.subscription.trial.package': { resource: 'trial-packages', delegate: 'trialPackage', table: 'trial_packages', readGroup: 'user' },
  'svc.subscription.trial.request': { resource: 'trial-requests', delegate: 'trialRequest', table: 'trial_requests', readGroup: 'user' },
  'svc.subscription.trial.otp': { resource: 'trial-verifications', delegate: 'trialVerification', table: 'trial_verifications', readGroup: 'user' },
  'res.partner': { resource: 'partners', delegate: 'partner', table: 'partners', readGroup: 'user' },
  'svc.subscription': { resource: 'subscriptions', delegate: 'subscription', table: 'subscriptions', readGroup: 'user' },
  'svc.database.template': { resource: 'database-templates', delegate: 'databaseTemplate', table: 'database_templates', readGroup: 'user' },
  'svc.saas.webhook': { resource: 'webhooks', delegate: 'webhook', table: 'webhooks', readGroup: 'administrator' },
  'svc.root.server': { resource: 'root-servers', delegate: 'rootServer', table: 'root_servers', readGroup: 'user' },
  'svc.postgresql.server': { resource: 'postgresql-servers', delegate: 'postgresqlServer', table: 'postgresql_servers', readGroup: 'user' },
  'svc.saas.backup.server': { resource: 'backup-servers', delegate: 'backupServer', table: 'backup_servers', readGroup: 'user' },
  'svc.ntfy.server': { resource: 'notification-servers', delegate: 'notificationServer', table: 'notification_servers', readGroup: 'user' },
  'svc.saas.git.account': { resource: 'git-accounts', delegate: 'gitAccount', table: 'git_accounts', readGroup: 'administrator' },
  'svc.saas.git.repository': { resource: 'git-repositories', delegate: 'gitRepository', table: 'git_repositories', readGroup: 'administrator' },
  'svc.saas.git.commit': { resource: 'git-commits', delegate: 'gitCommit', table: 'git_commits', readGroup: 'administrator' },
} as const satisfies Record<string, ModelInfo>;

export type ModelName = keyof typeof MODELS;

export function isModelName(name: string): name is ModelName {
  return Object.hasOwn(MODELS, name);
}


/** Whether the record exists (model names outside the registry never do). */
export async function recordExists(client: Db | DbTx, modelName: string, id: number): Promise<boolean> {
  if (!isModelName(modelName)) return false;
  const delegate = (client as unknown as Record<string, { count(args: object): Promise<number> }>)[MODELS[modelName].delegate]!;
  return (await delegate.count({ where: { id } })) > 0;
}
