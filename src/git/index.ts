// Git: accounts, repositories, commits, the push webhook registered at the
// git host, and deploys over SSH.
import type { Feature } from '../feature.js';
import { gitJobHandlers } from './git-jobs.js';
import { gitAccountModel, gitCommitModel, gitRepositoryModel } from './git-models.js';
import { registerGitRoutes } from './git-routes.js';
import { gitWebhookMethods } from './git-webhook-methods.js';

export const git: Feature = {
  name: 'git',
  models: [gitAccountModel, gitRepositoryModel, gitCommitModel],
  routes: registerGitRoutes,
  jobs: gitJobHandlers,
  webhookMethods: gitWebhookMethods,
};

// What other features use from this one.
export { effectiveDeployPath } from './git-repository-service.js';
