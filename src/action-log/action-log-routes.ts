// GET /api/v1/action-logs: the audit log of remote actions, newest first.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import type { Registry } from '../feature.js';
import { operationId } from '../core/http/actions.js';
import { idParams, listOf, listQuery, queryId, searchQuery, sortQuery, timeRangeQuery, timestamp } from '../core/http/schemas.js';
import { ActionStatus, ActionType } from '../generated/prisma/enums.js';
import { ACTION_LOG_SEARCH, ACTION_LOG_SORT, createActionLogService } from './action-log-service.js';

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

export function registerActionLogRoutes(parent: FastifyInstance, ctx: AppContext, registry: Registry) {
  const app = parent.withTypeProvider<ZodTypeProvider>();
  const service = createActionLogService(ctx, registry.models);
  const tags = ['action-logs'];

  app.get('/api/v1/action-logs', {
    config: { group: 'user' },
    schema: {
      tags,
      operationId: operationId('/action-logs', 'list'),
      summary: 'List action-log rows',
      querystring: listQuery.extend({
        sort: sortQuery(ACTION_LOG_SORT),
        // Three characters at least: a trigram index cannot serve a shorter substring.
        q: searchQuery(ACTION_LOG_SEARCH, 3),
        model_name: z.string().optional(),
        rec_id: queryId.optional(),
        action_type: z.enum(ActionType).optional(),
        status: z.enum(ActionStatus).optional(),
        job_id: z.string().max(200).optional(),
        ...timeRangeQuery('created_at'),
      }),
      response: { 200: listOf(actionLog) },
    },
    handler: (req) => service.list(req.query, req.user!.group),
  });

  app.get('/api/v1/action-logs/:id', {
    config: { group: 'user' },
    schema: {
      tags,
      operationId: operationId('/action-logs', 'get'),
      summary: 'Get an action-log row',
      params: idParams,
      response: { 200: actionLog },
    },
    handler: (req) => service.get(req.params.id, req.user!.group),
  });
}
