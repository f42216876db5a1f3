// /api/v1/git-accounts, /api/v1/git-repositories and their commits (administrators),
// with the repository actions: link_git_webhook and delete_git_webhook answer when
// done; push_commit answers 202 {job_id}.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { action, operationId, registerActions } from '../core/http/actions.js';
import { registerCrud } from '../core/http/crud.js';
import { idParams, listOf, listQuery } from '../core/http/schemas.js';
import { GitRepositoryState } from '../generated/prisma/enums.js';
import { createGitAccountService } from './git-account-service.js';
import { createGitRepositoryService } from './git-repository-service.js';
import { gitAccountModel, gitRepositoryModel } from './git-models.js';
import {
  gitAccount,
  gitAccountCreate,
  gitAccountUpdate,
  gitCommit,
  gitRepository,
  gitRepositoryCreate,
  gitRepositoryUpdate,
} from './git-schemas.js';

export function registerGitRoutes(parent: FastifyInstance, ctx: AppContext) {
  const repositories = createGitRepositoryService(ctx);
  registerCrud(parent, {
    path: '/git-accounts',
    model: gitAccountModel,
    tag: 'git',
    service: createGitAccountService(ctx),
    output: gitAccount,
    create: gitAccountCreate,
    update: gitAccountUpdate,
    read: 'administrator',
    write: 'administrator',
  });
  registerCrud(parent, {
    path: '/git-repositories',
    model: gitRepositoryModel,
    tag: 'git',
    service: repositories,
    output: gitRepository,
    create: gitRepositoryCreate,
    update: gitRepositoryUpdate,
    filters: z.object({ state: z.enum(GitRepositoryState).optional() }),
    read: 'administrator',
    write: 'administrator',
  });

  parent.withTypeProvider<ZodTypeProvider>().get('/api/v1/git-repositories/:id/commits', {
    config: { group: 'administrator' },
    schema: {
      tags: ['git'],
      operationId: operationId('/git-repositories', 'listCommits'),
      summary: 'List the commits of a git repository',
      description: 'Recorded commits, newest first.',
      params: idParams,
      querystring: listQuery,
      response: { 200: listOf(gitCommit) },
    },
    handler: (req) => repositories.listCommits(req.params.id, req.query),
  });

  registerActions(parent, {
    path: '/git-repositories',
    tag: 'git',
    group: 'administrator',
    actions: {
      link_git_webhook: action({
        summary: 'Link the push webhook of a git repository',
        description:
          'draft → active: creates a signed inbound webhook for the repository and registers it at the git host for push events. 400 when the account has no token or the repository lacks name or branch_name, or when the git host refuses.',
        response: gitRepository,
        run: ({ id, author }) => repositories.linkGitWebhook(id, author),
      }),
      delete_git_webhook: action({
        summary: 'Delete the push webhook of a git repository',
        description: 'active → draft: deletes the webhook at the git host and here.',
        response: gitRepository,
        run: ({ id, author }) => repositories.deleteGitWebhook(id, author),
      }),
      push_commit: action({
        summary: 'Deploy the branch head of a git repository',
        description:
          "Records the head of branch_name from the git host and deploys it to the root server in a job: the commit's tarball is downloaded by the service and unpacked into a new release, every .py (py_compile) and .xml (parse) is checked, then deploy_path switches to it atomically. A failed check leaves deploy_path unchanged.",
        response: 'job',
        run: ({ id, author }) => repositories.pushCommit(id, author),
      }),
    },
  });
}
