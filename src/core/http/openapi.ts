// OpenAPI 3 document generated from the routes' zod schemas (GET /api/v1/openapi.json and
// /api/v1/openapi.yaml, importable into Postman) and the docs UI at /docs. Must be registered before
// the routes it describes. It is written for generators and linters (`npm run lint` runs Spectral
// and Redocly on it): every operation says what it does and the group it needs, documents its
// client errors and describes its success answer; tags are declared; requests are
// bearer-authenticated unless public; a request body carries an example. Routes without zod
// bodies (the public pages, the webhook endpoint) describe themselves with `config.openapi`.
import type { FastifyInstance } from 'fastify';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { jsonSchemaTransform } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { UserGroup } from '../groups.js';
import { errorBody } from './schemas.js';

/** OpenAPI for a route that validates its input itself (forms, raw bodies). */
export interface RouteDocs {
  /** The path parameters, with an example each. */
  params?: z.ZodObject;
  /** The request body's shape and content type (default application/json). */
  body?: z.ZodType;
  consumes?: string;
  /**
   * Status → what that answer means, and the shape of its body when it has one (otherwise it is
   * `produces` text, e.g. an HTML page).
   */
  responses: Record<number, string | { description: string; body: z.ZodType }>;
  produces?: string;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    openapi?: RouteDocs;
  }
}

/** The client errors of the API, each a reusable response in components.responses. */
const CLIENT_ERRORS = {
  400: {
    name: 'BadRequest',
    description:
      'validation_error: a parameter or field is wrong, or unknown (details.fields = [{field, message}] names each); ' +
      "user_error: the operation cannot be done in the record's present state (the message says why).",
  },
  401: {
    name: 'Unauthenticated',
    description: 'unauthenticated: the bearer token is missing, unknown or expired, or its user is inactive.',
  },
  403: {
    name: 'Forbidden',
    description: 'forbidden: your group may not do this (the description of the operation names the group it needs).',
  },
  404: { name: 'NotFound', description: 'not_found: no record has this id.' },
  409: {
    name: 'Conflict',
    description:
      'conflict: a record with these values already exists (details.fields names them, details.existing_id the record), ' +
      'the record is still used by others, its state forbids this, or the Idempotency-Key was used with another body.',
  },
  412: {
    name: 'PreconditionFailed',
    description: "precondition_failed: If-Match does not name the record's present ETag: it changed since you read it. GET it again.",
  },
  413: { name: 'PayloadTooLarge', description: 'validation_error: the body is larger than 1 MiB.' },
  415: {
    name: 'UnsupportedMediaType',
    description: 'validation_error: the body is not JSON; send it with Content-Type: application/json.',
  },
} as const;

const SERVER_ERROR = {
  description:
    'internal_error: the service failed (details are in its log, never in the answer). ' +
    'unavailable (503, with Retry-After): PostgreSQL or Redis cannot be reached for a moment (a failover); nothing was done, send the request again.',
  content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
};

/** The client errors an API operation can answer, from what it takes. */
function clientErrorsOf(path: string, method: string, op: Operation, group: UserGroup | undefined): (keyof typeof CLIENT_ERRORS)[] {
  const statuses: (keyof typeof CLIENT_ERRORS)[] = [400, 401];
  if (group && group !== 'user') statuses.push(403);
  if (path.includes('{')) statuses.push(404);
  if (['post', 'patch', 'delete'].includes(method)) statuses.push(409);
  if (op.parameters?.some((p) => p.in === 'header' && p.name.toLowerCase() === 'if-match')) statuses.push(412);
  if (op.requestBody) statuses.push(413, 415);
  return statuses;
}

const ETAG_HEADER = {
  description: 'This version of the record: send it as If-Match with PATCH or DELETE to refuse the change if the record changed since.',
  schema: { type: 'string' },
};
const LINK_HEADER = {
  description: 'While more pages follow: <the next page\'s URL>; rel="next" (the same filters, sort and limit).',
  schema: { type: 'string' },
};

/** A list answer's schema: {items, total, limit, offset, …}. */
function isListSchema(schema: { properties?: Record<string, unknown> } | undefined): boolean {
  return ['items', 'total', 'limit', 'offset'].every((key) => schema?.properties?.[key] !== undefined);
}

/** What a success answer means when its route did not say. */
function successDescription(status: string, summary = ''): string {
  if (status === '201') return 'Created: the new record.';
  if (status === '202') return 'Accepted: the work is queued as a job, {"job_id"}; GET /api/v1/jobs/{id} gives its state and result.';
  if (status === '204') return 'Done: no content.';
  const [verb, ...rest] = summary.split(' ');
  const what = rest.join(' ').replace(/^(a|an|the) /, '');
  if (verb === 'List') return `A page of ${rest.join(' ')}.`;
  if (verb === 'Get') return `The ${what}.`;
  if (verb === 'Update') return `The ${what} as changed.`;
  return `Done: ${summary.charAt(0).toLowerCase()}${summary.slice(1)}.`;
}

/** A zod schema as an OpenAPI 3.0 schema object (JSON Schema without its $schema line). */
function openApiSchema(schema: z.ZodType, io: 'input' | 'output' = 'input'): Record<string, unknown> {
  const { $schema: _, ...rest } = z.toJSONSchema(schema, { target: 'openapi-3.0', io });
  return rest;
}

const GROUP_SENTENCE = {
  public: 'Public: no token.',
  user: 'Needs a token of the user group or above.',
  operator: 'Needs a token of the operator group or above.',
  administrator: 'Needs a token of the administrator group.',
} as const;

interface Operation {
  operationId?: string;
  summary?: string;
  tags?: string[];
  parameters?: { in: string; name: string }[];
  requestBody?: { required?: boolean };
  responses?: Record<
    string,
    {
      description?: string;
      $ref?: string;
      headers?: Record<string, unknown>;
      content?: Record<string, { schema?: { properties?: Record<string, unknown>; $ref?: string } }>;
    }
  >;
}

export async function registerOpenApi(app: FastifyInstance, baseUrl: string) {
  // What the per-route transform learns and the document-wide pass needs, by operationId: bodies
  // that may be left out (Fastify's swagger marks every body required) and each route's group.
  const optionalBodies = new Set<string>();
  const groups = new Map<string, UserGroup>();
  const withEtag = new Set<string>();

  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'svc API',
        version: '1.0.0',
        description:
          'Trial signup, inbound webhooks and infrastructure administration. Authenticate with `Authorization: Bearer <token>` ' +
          '(a token comes from `npm run cli -- create-token --email you@example.com`; in Postman, give the collection variable ' +
          'bearerToken your token). Lists take limit, offset, sort and q, and send `Link: <…>; rel="next"` while more pages follow; ' +
          'a single record comes with an ETag, which If-Match on PATCH and DELETE checks; long operations answer 202 {"job_id"} ' +
          '(GET /api/v1/jobs/{id}); a POST may carry an Idempotency-Key header. Errors: {"error": {"code", "message", "details"}}.',
      },
      servers: [{ url: baseUrl, description: 'This installation (its BASE_URL)' }],
      security: [{ bearer: [] }],
      components: {
        securitySchemes: {
          bearer: { type: 'http', scheme: 'bearer', description: 'An API token: npm run cli -- create-token, or POST /api/v1/api-tokens' },
        },
        schemas: { Error: openApiSchema(errorBody, 'output') as never },
      },
    },
    transform: (input) => {
      const out = jsonSchemaTransform(input);
      const config = input.route.config ?? {};
      if (input.url.startsWith('/api/v1/openapi.') || input.url.startsWith('/docs'))
        return { ...out, schema: { ...out.schema, hide: true } };
      const group = config.group ?? 'public';
      const schema: Record<string, unknown> = {
        ...out.schema,
        description: [out.schema.description ?? out.schema.summary, GROUP_SENTENCE[group]].filter(Boolean).join(' '),
      };
      if (group === 'public') schema.security = [];
      else groups.set(String(out.schema.operationId), group);
      if (config.etag) withEtag.add(String(out.schema.operationId));
      const body = input.schema?.body as z.ZodType | undefined;
      if (body instanceof z.ZodType && body.safeParse(undefined).success) optionalBodies.add(String(out.schema.operationId));
      const docs = config.openapi;
      if (docs) {
        if (docs.params) schema.params = openApiSchema(docs.params);
        if (docs.body) schema.body = openApiSchema(docs.body);
        if (docs.consumes) schema.consumes = [docs.consumes];
        if (docs.produces) schema.produces = [docs.produces];
        schema.response = Object.fromEntries(
          Object.entries(docs.responses).map(([status, answer]) => [
            status,
            typeof answer === 'string'
              ? { description: answer, type: 'string' }
              : { ...openApiSchema(answer.body, 'output'), description: answer.description },
          ]),
        );
      }
      return { ...out, schema };
    },
    transformObject: (documentObject) => {
      const doc = ('openapiObject' in documentObject ? documentObject.openapiObject : documentObject.swaggerObject) as {
        paths?: Record<string, Record<string, Operation>>;
        components: { responses?: Record<string, unknown> };
        tags?: { name: string; description: string }[];
      };
      doc.components.responses = Object.fromEntries(
        Object.values(CLIENT_ERRORS).map(({ name, description }) => [
          name,
          { description, content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } },
        ]),
      );
      const tags = new Set<string>();
      for (const [path, item] of Object.entries(doc.paths ?? {})) {
        for (const [method, op] of Object.entries(item)) {
          for (const tag of op.tags ?? []) tags.add(tag);
          op.responses ??= {};
          const responses = op.responses;
          for (const [status, answer] of Object.entries(responses)) {
            if (answer.description === 'Default Response') answer.description = successDescription(status, op.summary);
            // No content is no body: a 204 documents none (a null schema made Fastify's swagger write one).
            if (status === '204') delete answer.content;
            if (!status.startsWith('2')) continue;
            if (withEtag.has(String(op.operationId))) answer.headers = { ETag: ETAG_HEADER };
            if (isListSchema(answer.content?.['application/json']?.schema)) answer.headers = { Link: LINK_HEADER };
          }
          if (op.requestBody && optionalBodies.has(String(op.operationId))) op.requestBody.required = false;
          if (!path.startsWith('/api/v1')) continue;
          for (const status of clientErrorsOf(path, method, op, groups.get(String(op.operationId)))) {
            responses[status] ??= { $ref: `#/components/responses/${CLIENT_ERRORS[status].name}` };
          }
          responses.default ??= SERVER_ERROR;
        }
      }
      doc.tags = [...tags].sort().map((name) => ({ name, description: `Operations on ${name}.` }));
      return doc;
    },
  });
  await app.register(swaggerUi, { routePrefix: '/docs' });

  app.get('/api/v1/openapi.json', { config: { group: 'public' }, schema: { hide: true } }, () => app.swagger());
  app.get('/api/v1/openapi.yaml', { config: { group: 'public' }, schema: { hide: true } }, (_req, reply) =>
    reply.type('application/yaml; charset=utf-8').send(app.swagger({ yaml: true })),
  );
}
