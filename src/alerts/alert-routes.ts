// alert-rules (operators write, users read) and alerts (read only, users read), DESIGN §10.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { operationId } from '../core/http/actions.js';
import { registerCrud } from '../core/http/crud.js';
import { idParams, listOf, listQueryOf, queryBoolean, queryId } from '../core/http/schemas.js';
import { NotFoundError } from '../core/errors.js';
import { jsonSafe } from '../core/records.js';
import { AlertState } from '../generated/prisma/enums.js';
import { alertModel, alertRuleModel } from './alert-models.js';
import { createAlertRuleService, listAlerts } from './alert-rule-service.js';
import { alertOut, alertRuleCreate, alertRuleOut, alertRuleUpdate } from './alert-schemas.js';

export function registerAlertRoutes(parent: FastifyInstance, ctx: AppContext) {
  registerCrud(parent, {
    path: '/alert-rules',
    model: alertRuleModel,
    tag: 'alerts',
    service: createAlertRuleService(ctx),
    output: alertRuleOut,
    create: alertRuleCreate,
    update: alertRuleUpdate,
    filters: z.object({ active: queryBoolean.optional() }),
    read: 'user',
    write: 'operator',
  });

  const app = parent.withTypeProvider<ZodTypeProvider>();
  const query = listQueryOf(
    alertModel,
    z.object({ state: z.enum(AlertState).optional(), rule_id: queryId.optional(), root_server_id: queryId.optional() }),
  );
  app.get('/api/v1/alerts', {
    config: { group: 'user' },
    schema: {
      tags: ['alerts'],
      operationId: operationId('/alerts', 'list'),
      summary: 'List alerts',
      description: 'Newest first; filter with ?state=firing|resolved, ?rule_id=, ?root_server_id=.',
      querystring: query,
      response: { 200: listOf(alertOut) },
    },
    handler: (req) => listAlerts(ctx.db, req.query as Parameters<typeof listAlerts>[1]),
  });
  app.get('/api/v1/alerts/:id', {
    config: { group: 'user' },
    schema: {
      tags: ['alerts'],
      operationId: operationId('/alerts', 'get'),
      summary: 'Get an alert',
      params: idParams,
      response: { 200: alertOut },
    },
    handler: async (req) => {
      const row = await ctx.db.alert.findUnique({ where: { id: req.params.id } });
      if (!row) throw new NotFoundError('Alert');
      return jsonSafe(row);
    },
  });
}
