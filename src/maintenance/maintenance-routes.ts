// maintenance-windows: operators write, users read.
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../context.js';
import { registerCrud } from '../core/http/crud.js';
import { maintenanceWindowModel } from './maintenance-models.js';
import { maintenanceWindowCreate, maintenanceWindowOut, maintenanceWindowUpdate } from './maintenance-schemas.js';
import { createMaintenanceService } from './maintenance-service.js';

export function registerMaintenanceRoutes(parent: FastifyInstance, ctx: AppContext) {
  registerCrud(parent, {
    path: '/maintenance-windows',
    model: maintenanceWindowModel,
    tag: 'maintenance',
    service: createMaintenanceService(ctx),
    output: maintenanceWindowOut,
    create: maintenanceWindowCreate,
    update: maintenanceWindowUpdate,
    read: 'user',
    write: 'operator',
  });
}
