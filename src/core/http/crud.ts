// Registers the five REST routes of a resource: list, get, create (201), patch, delete.
// Schemas are the contract: `output` is the response whitelist, `create`/`update` validate bodies.
// One-record answers carry an ETag; PATCH and DELETE honour If-Match (src/core/http/etag.ts): the
// service checks it for the row its write locks (conditionalWrite() in src/core/records.ts).
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { UserGroup } from '../groups.js';
import type { Author } from '../chatter.js';
import type { ListAnswer } from '../lists.js';
import type { Precondition } from '../conditional-write.js';
import type { ListParams } from '../records.js';
import { operationId } from './actions.js';
import { authorOf } from './auth.js';
import { ifMatchHeaders, ifMatchOf, withEtag } from './etag.js';
import { singularOf, type ModelInfo } from '../models.js';
import { idParams, listOf, listQueryOf } from './schemas.js';

type Data = Record<string, unknown>;

export interface CrudService {
  list(query: ListParams & Data): Promise<ListAnswer<Data>>;
  get(id: number): Promise<Data>;
  create(data: Data, author: Author | null): Promise<Data>;
  /** `precondition` (If-Match) must hold for the row the update locks: pass it to conditionalWrite(). */
  update(id: number, data: Data, author: Author | null, precondition: Precondition | undefined): Promise<Data>;
  /** `precondition` (If-Match) must hold for the row the delete locks: pass it to conditionalWrite(). */
  remove(id: number, precondition: Precondition | undefined): Promise<void>;
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
  /** The model listed: its naming fields make `?q=` and `?sort=` (src/core/models.ts). */
  model?: ModelInfo;
  /** How the summaries name one record and several; default from the path ("root server", "root servers"). */
  noun?: { one: string; many: string };
}

/** "/git-repositories" → { one: "git repository", many: "git repositories" }. */
function nounOf(path: string): { one: string; many: string } {
  const many = path.replace(/^\//, '').replace(/-/g, ' ');
  return { many, one: singularOf(many) };
}

export function registerCrud(parent: FastifyInstance, o: CrudOptions) {
  const app = parent.withTypeProvider<ZodTypeProvider>();
  const tags = [o.tag];
  const query = listQueryOf(o.model, o.filters);
  const noun = o.noun ?? nounOf(o.path);
  const doc = (name: string, summary: string) => ({ tags, operationId: operationId(o.path, name), summary });

  app.get(`/api/v1${o.path}`, {
    config: { group: o.read },
    schema: {
      ...doc('list', `List ${noun.many}`),
      querystring: query,
      response: { 200: listOf(o.output).describe(`A page of ${noun.many}`) },
    },
    handler: (req) => o.service.list(req.query as ListParams & Data),
  });

  app.get(`/api/v1${o.path}/:id`, {
    config: { group: o.read, etag: true },
    schema: { ...doc('get', `Get a ${noun.one}`), params: idParams, response: { 200: o.output.describe(`The ${noun.one}`) } },
    handler: async (req, reply) => withEtag(reply, o.output, await o.service.get(req.params.id)),
  });

  if (!o.write) return;
  const write = o.write;
  const current = (id: number) => () => o.service.get(id);

  if (o.create) {
    app.post(`/api/v1${o.path}`, {
      config: { group: write, etag: true },
      schema: { ...doc('create', `Create a ${noun.one}`), body: o.create, response: { 201: o.output.describe(`The new ${noun.one}`) } },
      handler: async (req, reply) =>
        reply.status(201).send(withEtag(reply, o.output, await o.service.create(req.body as Data, authorOf(req.user)))),
    });
  }

  if (o.update) {
    app.patch(`/api/v1${o.path}/:id`, {
      config: { group: write, etag: true },
      schema: {
        ...doc('update', `Update a ${noun.one}`),
        params: idParams,
        headers: ifMatchHeaders,
        body: o.update,
        response: { 200: o.output.describe(`The ${noun.one} as changed`) },
      },
      handler: async (req, reply) => {
        const precondition = ifMatchOf(req, o.output, current(req.params.id));
        return withEtag(reply, o.output, await o.service.update(req.params.id, req.body as Data, authorOf(req.user), precondition));
      },
    });
  }

  app.delete(`/api/v1${o.path}/:id`, {
    config: { group: write },
    schema: {
      ...doc('delete', `Delete a ${noun.one}`),
      params: idParams,
      headers: ifMatchHeaders,
      response: { 204: z.null().describe('Deleted') },
    },
    handler: async (req, reply) => {
      await o.service.remove(req.params.id, ifMatchOf(req, o.output, current(req.params.id)));
      return reply.status(204).send(null);
    },
  });
}
