// REST: /api/v1/subscriptions (read: user, write and actions: operator) and the state methods as
// actions: confirm, cancel, reset_to_draft (200 with the record) and deploy (202, a job).
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { authorOf, registerCrud } from '../core/http/crud.js';
import { idParams, jobAccepted, nullableTimestamp, queryBoolean, timestamp } from '../core/http/schemas.js';
import { createSubscriptionService } from './subscription-service.js';

export const SUBSCRIPTION_STATES = ['draft', 'confirmed', 'deploying', 'running', 'failed', 'cancelled'] as const;
const BACKUP_STATES = ['none', 'ok', 'running', 'failed'] as const;

export const modelLimits = z.record(z.string().min(1).max(200), z.number().int().min(0)).describe('model name → maximum records');
export const packageNames = z.array(z.string().trim().min(1).max(200)).max(200);

const subscription = z.object({
  id: z.number(),
  name: z.string(),
  partner_id: z.number(),
  is_trial: z.boolean(),
  state: z.enum(SUBSCRIPTION_STATES),
  packages: z.array(z.string()),
  user_limit: z.number(),
  storage_limit_gb: z.number(),
  stage_limit: z.number(),
  trial_duration_days: z.number(),
  grace_period_days: z.number(),
  model_limits: z.record(z.string(), z.unknown()),
  trial_end_date: nullableTimestamp,
  grace_end_date: nullableTimestamp,
  database_template_id: z.number().nullable(),
  database_name: z.string().nullable(),
  backup_server_id: z.number().nullable(),
  backup_state: z.enum(BACKUP_STATES),
  created_at: timestamp,
  updated_at: timestamp,
});

const count = z.number().int().min(0).max(1_000_000);
const subscriptionCreate = z
  .object({
    name: z.string().trim().min(1).max(200),
    partner_id: z.number().int().positive(),
    is_trial: z.boolean().optional(),
    packages: packageNames.optional(),
    user_limit: count.optional(),
    storage_limit_gb: count.optional(),
    stage_limit: count.optional(),
    trial_duration_days: count.optional(),
    grace_period_days: count.optional(),
    model_limits: modelLimits.optional(),
    trial_end_date: z.iso.datetime().nullable().optional(),
    grace_end_date: z.iso.datetime().nullable().optional(),
    database_template_id: z.number().int().positive().nullable().optional(),
    database_name: z
      .string()
      .regex(/^[a-z_][a-z0-9_]{0,62}$/, 'lower-case letters, digits and _, starting with a letter or _, at most 63')
      .nullable()
      .optional()
      .describe('Generated at deployment when empty'),
    backup_server_id: z.number().int().positive().nullable().optional(),
  })
  .strict();

export function registerSubscriptionRoutes(parent: FastifyInstance, ctx: AppContext) {
  const service = createSubscriptionService(ctx);
  registerCrud(parent, {
    path: '/subscriptions',
    tag: 'subscriptions',
    service,
    output: subscription,
    create: subscriptionCreate,
    update: subscriptionCreate.partial().strict(),
    filters: z.object({
      state: z.enum(SUBSCRIPTION_STATES).optional(),
      partner_id: z.coerce.number().int().optional(),
      is_trial: queryBoolean.optional(),
    }),
    read: 'user',
    write: 'operator',
  });

  const app = parent.withTypeProvider<ZodTypeProvider>();
  const tags = ['subscriptions'];
  for (const action of ['confirm', 'cancel', 'reset_to_draft'] as const) {
    app.post(`/api/v1/subscriptions/:id/actions/${action}`, {
      config: { group: 'operator' },
      schema: { tags, params: idParams, response: { 200: subscription } },
      handler: async (req) => (await service[action](req.params.id, authorOf(req.user))) as z.infer<typeof subscription>,
    });
  }
  app.post('/api/v1/subscriptions/:id/actions/deploy', {
    config: { group: 'operator' },
    schema: {
      tags,
      params: idParams,
      description: 'Queues the deployment (confirmed or failed subscriptions): the customer database is created from the template.',
      response: { 202: jobAccepted },
    },
    handler: async (req, reply) => reply.status(202).send({ job_id: await service.deploy(req.params.id, req.user!.id) }),
  });
}
