// Inbound webhooks: the REST resource /api/v1/webhooks (administrators only: the token and URL
// are secrets), its call log at /api/v1/webhooks/{id}/calls and the action trigger; and the public
// endpoint POST /svc/webhook/<token> with the pool, cache and call log it shares with them.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { registerCrud } from '../core/http/crud.js';
import { idParams, listOf, listQuery, nullableTimestamp, queryBoolean, timestamp } from '../core/http/schemas.js';
import { MESSAGE_TYPES, SUBTYPES } from '../chatter/chatter-service.js';
import { createWebhookService, type WebhookService } from './webhook-service.js';
import type { WebhookMethodTable } from './webhook-methods.js';
import { createWebhookCache } from './webhook-cache.js';
import { createWebhookCallLog } from './webhook-call-log.js';
import { createWebhookCallService, createWebhookPool } from './webhook-call-service.js';
import { registerWebhookEndpoint } from './webhook-endpoint-routes.js';

const webhook = z.object({
  id: z.number(),
  token: z.string().describe('64 hex characters; never changes (rotate by deleting and creating)'),
  url: z.string().describe('The full endpoint: POST it to fire the webhook'),
  model_name: z.string(),
  rec_id: z.number(),
  trigger_action: z.string().nullable(),
  message_type: z.enum(MESSAGE_TYPES),
  subtype_xmlid: z.enum(SUBTYPES),
  active: z.boolean(),
  signing_secret_set: z.boolean(),
  last_called_at: nullableTimestamp,
  call_count: z.number(),
  created_at: timestamp,
  updated_at: timestamp,
});

const webhookCreate = z
  .object({
    model_name: z.string().min(1).max(100).describe('e.g. svc.subscription'),
    rec_id: z.number().int().positive(),
    trigger_action: z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]{0,99}$/, 'a method name without parentheses')
      .nullable()
      .optional()
      .describe('A method the model lets webhooks call (see the 400 details for the list)'),
    message_type: z.enum(MESSAGE_TYPES).optional(),
    subtype_xmlid: z.enum(SUBTYPES).optional(),
    active: z.boolean().optional(),
    signing_secret: z
      .string()
      .min(1, 'an empty signing secret is refused; send null to remove signing')
      .max(500)
      .nullable()
      .optional()
      .describe('Write-only. When set, calls must carry X-Hub-Signature-256: sha256=<HMAC-SHA256 of the raw body>'),
  })
  .strict();

const webhookCall = z.object({
  id: z.number(),
  webhook_id: z.number(),
  called_at: timestamp,
  status: z.number(),
  duration_ms: z.number(),
  source_ip: z.string(),
  body_size: z.number(),
  error: z.string().nullable(),
});

export async function registerWebhooks(parent: FastifyInstance, ctx: AppContext, methods: WebhookMethodTable) {
  const pool = createWebhookPool(ctx.config.DATABASE_URL);
  const cache = await createWebhookCache(pool, ctx.config.DATABASE_URL, ctx.log);
  const callLog = createWebhookCallLog(pool, ctx.log);
  parent.addHook('onClose', async () => {
    await callLog.close();
    await cache.close();
    await pool.end();
  });
  await registerWebhookEndpoint(parent, createWebhookCallService(ctx, { pool, cache, callLog, methods }));
  registerWebhookRoutes(parent, createWebhookService(ctx, methods, callLog.flush));
}

function registerWebhookRoutes(parent: FastifyInstance, service: WebhookService) {
  registerCrud(parent, {
    path: '/webhooks',
    tag: 'webhooks',
    service,
    output: webhook,
    create: webhookCreate,
    update: webhookCreate.partial().strict(),
    filters: z.object({ model_name: z.string().optional(), rec_id: z.coerce.number().int().optional(), active: queryBoolean.optional() }),
    read: 'administrator',
    write: 'administrator',
  });

  const app = parent.withTypeProvider<ZodTypeProvider>();
  const tags = ['webhooks'];

  app.get('/api/v1/webhooks/:id/calls', {
    config: { group: 'administrator' },
    schema: {
      tags,
      params: idParams,
      querystring: listQuery.extend({ status: z.coerce.number().int().optional() }),
      description: 'The call log of the webhook, newest first; kept for settings.webhook_call_log_days days.',
      response: { 200: listOf(webhookCall) },
    },
    handler: (req) => service.calls(req.params.id, req.query),
  });

  app.post('/api/v1/webhooks/:id/actions/trigger', {
    config: { group: 'administrator' },
    schema: {
      tags,
      params: idParams,
      description: 'Calls the configured trigger_action on the target record (spec action_trigger) and answers the webhook.',
      response: { 200: webhook },
    },
    handler: async (req) => (await service.trigger(req.params.id, req.user!.id)) as z.infer<typeof webhook>,
  });
}
