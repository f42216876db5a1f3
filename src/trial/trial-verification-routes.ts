// REST: /api/v1/trial-verifications, read only (group user). Neither the code hash nor the access
// token is ever answered: together with a code they would let a reader complete a verification.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { NotFoundError } from '../core/errors.js';
import { idParams, listOf, listQueryOf, nullableTimestamp, queryId, timestamp } from '../core/http/schemas.js';
import { jsonSafe, type ListParams, listPage, searchWhere } from '../core/records.js';
import { trialVerificationModel } from './trial-models.js';
import type { TrialVerification } from '../generated/prisma/client.js';
import { TrialVerificationState } from '../generated/prisma/enums.js';
import { operationId } from '../core/http/actions.js';
import { COMPANY_SIZES, companySizeFromDb } from './trial-request-service.js';

const trialVerification = z.object({
  id: z.number(),
  contact_name: z.string(),
  company_name: z.string(),
  email: z.string(),
  mobile: z.string(),
  company_size: z.enum(COMPANY_SIZES),
  trial_package_id: z.number(),
  code_expiry: timestamp,
  failed_attempts: z.number(),
  codes_sent: z.number(),
  last_code_sent: nullableTimestamp,
  state: z.enum(TrialVerificationState),
  ip_address: z.string(),
  trial_request_id: z.number().nullable(),
  created_at: timestamp,
  updated_at: timestamp,
});

function view(row: TrialVerification) {
  const { access_token: _token, code_hash: _hash, ...rest } = jsonSafe(row);
  return { ...rest, company_size: companySizeFromDb(row.company_size) };
}

export function registerTrialVerificationRoutes(parent: FastifyInstance, ctx: AppContext) {
  const app = parent.withTypeProvider<ZodTypeProvider>();
  const tags = ['trial-verifications'];

  app.get('/api/v1/trial-verifications', {
    config: { group: 'user' },
    schema: {
      tags,
      operationId: operationId('/trial-verifications', 'list'),
      summary: 'List trial verifications',
      querystring: listQueryOf(
        trialVerificationModel,
        z.object({
          state: z.enum(TrialVerificationState).optional(),
          email: z.string().trim().toLowerCase().optional(),
          trial_package_id: queryId.optional(),
        }),
      ),
      response: { 200: listOf(trialVerification) },
    },
    handler: async (req) => {
      const { limit, offset, cursor, sort, q, ...where } = req.query as typeof req.query & ListParams;
      const filter = { ...where, ...searchWhere(trialVerificationModel.search, q) };
      const { table, resource } = trialVerificationModel;
      return listPage(ctx, ctx.db.trialVerification, filter, { limit, offset, cursor }, { table, resource, sort: sort ?? '-id', view });
    },
  });

  app.get('/api/v1/trial-verifications/:id', {
    config: { group: 'user' },
    schema: {
      tags,
      operationId: operationId('/trial-verifications', 'get'),
      summary: 'Get a trial verification',
      params: idParams,
      response: { 200: trialVerification },
    },
    handler: async (req) => {
      const row = await ctx.db.trialVerification.findUnique({ where: { id: req.params.id } });
      if (!row) throw new NotFoundError('Trial verification');
      return view(row);
    },
  });
}
