import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { idParams, listOf, listQuery, timestamp } from '../core/http/schemas.js';
import { jsonSafe, listPage } from '../core/records.js';
import { NotFoundError } from '../core/errors.js';
import { ActionStatus, ActionType } from '../generated/prisma/enums.js';

const actionLog = z.object({
  id: z.number(),
  model_name: z.string(),
  rec_id: z.number(),
  action_type: z.enum(ActionType),
  status: z.enum(ActionStatus),
  input_text: z.string(),
  output_text: z.string(),
  user_id: z.number().nullable(),
  job_id: z.string().nullable(),
  created_at: timestamp,
});

export function registerActionLogRoutes(parent: FastifyInstance, ctx: AppContext) {
  const app = parent.withTypeProvider<ZodTypeProvider>();
  const tags = ['action-logs'];

  app.get('/api/v1/action-logs', {
    config: { group: 'user' },
    schema: {
      tags,
      querystring: listQuery.extend({
        model_name: z.string().optional(),
        rec_id: z.coerce.number().int().optional(),
        action_type: z.enum(ActionType).optional(),
        status: z.enum(ActionStatus).optional(),
        job_id: z.string().optional(),
      }),
      response: { 200: listOf(actionLog) },
    },
    handler: async (req) => {
      const { limit, offset, ...where } = req.query;
      return listPage(ctx.db.actionLog, where, { limit, offset }, { orderBy: { id: 'desc' } });
    },
  });

  app.get('/api/v1/action-logs/:id', {
    config: { group: 'user' },
    schema: { tags, params: idParams, response: { 200: actionLog } },
    handler: async (req) => {
      const row = await ctx.db.actionLog.findUnique({ where: { id: req.params.id } });
      if (!row) throw new NotFoundError('Action log');
      return jsonSafe(row);
    },
  });
}
