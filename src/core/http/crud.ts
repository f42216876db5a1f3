// Registers the five REST routes of a resource (DESIGN §4): list, get, create (201), patch, delete.
// Schemas are the contract: `output` is the response whitelist, `create`/`update` validate bodies.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { UserGroup } from '../../auth/groups.js';
import type { Author } from '../../chatter/chatter-service.js';
import { idParams, listOf, listQuery } from './schemas.js';

type Data = Record<string, unknown>;

export interface CrudService {
  list(query: { limit: number; offset: number } & Data): Promise<{ items: Data[]; total: number; limit: number; offset: number }>;
  get(id: number): Promise<Data>;
  create(data: Data, author: Author | null): Promise<Data>;
  update(id: number, data: Data, author: Author | null): Promise<Data>;
  remove(id: number): Promise<void>;
}

export interface CrudOptions {
  /** e.g. '/root-servers' (under /api/v1) */
  path: string;
  tag: string;
  service: CrudService;
  output: z.ZodType;
  create?: z.ZodType;
  update?: z.ZodType;
  /** Extra equality filters for the list, e.g. z.object({ state: z.enum([...]).optional() }). */
  filters?: z.ZodObject;
  read: UserGroup;
  write?: UserGroup;
}

export function authorOf(user: { id: number; email: string } | null): Author | null {
  return user ? { id: user.id, name: user.email } : null;
}

export function registerCrud(parent: FastifyInstance, o: CrudOptions) {
  const app = parent.withTypeProvider<ZodTypeProvider>();
  const tags = [o.tag];
  const query = o.filters ? listQuery.extend(o.filters.shape) : listQuery;

  app.get(`/api/v1${o.path}`, {
    config: { group: o.read },
    schema: { tags, querystring: query, response: { 200: listOf(o.output) } },
    handler: (req) => o.service.list(req.query as { limit: number; offset: number }),
  });

  app.get(`/api/v1${o.path}/:id`, {
    config: { group: o.read },
    schema: { tags, params: idParams, response: { 200: o.output } },
    handler: (req) => o.service.get(req.params.id),
  });

  if (!o.write) return;
  const write = o.write;

  if (o.create) {
    app.post(`/api/v1${o.path}`, {
      config: { group: write },
      schema: { tags, body: o.create, response: { 201: o.output } },
      handler: async (req, reply) => reply.status(201).send(await o.service.create(req.body as Data, authorOf(req.user))),
    });
  }

  if (o.update) {
    app.patch(`/api/v1${o.path}/:id`, {
      config: { group: write },
      schema: { tags, params: idParams, body: o.update, response: { 200: o.output } },
      handler: (req) => o.service.update(req.params.id, req.body as Data, authorOf(req.user)),
    });
  }

  app.delete(`/api/v1${o.path}/:id`, {
    config: { group: write },
    schema: { tags, params: idParams, response: { 204: z.null() } },
    handler: async (req, reply) => {
      await o.service.remove(req.params.id);
      return reply.status(204).send(null);
    },
  });
}
