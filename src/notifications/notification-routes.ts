// Notification servers (operators write, everyone reads) and their operations.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { registerCrud } from '../core/http/crud.js';
import { idParams, jobAccepted, timestamp } from '../core/http/schemas.js';
import { NotificationAuthMethod, NotificationProvider } from '../generated/prisma/enums.js';
import { createNotificationService } from './notification-service.js';

const notificationServer = z.object({
  id: z.number(),
  name: z.string().nullable(),
  company_id: z.number(),
  provider: z.enum(NotificationProvider),
  url: z.string().nullable(),
  is_default: z.boolean(),
  auto_generate_tokens: z.boolean(),
  token_expiry_days: z.number(),
  auth_enabled: z.boolean(),
  auth_method: z.enum(NotificationAuthMethod).nullable(),
  username: z.string().nullable(),
  password_set: z.boolean(),
  auth_token_set: z.boolean(),
  fcm_project_id: z.string().nullable(),
  fcm_server_key_set: z.boolean(),
  fcm_service_account_json_set: z.boolean(),
  created_at: timestamp,
  updated_at: timestamp,
});

const secret = z.string().max(20_000).nullable();
const fields = {
  name: z.string().max(200).nullable(),
  company_id: z.number().int().positive(),
  provider: z.enum(NotificationProvider),
  url: z.string().max(2000).nullable().describe('Required for selfhosted_push; http:// or https://'),
  is_default: z.boolean().describe('One default per company'),
  auto_generate_tokens: z.boolean(),
  token_expiry_days: z.number().int().describe('1 to 3650'),
  auth_enabled: z.boolean(),
  auth_method: z.enum(NotificationAuthMethod).nullable(),
  username: z.string().max(200).nullable(),
  password: secret.describe('Write-only'),
  auth_token: secret.describe('Write-only'),
  fcm_project_id: z.string().max(200).nullable(),
  fcm_server_key: secret.describe('Write-only; legacy API, used only without a service account'),
  fcm_service_account_json: z
    .union([secret, z.record(z.string(), z.unknown()).transform((o) => JSON.stringify(o))])
    .describe('Write-only; the service-account JSON, as a string or an object'),
};
const notificationServerCreate = z.object(fields).partial().required({ provider: true }).strict();
const notificationServerUpdate = z.object(fields).partial().strict();

const sendInput = z
  .object({
    title: z.string().min(1).max(500),
    message: z.string().min(1).max(4000),
    topic: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'letters, digits, _ and - (at most 64)').optional().describe('Default "svc"'),
    priority: z.number().int().min(1).max(5).optional().describe('1 (min) to 5 (max), default 3; FCM: 4 and 5 are high'),
    token: z.string().min(1).max(4096).optional().describe('Cloud push only: a device registration token (else the topic)'),
  })
  .strict();

const userToken = z.object({ user_id: z.number(), token_set: z.boolean(), expires_at: timestamp, created_at: timestamp });

export function registerNotificationRoutes(parent: FastifyInstance, ctx: AppContext) {
  const service = createNotificationService(ctx);
  const tags = ['notification-servers'];
  registerCrud(parent, {
    path: '/notification-servers',
    tag: 'notification-servers',
    service,
    output: notificationServer,
    create: notificationServerCreate,
    update: notificationServerUpdate,
    read: 'user',
    write: 'operator',
  });

  const app = parent.withTypeProvider<ZodTypeProvider>();
  const base = '/api/v1/notification-servers/:id';

  app.post(`${base}/actions/test_connection`, {
    config: { group: 'operator' },
    schema: {
      tags,
      description:
        'Self-hosted: GET {url}/v1/health. Cloud: an OAuth2 token from the service account and a validate_only message (or a legacy dry_run). Failures: 400 user_error carrying the remote error.',
      params: idParams,
      response: { 200: z.object({ ok: z.literal(true), provider: z.enum(NotificationProvider), api: z.enum(['ntfy', 'v1', 'legacy']) }) },
    },
    handler: (req) => service.testConnection(req.params.id, req.user!.id),
  });

  app.post(`${base}/actions/test_admin_credentials`, {
    config: { group: 'operator' },
    schema: {
      tags,
      description: 'Self-hosted only: GET {url}/v1/account with the admin username and password (Basic auth).',
      params: idParams,
      response: { 200: z.object({ ok: z.literal(true), username: z.string(), role: z.string().nullable() }) },
    },
    handler: (req) => service.testAdminCredentials(req.params.id, req.user!.id),
  });

  app.post(`${base}/actions/send_notification`, {
    config: { group: 'operator' },
    schema: {
      tags,
      description: 'Self-hosted: publishes to topic (default "svc"). Cloud: FCM HTTP v1 (or legacy) to token, else to topic.',
      params: idParams,
      body: sendInput,
      response: { 200: z.object({ provider: z.enum(NotificationProvider), api: z.enum(['ntfy', 'v1', 'legacy']), id: z.string() }) },
    },
    handler: (req) => service.sendNotification(req.params.id, req.body, req.user!.id),
  });

  app.post(`${base}/actions/generate_user_tokens`, {
    config: { group: 'operator' },
    schema: {
      tags,
      description:
        'Self-hosted with auto_generate_tokens: creates (or renews when within a day of expiry) a token for every active user, valid token_expiry_days. Runs as a job; also queued whenever such a server is saved.',
      params: idParams,
      response: { 202: jobAccepted },
    },
    handler: async (req, reply) => reply.status(202).send({ job_id: await service.requestUserTokens(req.params.id, req.user!.id) }),
  });

  app.get(`${base}/user-tokens`, {
    config: { group: 'user' },
    schema: { tags, description: 'Per-user tokens (write-only: only whether each is set).', params: idParams, response: { 200: z.object({ items: z.array(userToken) }) } },
    handler: async (req) => {
      await service.get(req.params.id);
      const rows = await service.listUserTokens(req.params.id);
      return {
        items: rows.map((t) => ({ user_id: t.user_id, token_set: t.token !== '', expires_at: t.expires_at.toISOString(), created_at: t.created_at.toISOString() })),
      };
    },
  });
}
