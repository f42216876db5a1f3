// REST: /api/v1/trial-requests (read: user, write and actions: operator) with the actions of
// spec §4.4: create_subscription, cancel, reset_to_new.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { authorOf, registerCrud } from '../core/http/crud.js';
import { idParams, timestamp } from '../core/http/schemas.js';
import { COMPANY_SIZES, createTrialRequestService } from './trial-request-service.js';
import { processTrialRequest } from './trial-processing.js';

const TRIAL_REQUEST_STATES = ['new', 'processing', 'done', 'cancelled'] as const;

const trialRequest = z.object({
  id: z.number(),
  name: z.string().describe('Contact name'),
  company_name: z.string(),
  email: z.string(),
  mobile: z.string(),
  company_size: z.enum(COMPANY_SIZES),
  trial_package_id: z.number(),
  partner_id: z.number().nullable(),
  subscription_id: z.number().nullable(),
  database_template_id: z.number().nullable().describe('Overrides the trial package\'s template'),
  state: z.enum(TRIAL_REQUEST_STATES),
  notes: z.string().nullable(),
  created_at: timestamp,
  updated_at: timestamp,
  links: z.object({ partner: z.string().nullable(), subscription: z.string().nullable() }),
});

export const contactFields = {
  name: z.string().trim().min(1).max(200),
  company_name: z.string().trim().min(1).max(200),
  email: z.email().max(254),
  mobile: z.string().trim().regex(/^\+?[0-9 ()./-]{5,30}$/, 'a phone number: digits, spaces, + ( ) . / -'),
  company_size: z.enum(COMPANY_SIZES),
};

const trialRequestCreate = z
  .object({
    ...contactFields,
    trial_package_id: z.number().int().positive(),
    database_template_id: z.number().int().positive().nullable().optional(),
    notes: z.string().max(10_000).nullable().optional(),
  })
  .strict();

const processingResult = z.object({
  trial_request: trialRequest,
  partner_id: z.number(),
  partner_created: z.boolean(),
  subscription_id: z.number(),
  deployment_job_id: z.string().nullable().describe('The queued deployment; null when it could not be queued (see the chatter)'),
});

export function registerTrialRequestRoutes(parent: FastifyInstance, ctx: AppContext) {
  const service = createTrialRequestService(ctx);
  registerCrud(parent, {
    path: '/trial-requests',
    tag: 'trial-requests',
    service,
    output: trialRequest,
    create: trialRequestCreate,
    update: trialRequestCreate.partial().strict(),
    filters: z.object({
      state: z.enum(TRIAL_REQUEST_STATES).optional(),
      email: z.string().trim().toLowerCase().optional(),
      trial_package_id: z.coerce.number().int().optional(),
      company_size: z.enum(COMPANY_SIZES).optional(),
    }),
    read: 'user',
    write: 'operator',
  });

  const app = parent.withTypeProvider<ZodTypeProvider>();
  const tags = ['trial-requests'];

  app.post('/api/v1/trial-requests/:id/actions/create_subscription', {
    config: { group: 'operator' },
    schema: {
      tags,
      params: idParams,
      description:
        'Processes a New request: partner found by e-mail or created, trial subscription created and confirmed, deployment queued, request Done. 409 when it already has a subscription or is not New; a failure leaves it New with the error in its chatter.',
      response: { 200: processingResult },
    },
    handler: (req) => processTrialRequest(ctx, req.params.id, authorOf(req.user)),
  });

  for (const action of ['cancel', 'reset_to_new'] as const) {
    app.post(`/api/v1/trial-requests/:id/actions/${action}`, {
      config: { group: 'operator' },
      schema: { tags, params: idParams, response: { 200: trialRequest } },
      handler: (req) => service[action](req.params.id, authorOf(req.user)),
    });
  }
}
