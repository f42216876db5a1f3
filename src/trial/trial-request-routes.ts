// REST: /api/v1/trial-requests (read: user, write and actions: operator) with the actions
// create_subscription, cancel, reset_to_new.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { TrialRequestState } from '../generated/prisma/enums.js';
import { action, registerActions } from '../core/http/actions.js';
import { registerCrud } from '../core/http/crud.js';
import { patchOf, queryId, refId, timestamp } from '../core/http/schemas.js';
import { COMPANY_SIZES, createTrialRequestService } from './trial-request-service.js';
import { processTrialRequest } from './trial-processing.js';
import { trialRequestModel } from './trial-models.js';

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
  database_template_id: z.number().nullable().describe("Overrides the trial package's template"),
  state: z.enum(TrialRequestState),
  notes: z.string().nullable(),
  created_at: timestamp,
  updated_at: timestamp,
  links: z.object({ partner: z.string().nullable(), subscription: z.string().nullable() }),
});

const contactFields = {
  name: z.string().trim().min(1).max(200),
  company_name: z.string().trim().min(1).max(200),
  email: z.email().max(254),
  mobile: z
    .string()
    .trim()
    .min(5, 'at least 5 characters')
    .max(30)
    .regex(/^\+?[0-9 ()./-]+$/, 'a phone number: digits, spaces, + ( ) . / -'),
  company_size: z.enum(COMPANY_SIZES),
};

const trialRequestCreate = z
  .object({
    ...contactFields,
    trial_package_id: refId,
    database_template_id: refId.nullable().optional(),
    notes: z.string().max(10_000).nullable().optional(),
  })
  .strict()
  .meta({
    example: {
      name: 'Jane Doe',
      company_name: 'Acme GmbH',
      email: 'jane@acme.example',
      mobile: '+49 170 1234567',
      company_size: '6-10',
      trial_package_id: 1,
    },
  });

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
    model: trialRequestModel,
    tag: 'trial-requests',
    service,
    output: trialRequest,
    create: trialRequestCreate,
    update: patchOf(trialRequestCreate),
    filters: z.object({
      state: z.enum(TrialRequestState).optional(),
      email: z.string().trim().toLowerCase().optional(),
      trial_package_id: queryId.optional(),
      company_size: z.enum(COMPANY_SIZES).optional(),
    }),
    read: 'user',
    write: 'operator',
  });

  registerActions(parent, {
    path: '/trial-requests',
    tag: 'trial-requests',
    group: 'operator',
    actions: {
      create_subscription: action({
        summary: 'Create the subscription of a trial request',
        description:
          'Processes a New request: partner found by e-mail or created, trial subscription created and confirmed, deployment queued, request Done. 409 when it already has a subscription or is not New; a failure leaves it New with the error in its chatter.',
        response: processingResult,
        run: ({ id, author }) => processTrialRequest(ctx, id, author),
      }),
      cancel: action({
        summary: 'Cancel a trial request',
        description: 'New → Cancelled.',
        response: trialRequest,
        run: ({ id, author }) => service.cancel(id, author),
      }),
      reset_to_new: action({
        summary: 'Reset a trial request to New',
        description: 'Cancelled → New.',
        response: trialRequest,
        run: ({ id, author }) => service.reset_to_new(id, author),
      }),
    },
  });
}
