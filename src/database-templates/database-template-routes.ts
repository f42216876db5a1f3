// REST: /api/v1/database-templates (read: user, write: operator). A template names a database on a
// PostgreSQL server that customer databases are copied from (CREATE DATABASE ... TEMPLATE ...).
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { registerCrud } from '../core/http/crud.js';
import { patchOf, queryId, refId, timestamp } from '../core/http/schemas.js';
import { createDatabaseTemplateService } from './database-template-service.js';
import { databaseTemplateModel } from './database-template-models.js';

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
    postgresql_server_id: refId,
    // PostgreSQL identifiers are at most 63 bytes.
    template_db_name: z.string().min(1).max(63).describe("Not postgres, template0, template1 or the service's own database"),
  })
  .strict()
  .meta({ example: { name: 'Odoo 18 base', postgresql_server_id: 1, template_db_name: 'odoo18_template' } });

export function registerDatabaseTemplateRoutes(app: FastifyInstance, ctx: AppContext) {
  registerCrud(app, {
    path: '/database-templates',
    model: databaseTemplateModel,
    tag: 'database-templates',
    service: createDatabaseTemplateService(ctx),
    output: databaseTemplate,
    create: databaseTemplateCreate,
    update: patchOf(databaseTemplateCreate),
    filters: z.object({ postgresql_server_id: queryId.optional() }),
    read: 'user',
    write: 'operator',
  });
}
