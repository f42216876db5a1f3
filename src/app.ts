// buildApp(): the HTTP side of the service, every route wired here; tests call it and use
// inject() or listen() themselves. No hidden autoloading: a feature's routes are listed below.
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import formbody from '@fastify/formbody';
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod';
import type { AppContext } from './context.js';
import { registerAuth } from './core/http/auth.js';
import { registerErrorHandler } from './core/http/error-handler.js';
import { registerOpenApi } from './core/http/openapi.js';
import { registerHealthRoutes } from './health/health-routes.js';
import { registerAuthRoutes } from './auth/auth-routes.js';
import { registerChatterRoutes } from './chatter/chatter-routes.js';
import { registerActionLogRoutes } from './action-log/action-log-routes.js';
import { registerJobRoutes } from './jobs/jobs-routes.js';
import { registerSettingsRoutes } from './settings/settings-routes.js';
import { registerPostgresqlRoutes } from './postgresql/postgresql-routes.js';
import { registerBackupRoutes } from './backup/backup-routes.js';
import { registerNotificationRoutes } from './notifications/notification-routes.js';
import { registerPartnerRoutes } from './partners/partner-routes.js';
import { registerDatabaseTemplateRoutes } from './database-templates/database-template-routes.js';
import { registerSubscriptionRoutes } from './subscriptions/subscription-routes.js';
import { registerTrialPackageRoutes } from './trial/trial-package-routes.js';
import { registerTrialRequestRoutes } from './trial/trial-request-routes.js';
import { registerTrialVerificationRoutes } from './trial/trial-verification-routes.js';
import { registerTrialPageRoutes } from './trial/trial-page-routes.js';
import { createWebhookMethods } from './webhooks/webhook-methods.js';
import { registerWebhooks } from './webhooks/webhook-routes.js';
import { registerRootServerRoutes } from './servers/root-server-routes.js';
import { registerMonitorRoutes } from './monitoring/monitor-routes.js';
import { registerGitRoutes } from './git/git-routes.js';

export async function buildApp(ctx: AppContext): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: ctx.log as FastifyBaseLogger,
    trustProxy: ctx.config.TRUST_PROXY,
  });
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  registerErrorHandler(app);
  // Actions are often POSTed with `Content-Type: application/json` and no body (curl -H, Postman):
  // an empty JSON body means "no body". Anything else goes to Fastify's own (poisoning-safe) parser.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, body, done) =>
    body === '' ? done(null, undefined) : parseJson(req, body as string, done),
  );
  await registerOpenApi(app, ctx.config.BASE_URL);
  await app.register(formbody);
  registerAuth(app, ctx.auth);

  registerHealthRoutes(app, ctx);
  registerAuthRoutes(app, ctx);
  registerSettingsRoutes(app, ctx);
  registerActionLogRoutes(app, ctx);
  registerJobRoutes(app, ctx);
  registerPostgresqlRoutes(app, ctx);
  registerBackupRoutes(app, ctx);
  registerNotificationRoutes(app, ctx);
  registerPartnerRoutes(app, ctx);
  registerDatabaseTemplateRoutes(app, ctx);
  registerSubscriptionRoutes(app, ctx);
  registerTrialPackageRoutes(app, ctx);
  registerTrialRequestRoutes(app, ctx);
  registerTrialVerificationRoutes(app, ctx);
  // Webhook records (administrators) and the public endpoint POST /svc/webhook/<token>; the
  // methods a webhook may call are composed once from every feature's table.
  await registerWebhooks(app, ctx, createWebhookMethods(ctx));
  // Public pages (not under /api/v1): the trial form, code entry, confirmation.
  await registerTrialPageRoutes(app, ctx);
  registerRootServerRoutes(app, ctx);
  registerMonitorRoutes(app, ctx);
  registerGitRoutes(app, ctx);
  // Chatter routes exist for every record family of src/core/models.ts.
  registerChatterRoutes(app, ctx);

  await app.ready();
  return app;
}
