// REST: /api/v1/database-templates (read: user, write: operator). A template names a database on a
// PostgreSQL server that customer databases are copied from (CREATE DATABASE ... TEMPLATE ...).
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { registerCrud } from '../core/http/crud.js';
import { patchOf, queryId, refId, timestamp } from '../core/http/schemas.js';
import { ConflictError } from '../core/errors.js';
import { createRecordService } from '../core/records.js';
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
    template_db_name: z.string().min(1).max(63),
  })
  .strict()
  .meta({ example: { name: 'Odoo 18 base', postgresql_server_id: 1, template_db_name: 'odoo18_template' } });

export function registerDatabaseTemplateRoutes(app: FastifyInstance, ctx: AppContext) {
  registerCrud(app, {
    path: '/database-templates',
    model: databaseTemplateModel,
    tag: 'database-templates',
    service: createRecordService(ctx, databaseTemplateModel, {
      // Customer databases are found on their template's server: that server cannot change under them.
      async prepareUpdate(tx, before, data) {
        if (!('postgresql_server_id' in data) || data.postgresql_server_id === before.postgresql_server_id) return undefined;
        const bound = await tx.subscription.count({ where: { database_template_id: before.id, database_created_at: { not: null } } });
        if (bound > 0) {
          throw new ConflictError(
            `${bound} subscription database(s) made from this template live on its PostgreSQL server: postgresql_server_id cannot change`,
            { fields: [{ field: 'postgresql_server_id', message: 'subscription databases live on the current server' }] },
          );
        }
        return undefined;
      },
    }),
    output: databaseTemplate,
    create: databaseTemplateCreate,
    update: patchOf(databaseTemplateCreate),
    filters: z.object({ postgresql_server_id: queryId.optional() }),
    read: 'user',
    write: 'operator',
  });
}
