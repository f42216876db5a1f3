// REST: /api/v1/database-templates (read: user, write: operator). A template names a database on a
// PostgreSQL server that customer databases are copied from (CREATE DATABASE ... TEMPLATE ...).
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { registerCrud } from '../core/http/crud.js';
import { timestamp } from '../core/http/schemas.js';
import { createRecordService } from '../core/records.js';

export const DATABASE_TEMPLATE_MODEL = 'svc.database.template';

const databaseTemplate = z.object({
  id: z.number(),
  name: z.string(),
  postgresql_server_id: z.number(),
  template_db_name: z.string(),
  created_at: timestamp,
  updated_at: timestamp,
});

const databaseTemplateCreate = z
  .object({
    name: z.string().trim().min(1).max(200),
    postgresql_server_id: z.number().int().positive(),
    // PostgreSQL identifiers are at most 63 bytes.
    template_db_name: z.string().min(1).max(63),
  })
  .strict();

export function registerDatabaseTemplateRoutes(app: FastifyInstance, ctx: AppContext) {
  registerCrud(app, {
    path: '/database-templates',
    tag: 'database-templates',
    service: createRecordService(ctx.db, ctx.box, { modelName: DATABASE_TEMPLATE_MODEL, tracked: ['name', 'postgresql_server_id', 'template_db_name'] }),
    output: databaseTemplate,
    create: databaseTemplateCreate,
    update: databaseTemplateCreate.partial().strict(),
    filters: z.object({ postgresql_server_id: z.coerce.number().int().optional() }),
    read: 'user',
    write: 'operator',
  });
}
