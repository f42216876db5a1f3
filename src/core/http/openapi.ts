// OpenAPI 3 document generated from the routes' zod schemas (GET /api/v1/openapi.json, importable
// into Postman) and the docs UI at /docs. Must be registered before the routes it describes.
// Every operation says what it does and the group it needs; requests are bearer-authenticated
// unless public; a request body carries an example. Routes without zod bodies (the public pages,
// the webhook endpoint) describe themselves with `config.openapi`.
import type { FastifyInstance } from 'fastify';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { jsonSchemaTransform } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { errorBody } from './schemas.js';

/** OpenAPI for a route that validates its input itself (forms, raw bodies). */
export interface RouteDocs {
  /** The request body's shape and content type (default application/json). */
  body?: z.ZodType;
  consumes?: string;
  /** Status → what that answer means; `produces` is the answers' content type. */
  responses: Record<number, string>;
  produces?: string;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    openapi?: RouteDocs;
  }
}

const ERROR_DESCRIPTION =
  'An error: {"error": {"code", "message", "details"}}. code is validation_error or user_error (400), unauthenticated (401), ' +
  'forbidden (403), not_found (404), conflict (409), rate_limited (429, with Retry-After) or internal_error (500). ' +
  'A validation_error lists the fields in details.fields = [{field, message}]; a conflict names the fields and, when known, ' +
  'details.existing_id.';

const errorResponse = {
  description: ERROR_DESCRIPTION,
  content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
};

/** A zod schema as an OpenAPI 3.0 schema object (JSON Schema without its $schema line). */
function openApiSchema(schema: z.ZodType): Record<string, unknown> {
  const { $schema: _, ...rest } = z.toJSONSchema(schema, { target: 'openapi-3.0', io: 'input' });
  return rest;
}

const GROUP_SENTENCE = {
  public: 'Public: no token.',
  user: 'Needs a token of the user group or above.',
  operator: 'Needs a token of the operator group or above.',
  administrator: 'Needs a token of the administrator group.',
} as const;

export async function registerOpenApi(app: FastifyInstance, baseUrl: string) {
  // Operations whose body may be left out (Fastify's swagger marks every body required).
  const optionalBodies = new Set<string>();

  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'svc API',
        version: '1.0.0',
        description:
          'Trial signup, inbound webhooks and infrastructure administration. Authenticate with `Authorization: Bearer <token>` ' +
          '(a token comes from `npm run cli -- create-token --email you@example.com`; in Postman, set the collection variable ' +
          'bearerToken). Lists take limit, offset, sort and q; long operations answer 202 {"job_id"} (GET /api/v1/jobs/{id}); ' +
          'a POST may carry an Idempotency-Key header. Errors: {"error": {"code", "message", "details"}}.',
      },
      // Postman makes collection variables of the first server's variables: bearerToken too.
      servers: [{ url: baseUrl, variables: { bearerToken: { default: '', description: 'An API token of yours' } } }],
      security: [{ bearer: [] }],
      components: {
        securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
        schemas: { Error: openApiSchema(errorBody) as never },
      },
    },
    transform: (input) => {
      const out = jsonSchemaTransform(input);
      const config = input.route.config ?? {};
      if (input.url === '/api/v1/openapi.json' || input.url.startsWith('/docs')) return { ...out, schema: { ...out.schema, hide: true } };
      const group = config.group ?? 'public';
      const schema: Record<string, unknown> = {
        ...out.schema,
        description: [out.schema.description ?? out.schema.summary, GROUP_SENTENCE[group]].filter(Boolean).join(' '),
      };
      if (group === 'public') schema.security = [];
      const body = input.schema?.body as z.ZodType | undefined;
      if (body instanceof z.ZodType && body.safeParse(undefined).success) optionalBodies.add(String(out.schema.operationId));
      const docs = config.openapi;
      if (docs) {
        if (docs.body) schema.body = openApiSchema(docs.body);
        if (docs.consumes) schema.consumes = [docs.consumes];
        if (docs.produces) schema.produces = [docs.produces];
        schema.response = Object.fromEntries(
          Object.entries(docs.responses).map(([status, description]) => [status, { description, type: 'string' }]),
        );
      }
      return { ...out, schema };
    },
    transformObject: (documentObject) => {
      const doc = 'openapiObject' in documentObject ? documentObject.openapiObject : documentObject.swaggerObject;
      // Every API operation may fail with the one error shape.
      for (const [path, item] of Object.entries(doc.paths ?? {})) {
        if (!path.startsWith('/api/v1')) continue;
        for (const op of Object.values(
          item as Record<string, { operationId?: string; requestBody?: { required?: boolean }; responses?: Record<string, unknown> }>,
        )) {
          if (op && typeof op === 'object' && op.responses) op.responses.default ??= errorResponse;
          if (op?.requestBody && optionalBodies.has(String(op.operationId))) op.requestBody.required = false;
        }
      }
      return doc;
    },
  });
  await app.register(swaggerUi, { routePrefix: '/docs' });

  app.get('/api/v1/openapi.json', { config: { group: 'public' }, schema: { hide: true } }, () => app.swagger());
}
