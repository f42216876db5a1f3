import { defineModel } from '../core/models.js';

export const gitAccountModel = defineModel({
  name: 'svc.saas.git.account',
  delegate: 'gitAccount',
  table: 'git_accounts',
  resource: 'git-accounts',
  readGroup: 'administrator',
  search: ['name'],
  tracked: ['name', 'git_provider', 'user_id'],
  // Sent only to GIT_API_URL (configuration): no destination field on the record.
  secrets: ['access_token'],
});

export const gitRepositoryModel = defineModel({
  name: 'svc.saas.git.repository',
  delegate: 'gitRepository',
  table: 'git_repositories',
  resource: 'git-repositories',
  readGroup: 'administrator',
  search: ['name', 'branch_name'],
  tracked: ['name', 'branch_name', 'git_account_id', 'root_server_id', 'deploy_path', 'state', 'webhook_id', 'last_commit_id'],
});

export const gitCommitModel = defineModel({
  name: 'svc.saas.git.commit',
  delegate: 'gitCommit',
  table: 'git_commits',
  resource: 'git-commits',
  readGroup: 'administrator',
});

declare module '../core/models.js' {
  interface ModelNames {
    'svc.saas.git.account': true;
    'svc.saas.git.repository': true;
    'svc.saas.git.commit': true;
  }
}
