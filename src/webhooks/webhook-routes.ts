// Inbound webhooks: the REST resource /api/v1/webhooks (administrators only: the token and URL
// are secrets), its call log at /api/v1/webhooks/{id}/calls and the action trigger; and the public
// endpoint POST /svc/webhook/<token> (its pool, cache and call log end with the app).
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { action, operationId, registerActions } from '../core/http/actions.js';
import { registerCrud } from '../core/http/crud.js';
import type { Registry } from '../feature.js';
import {
  idParams,
  listOf,
  listQuery,
  nullableTimestamp,
  patchOf,
  queryBoolean,
  queryId,
  queryInt,
  refId,
  timeRangeQuery,
  timestamp,
} from '../core/http/schemas.js';
import { MessageType, SUBTYPES } from '../core/chatter.js';
import { createWebhookService } from './webhook-service.js';
import { openWebhookEndpoint } from './webhook-call-service.js';
import { registerWebhookEndpoint } from './webhook-endpoint-routes.js';
import { webhookModel } from './webhook-models.js';

const webhook = z.object({
  id: z.number(),
  token: z.string().describe('64 hex characters; never changes (rotate by deleting and creating)'),
  url: z.string().describe('The full endpoint: POST it to fire the webhook'),
  model_name: z.string(),
  rec_id: z.number(),
  trigger_action: z.string().nullable(),
  message_type: z.enum(MessageType),
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
    rec_id: refId,
    trigger_action: z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]{0,99}$/, 'a method name without parentheses')
      .nullable()
      .optional()
      .describe('A method the model lets webhooks call (see the 400 details for the list)'),
    message_type: z.enum(MessageType).optional(),
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
  .strict()
  .meta({
    example: {
      model_name: 'svc.subscription',
      rec_id: 1,
      trigger_action: '_compute_backup_state',
      message_type: 'notification',
      subtype_xmlid: 'mail.mt_note',
    },
  });

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

export async function registerWebhookRoutes(parent: FastifyInstance, ctx: AppContext, registry: Registry) {
  const endpoint = await openWebhookEndpoint(ctx, registry);
  parent.addHook('onClose', endpoint.close);
  await registerWebhookEndpoint(parent, endpoint.calls);
  const service = createWebhookService(ctx, registry, endpoint.flushCallLog);

  registerCrud(parent, {
    path: '/webhooks',
    model: webhookModel,
    tag: 'webhooks',
    service,
    output: webhook,
    create: webhookCreate,
    update: patchOf(webhookCreate),
    filters: z.object({ model_name: z.string().optional(), rec_id: queryId.optional(), active: queryBoolean.optional() }),
    read: 'administrator',
    write: 'administrator',
  });

  parent.withTypeProvider<ZodTypeProvider>().get('/api/v1/webhooks/:id/calls', {
    config: { group: 'administrator' },
    schema: {
      tags: ['webhooks'],
      operationId: operationId('/webhooks', 'listCalls'),
      summary: 'List the calls of a webhook',
      params: idParams,
      querystring: listQuery.extend({ status: queryInt(100, 599).optional(), ...timeRangeQuery('called_at') }),
      description: 'The call log of the webhook, newest first; kept for settings.webhook_call_log_days days.',
      response: { 200: listOf(webhookCall) },
    },
    handler: (req) => service.calls(req.params.id, req.query),
  });

  registerActions(parent, {
    path: '/webhooks',
    tag: 'webhooks',
    group: 'administrator',
    actions: {
      trigger: action({
        summary: 'Trigger a webhook',
        description: 'Calls the configured trigger_action on the target record (spec action_trigger) and answers the webhook.',
        response: webhook,
        run: async ({ id, user }) => (await service.trigger(id, user.id)) as z.infer<typeof webhook>,
      }),
    },
  });
}
