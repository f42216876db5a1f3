// Users and API tokens (administrators).
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { operationId } from '../core/http/actions.js';
import { registerCrud } from '../core/http/crud.js';
import { idParams, listOf, listQuery, queryId } from '../core/http/schemas.js';
import { createRecordService, jsonSafe, listPage } from '../core/records.js';
import { userModel } from './auth-models.js';
import { apiToken, apiTokenCreate, apiTokenCreated, user, userCreate, userUpdate } from './auth-schemas.js';
import { createAuthService } from './auth-service.js';

export function registerAuthRoutes(parent: FastifyInstance, ctx: AppContext) {
  const auth = createAuthService(ctx);
  const users = createRecordService(ctx, userModel);
  registerCrud(parent, {
    path: '/users',
    model: userModel,
    tag: 'users',
    service: { ...users, create: (data) => auth.createUser(data as z.infer<typeof userCreate>).then(jsonSafe) },
    output: user,
    create: userCreate,
    update: userUpdate,
    read: 'administrator',
    write: 'administrator',
  });

  const app = parent.withTypeProvider<ZodTypeProvider>();
  const tags = ['api-tokens'];
  const doc = (name: string, summary: string) => ({ tags, operationId: operationId('/api-tokens', name), summary });

  app.get('/api/v1/api-tokens', {
    config: { group: 'administrator' },
    schema: {
      ...doc('list', 'List API tokens'),
      querystring: listQuery.extend({ user_id: queryId.optional() }),
      response: { 200: listOf(apiToken) },
    },
    // The tokens of every user or of one; the answer schema leaves the hashes out.
    handler: (req) => {
      const { user_id, ...page } = req.query;
      return listPage(ctx, ctx.db.apiToken, { user_id }, page, { table: 'api_tokens', resource: 'api-tokens', sort: 'id' });
    },
  });

  app.post('/api/v1/api-tokens', {
    config: { group: 'administrator' },
    schema: { ...doc('create', 'Create an API token'), body: apiTokenCreate, response: { 201: apiTokenCreated } },
    handler: async (req, reply) => reply.status(201).send(await auth.issueToken(req.body, req.user!)),
  });

  app.delete('/api/v1/api-tokens/:id', {
    config: { group: 'administrator' },
    schema: { ...doc('delete', 'Revoke an API token'), params: idParams, response: { 204: z.null() } },
    handler: async (req, reply) => {
      await auth.revokeToken(req.params.id);
      return reply.status(204).send(null);
    },
  });
}
