// buildApp(): the HTTP side of the service: the core plumbing, then every feature's routes (the
// FEATURES list, src/features.ts). Tests call it and use inject() or listen() themselves.
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import formbody from '@fastify/formbody';
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import type { AppContext } from './context.js';
import type { Feature } from './feature.js';
import { registerAuth } from './core/http/auth.js';
import { registerErrorHandler } from './core/http/error-handler.js';
import { registerIdempotency } from './core/http/idempotency.js';
import { registerInputGuards } from './core/http/input-guard.js';
import { registerListLinks } from './core/http/list-links.js';
import { registerOpenApi } from './core/http/openapi.js';
import { createAuthService } from './auth/auth-service.js';
import { composeFeatures, FEATURES } from './features.js';

export async function buildApp(ctx: AppContext, features: readonly Feature[] = FEATURES): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: ctx.log as FastifyBaseLogger,
    trustProxy: ctx.config.TRUST_PROXY,
  });
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  registerErrorHandler(app);
  registerInputGuards(app);
  registerListLinks(app, ctx.config.BASE_URL);
  // Actions are often POSTed with `Content-Type: application/json` and no body (curl -H, Postman):
  // an empty JSON body means "no body". Anything else goes to Fastify's own (poisoning-safe) parser.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, body, done) =>
    body === '' ? done(null, undefined) : parseJson(req, body as string, done),
  );
  await registerOpenApi(app, ctx.config.BASE_URL);
  await app.register(formbody);
  registerAuth(app, createAuthService(ctx).authenticate);
  registerIdempotency(app, ctx.redis, ctx.secretBox, ctx.config.QUEUE_PREFIX);

  const registry = composeFeatures(ctx, features);
  for (const feature of features) await feature.routes?.(app, ctx, registry);

  await app.ready();
  return app;
}
