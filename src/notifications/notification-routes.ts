// Notification servers (operators write, everyone reads) and their operations.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { action, operationId, registerActions } from '../core/http/actions.js';
import { registerCrud } from '../core/http/crud.js';
import { idParams, int32, patchOf, refId, timestamp } from '../core/http/schemas.js';
import { headerSecret } from '../core/outbound-fields.js';
import { NotificationAuthMethod, NotificationProvider } from '../generated/prisma/enums.js';
import { createNotificationService } from './notification-service.js';
import { notificationServerModel } from './notification-models.js';

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
const headerValue = headerSecret(z.string().max(20_000)).nullable();
const fields = {
  name: z.string().max(200).nullable(),
  company_id: refId,
  provider: z.enum(NotificationProvider),
  url: z.string().max(2000).nullable().describe('Required for selfhosted_push; http:// or https://, no query, fragment or credentials'),
  is_default: z.boolean().describe('One default per company'),
  auto_generate_tokens: z.boolean(),
  token_expiry_days: int32.describe('1 to 3650'),
  auth_enabled: z.boolean(),
  auth_method: z.enum(NotificationAuthMethod).nullable(),
  username: z.string().max(200).nullable().describe('Basic auth, sent as UTF-8; no ":"'),
  password: secret.describe('Write-only'),
  auth_token: headerValue.describe('Write-only; sent as a Bearer token (printable ASCII)'),
  fcm_project_id: z.string().max(200).nullable(),
  fcm_server_key: headerValue.describe('Write-only; legacy API, used only without a service account (printable ASCII)'),
  fcm_service_account_json: z
    .union([secret, z.record(z.string(), z.unknown()).transform((o) => JSON.stringify(o))])
    .describe('Write-only; the service-account JSON, as a string or an object'),
};
const notificationServerCreate = z
  .object(fields)
  .partial()
  .required({ provider: true })
  .strict()
  .meta({
    example: {
      name: 'ntfy',
      provider: 'selfhosted_push',
      url: 'https://ntfy.example.com',
      auth_enabled: true,
      auth_method: 'token',
      auth_token: 'tk_publish_token',
    },
  });
const notificationServerUpdate = patchOf(z.object(fields), { is_default: true });

const sendInput = z
  .object({
    title: z.string().min(1).max(500),
    message: z.string().min(1).max(4000),
    topic: z
      .string()
      .regex(/^[A-Za-z0-9_-]{1,64}$/, 'letters, digits, _ and - (at most 64)')
      .optional()
      .describe('Default "svc"'),
    priority: z.number().int().min(1).max(5).optional().describe('1 (min) to 5 (max), default 3; FCM: 4 and 5 are high'),
    token: z.string().min(1).max(4096).optional().describe('Cloud push only: a device registration token (else the topic)'),
  })
  .strict()
  .meta({ example: { title: 'Backup done', message: 'acme_prod was backed up', topic: 'ops', priority: 3 } });

const userToken = z.object({ user_id: z.number(), token_set: z.boolean(), expires_at: timestamp, created_at: timestamp });

export function registerNotificationRoutes(parent: FastifyInstance, ctx: AppContext) {
  const service = createNotificationService(ctx);
  const tags = ['notification-servers'];
  registerCrud(parent, {
    path: '/notification-servers',
    model: notificationServerModel,
    tag: 'notification-servers',
    service,
    output: notificationServer,
    create: notificationServerCreate,
    update: notificationServerUpdate,
    read: 'user',
    write: 'operator',
  });

  registerActions(parent, {
    path: '/notification-servers',
    tag: tags[0]!,
    group: 'operator',
    actions: {
      test_connection: action({
        summary: 'Test a notification server connection',
        description:
          'Self-hosted: GET {url}/v1/health. Cloud: an OAuth2 token from the service account and a validate_only message (or a legacy dry_run). Failures: 400 user_error carrying the remote error.',
        response: z.object({ ok: z.literal(true), provider: z.enum(NotificationProvider), api: z.enum(['ntfy', 'v1', 'legacy']) }),
        run: ({ id, user }) => service.testConnection(id, user.id),
      }),
      test_admin_credentials: action({
        summary: 'Test the admin credentials of a notification server',
        description: 'Self-hosted only: GET {url}/v1/account with the admin username and password (Basic auth).',
        response: z.object({ ok: z.literal(true), username: z.string(), role: z.string().nullable() }),
        run: ({ id, user }) => service.testAdminCredentials(id, user.id),
      }),
      send_notification: action({
        summary: 'Send a notification',
        description: 'Self-hosted: publishes to topic (default "svc"). Cloud: FCM HTTP v1 (or legacy) to token, else to topic.',
        body: sendInput,
        response: z.object({ provider: z.enum(NotificationProvider), api: z.enum(['ntfy', 'v1', 'legacy']), id: z.string() }),
        run: ({ id, body, user }) => service.sendNotification(id, body, user.id),
      }),
      generate_user_tokens: action({
        summary: 'Generate per-user tokens',
        description:
          'Self-hosted with auto_generate_tokens: creates (or renews when within a day of expiry) a token for every active user, valid token_expiry_days. Runs as a job; also queued whenever such a server is saved.',
        response: 'job',
        run: ({ id, user }) => service.requestUserTokens(id, user.id),
      }),
    },
  });

  parent.withTypeProvider<ZodTypeProvider>().get('/api/v1/notification-servers/:id/user-tokens', {
    config: { group: 'user' },
    schema: {
      tags,
      operationId: operationId('/notification-servers', 'listUserTokens'),
      summary: 'List the per-user tokens of a notification server',
      description: 'Per-user tokens (write-only: only whether each is set).',
      params: idParams,
      response: { 200: z.object({ items: z.array(userToken) }) },
    },
    handler: (req) => service.listUserTokens(req.params.id),
  });
}
