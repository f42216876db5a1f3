// alert-rules (operators write, users read) and alerts (read only, users read).
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { registerCrud } from '../core/http/crud.js';
import { queryBoolean, queryId } from '../core/http/schemas.js';
import { createRecordService } from '../core/records.js';
import { AlertState } from '../generated/prisma/enums.js';
import { alertModel, alertRuleModel } from './alert-models.js';
import { createAlertRuleService } from './alert-rule-service.js';
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

  // Read only: alerts are written by the evaluation, never through the API.
  registerCrud(parent, {
    path: '/alerts',
    model: alertModel,
    tag: 'alerts',
    service: createRecordService(ctx, alertModel, { sort: '-id' }),
    output: alertOut,
    filters: z.object({ state: z.enum(AlertState).optional(), rule_id: queryId.optional(), root_server_id: queryId.optional() }),
    read: 'user',
  });
}
