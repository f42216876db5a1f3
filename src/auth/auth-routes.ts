// Users and API tokens (administrators).
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { registerCrud } from '../core/http/crud.js';
import { idParams, listOf, listQuery, nullableTimestamp, timestamp } from '../core/http/schemas.js';
import { createRecordService, jsonSafe, listPage } from '../core/records.js';
import { NotFoundError } from '../core/errors.js';
import { GROUPS } from './groups.js';

const user = z.object({
  id: z.number(),
  email: z.string(),
  name: z.string(),
  group: z.enum(GROUPS),
  active: z.boolean(),
  created_at: timestamp,
  updated_at: timestamp,
});
const userCreate = z.object({
  email: z.email(),
  name: z.string().max(200).optional(),
  group: z.enum(GROUPS).default('user'),
  active: z.boolean().optional(),
});
const userUpdate = userCreate.partial().strict();

const apiToken = z.object({
  id: z.number(),
  user_id: z.number(),
  name: z.string(),
  prefix: z.string(),
  last_used_at: nullableTimestamp,
  expires_at: nullableTimestamp,
  created_at: timestamp,
});
const apiTokenCreated = apiToken.extend({ token: z.string().describe('Shown once; only its hash is stored') });

export function registerAuthRoutes(parent: FastifyInstance, ctx: AppContext) {
  const users = createRecordService(ctx.db, ctx.box, { modelName: 'res.users' });
  registerCrud(parent, {
    path: '/users',
    tag: 'users',
    service: { ...users, create: (data) => ctx.auth.createUser(data as z.infer<typeof userCreate>).then(jsonSafe) },
    output: user,
    create: userCreate,
    update: userUpdate,
    read: 'administrator',
    write: 'administrator',
  });

  const app = parent.withTypeProvider<ZodTypeProvider>();
  const tags = ['api-tokens'];

  app.get('/api/v1/api-tokens', {
    config: { group: 'administrator' },
    schema: { tags, querystring: listQuery.extend({ user_id: z.coerce.number().int().optional() }), response: { 200: listOf(apiToken) } },
    handler: async (req) => {
      const { limit, offset, user_id } = req.query;
      return listPage(ctx.db.apiToken, { user_id }, { limit, offset });
    },
  });

  app.post('/api/v1/api-tokens', {
    config: { group: 'administrator' },
    schema: {
      tags,
      body: z.object({
        user_id: z.number().int().positive().describe('Defaults to the caller'),
        name: z.string().max(200).default(''),
        expires_at: z.iso.datetime().nullable().default(null),
      }).partial({ user_id: true }),
      response: { 201: apiTokenCreated },
    },
    handler: async (req, reply) => {
      const userId = req.body.user_id ?? req.user!.id;
      if (!(await ctx.db.user.findUnique({ where: { id: userId } }))) throw new NotFoundError('User');
      const expires = req.body.expires_at ? new Date(req.body.expires_at) : null;
      const created = await ctx.auth.createToken(userId, req.body.name, expires);
      return reply.status(201).send(jsonSafe(created));
    },
  });

  app.delete('/api/v1/api-tokens/:id', {
    config: { group: 'administrator' },
    schema: { tags, params: idParams, response: { 204: z.null() } },
    handler: async (req, reply) => {
      const { count } = await ctx.db.apiToken.deleteMany({ where: { id: req.params.id } });
      if (count === 0) throw new NotFoundError('API token');
      return reply.status(204).send(null);
    },
  });
}
