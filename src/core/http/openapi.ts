// OpenAPI 3 document generated from the routes' zod schemas (GET /api/v1/openapi.json, importable
// into Postman) and the docs UI at /docs. Must be registered before the routes it describes.
import type { FastifyInstance } from 'fastify';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { jsonSchemaTransform } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { errorBody } from './schemas.js';

const errorResponse = { description: 'Error (DESIGN §4 shape)', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } };

/** A zod schema as an OpenAPI 3.0 schema object (JSON Schema without its $schema line). */
function openApiSchema(schema: z.ZodType): Record<string, never> {
  const { $schema: _, ...rest } = z.toJSONSchema(schema, { target: 'openapi-3.0' });
  return rest as unknown as Record<string, never>;
}

export async function registerOpenApi(app: FastifyInstance, baseUrl: string) {
  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'svc API',
        version: '1.0.0',
        description: 'Trial signup, inbound webhooks and infrastructure administration. Errors: {"error": {"code", "message", "details"}}.',
      },
      servers: [{ url: baseUrl }],
      components: {
        securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
        schemas: { Error: openApiSchema(errorBody) },
      },
    },
    // Only the REST API is documented; pages, webhooks and health are not part of it.
    transform: (input) => {
      const out = jsonSchemaTransform(input);
      const group = input.route.config?.group;
      if (!input.url.startsWith('/api/v1')) return { ...out, schema: { ...out.schema, hide: true } };
      if (group === 'public') return out;
      return {
        ...out,
        schema: {
          ...out.schema,
          security: [{ bearer: [] }],
          description: [out.schema.description, `Requires the ${group} group.`].filter(Boolean).join(' '),
        },
      };
    },
    transformObject: (documentObject) => {
      const doc = 'openapiObject' in documentObject ? documentObject.openapiObject : documentObject.swaggerObject;
      // Every operation may fail with the one error shape of DESIGN §4.
      for (const path of Object.values(doc.paths ?? {})) {
        for (const op of Object.values(path as Record<string, { responses?: Record<string, unknown> }>)) {
          if (op && typeof op === 'object' && op.responses) op.responses.default ??= errorResponse;
        }
      }
      return doc;
    },
  });
  await app.register(swaggerUi, { routePrefix: '/docs' });

  app.get('/api/v1/openapi.json', { config: { group: 'public' }, schema: { hide: true } }, () => app.swagger());
}
