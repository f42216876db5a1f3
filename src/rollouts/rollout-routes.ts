// /api/v1/rollouts (operators read and retry), a commit's rollouts under its repository
// (administrators, as the rest of git), and /api/v1/rollout-settings (administrators change them).
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { action, operationId, registerActions } from '../core/http/actions.js';
import { ifMatchHeaders, ifMatchOf, withEtag } from '../core/http/etag.js';
import { idParams, listOf, listQuery, queryId } from '../core/http/schemas.js';
import { createRolloutService } from './rollout-service.js';
import { retryTenant, rollout, rolloutFilters, rolloutSettingsOut, rolloutSettingsUpdate } from './rollout-schemas.js';

export function registerRolloutRoutes(parent: FastifyInstance, ctx: AppContext) {
  const app = parent.withTypeProvider<ZodTypeProvider>();
  const service = createRolloutService(ctx);
  const tags = ['rollouts'];

  app.get('/api/v1/rollouts', {
    config: { group: 'operator' },
    schema: {
      tags,
      operationId: operationId('/rollouts', 'list'),
      summary: 'List rollouts',
      description: 'Code rollouts to the tenants of a host after a git deploy, newest first; ?root_server_id= and ?git_commit_id= filter.',
      querystring: listQuery.extend(rolloutFilters.shape),
      response: { 200: listOf(rollout) },
    },
    handler: (req) => service.list(req.query),
  });

  app.get('/api/v1/rollouts/:id', {
    config: { group: 'operator', etag: true },
    schema: {
      tags,
      operationId: operationId('/rollouts', 'get'),
      summary: 'Get a rollout',
      description: 'Its counts (updated, unchanged, failed, pending, superseded) and every tenant with its result and duration.',
      params: idParams,
      response: { 200: rollout },
    },
    handler: async (req, reply) => withEtag(reply, rollout, await service.get(req.params.id)),
  });

  app.get('/api/v1/git-repositories/:id/commits/:commit_id/rollouts', {
    config: { group: 'administrator' },
    schema: {
      tags: ['git', ...tags],
      operationId: operationId('/git-repositories', 'listCommitRollouts'),
      summary: 'The rollouts of a commit',
      description: 'What the deploy of this commit did to the tenants of its host, newest first.',
      params: z.object({ id: queryId, commit_id: queryId }),
      response: { 200: z.object({ items: z.array(rollout) }) },
    },
    handler: (req) => service.ofCommit(req.params.id, req.params.commit_id),
  });

  registerActions(parent, {
    path: '/rollouts',
    tag: 'rollouts',
    group: 'operator',
    actions: {
      retry_rollout: action({
        summary: 'Retry a rollout',
        description:
          'Its failed tenants again (each restored before, each gets a new safety copy), or the whole rollout when it ended before it began (not on the addons path, restart failed). 409 when a newer rollout of the host followed, or no tenant failed.',
        response: 'job',
        run: ({ id, author }) => service.retryRollout(id, author),
      }),
      retry_tenant: action({
        summary: 'Retry one failed tenant of a rollout',
        description:
          'The tenant (a subscription whose update failed in this rollout) again. 409 when it did not fail here or a newer rollout followed.',
        body: retryTenant,
        response: 'job',
        run: ({ id, body, author }) => service.retryTenant(id, body.subscription_id, author),
      }),
    },
  });

  const current = async () => present(await service.getSettings());
  app.get('/api/v1/rollout-settings', {
    config: { group: 'operator', etag: true },
    schema: {
      tags,
      operationId: operationId('/rollout-settings', 'get'),
      summary: 'Get the rollout settings',
      description: 'How many tenants of one host are updated at once, and their order.',
      response: { 200: rolloutSettingsOut },
    },
    handler: async (_req, reply) => withEtag(reply, rolloutSettingsOut, await current()),
  });

  app.patch('/api/v1/rollout-settings', {
    config: { group: 'administrator', etag: true },
    schema: {
      tags,
      operationId: operationId('/rollout-settings', 'update'),
      summary: 'Update the rollout settings',
      description:
        'Administrators. tenants_per_host 1 to 32; order trials_first, paid_first or oldest_first. Applies from the next tenant a rollout takes.',
      headers: ifMatchHeaders,
      body: rolloutSettingsUpdate,
      response: { 200: rolloutSettingsOut },
    },
    handler: async (req, reply) => {
      const precondition = ifMatchOf(req, rolloutSettingsOut, current);
      return withEtag(reply, rolloutSettingsOut, present(await service.updateSettings(req.body, precondition)));
    },
  });
}

const present = (s: { tenants_per_host: number; order: 'trials_first' | 'paid_first' | 'oldest_first'; updated_at: Date }) => ({
  tenants_per_host: s.tenants_per_host,
  order: s.order,
  updated_at: s.updated_at.toISOString(),
});
