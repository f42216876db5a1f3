// /api/v1/git-accounts, /api/v1/git-repositories and their commits (administrators, DESIGN §3-4),
// with the repository actions of spec §4.4: link_git_webhook and delete_git_webhook answer when
// done; push_commit answers 202 {job_id}.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { authorOf, registerCrud } from '../core/http/crud.js';
import { idParams, jobAccepted, listOf, listQuery } from '../core/http/schemas.js';
import { GitRepositoryState } from '../generated/prisma/enums.js';
import { createGitAccountService } from './git-account-service.js';
import { createGitRepositoryService } from './git-repository-service.js';
import { gitAccount, gitAccountCreate, gitAccountUpdate, gitCommit, gitRepository, gitRepositoryCreate, gitRepositoryUpdate } from './git-schemas.js';

export function registerGitRoutes(parent: FastifyInstance, ctx: AppContext) {
  const repositories = createGitRepositoryService(ctx);
  registerCrud(parent, {
    path: '/git-accounts',
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
    tag: 'git',
    service: repositories,
    output: gitRepository,
    create: gitRepositoryCreate,
    update: gitRepositoryUpdate,
    filters: z.object({ state: z.enum(GitRepositoryState).optional() }),
    read: 'administrator',
    write: 'administrator',
  });

  const app = parent.withTypeProvider<ZodTypeProvider>();
  const tags = ['git'];

  app.get('/api/v1/git-repositories/:id/commits', {
    config: { group: 'administrator' },
    schema: { tags, description: 'Recorded commits, newest first.', params: idParams, querystring: listQuery, response: { 200: listOf(gitCommit) } },
    handler: (req) => repositories.listCommits(req.params.id, req.query),
  });

  const done = {
    link_git_webhook: {
      run: repositories.linkGitWebhook,
      description:
        'draft → active: creates a signed inbound webhook for the repository and registers it at the git host for push events. 400 when the account has no token or the repository lacks name or branch_name, or when the git host refuses.',
    },
    delete_git_webhook: {
      run: repositories.deleteGitWebhook,
      description: 'active → draft: deletes the webhook at the git host and here.',
    },
  } as const;
  for (const [name, action] of Object.entries(done)) {
    app.post(`/api/v1/git-repositories/:id/actions/${name}`, {
      config: { group: 'administrator' },
      schema: { tags, description: action.description, params: idParams, response: { 200: gitRepository } },
      handler: (req) => action.run(req.params.id, authorOf(req.user)),
    });
  }

  app.post('/api/v1/git-repositories/:id/actions/push_commit', {
    config: { group: 'administrator' },
    schema: {
      tags,
      description:
        'Records the head of branch_name from the git host and deploys it to the root server in a job: fetch into a new release, check every .py (py_compile) and .xml (parse), then switch deploy_path to it atomically. A failed check leaves deploy_path unchanged.',
      params: idParams,
      response: { 202: jobAccepted },
    },
    handler: async (req, reply) => reply.status(202).send({ job_id: await repositories.pushCommit(req.params.id, authorOf(req.user)) }),
  });
}
