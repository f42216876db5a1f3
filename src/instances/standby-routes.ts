// GET /api/v1/standby-databases (operators): the standby pool, read only (the pool job writes it).
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { registerCrud } from '../core/http/crud.js';
import { queryId } from '../core/http/schemas.js';
import { createRecordService } from '../core/records.js';
import { StandbyState } from '../generated/prisma/enums.js';
import { standbyDatabaseModel } from './standby-models.js';
import { standbyDatabaseOut } from './standby-schemas.js';

export function registerStandbyRoutes(app: FastifyInstance, ctx: AppContext) {
  registerCrud(app, {
    path: '/standby-databases',
    model: standbyDatabaseModel,
    tag: 'standby-databases',
    service: createRecordService(ctx, standbyDatabaseModel),
    output: standbyDatabaseOut,
    filters: z.object({ trial_package_id: queryId.optional(), state: z.enum(StandbyState).optional() }),
    read: 'operator',
  });
}
