// REST: /api/v1/database-templates (read: user, write: operator). A template names a database on a
// PostgreSQL server that customer databases are copied from (CREATE DATABASE ... TEMPLATE ...), and
// optionally the Odoo host whose filestore holds its files; `check` tells whether it can be deployed.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { action, registerActions } from '../core/http/actions.js';
import { registerCrud } from '../core/http/crud.js';
import { patchOf, queryId, refId, timestamp } from '../core/http/schemas.js';
import { createDatabaseTemplateService } from './database-template-service.js';
import { databaseTemplateModel } from './database-template-models.js';

const databaseTemplate = z.object({
  id: z.number(),
  name: z.string(),
  postgresql_server_id: z.number(),
  template_db_name: z.string(),
  root_server_id: z.number().nullable(),
  owner_role: z.string().nullable(),
  owner_password_set: z.boolean(),
  template_system_identifier: z
    .string()
    .nullable()
    .describe(
      "Read-only: the system identifier of the template database's cluster, recorded when build, check or accept_database accepts it",
    ),
  template_oid: z
    .number()
    .nullable()
    .describe('Read-only: the oid of the template database; a copy or update refuses another database under template_db_name'),
  modules: z
    .array(z.string())
    .describe(
      'Read-only: the Odoo modules installed in the template database, read after build and update (empty: not known); trial packages may name only these',
    ),
  admin_password_set: z
    .boolean()
    .describe("Whether build (or update) set the template's random Odoo administrator password (never readable)"),
  created_at: timestamp,
  updated_at: timestamp,
});

const databaseTemplateCreate = z
  .object({
    name: z.string().trim().min(1).max(200),
    postgresql_server_id: refId,
    // PostgreSQL identifiers are at most 63 bytes.
    template_db_name: z
      .string()
      .min(1)
      .max(63)
      .describe("Not postgres, template0, template1, the service's own database or a svc_standby_ name"),
    root_server_id: refId
      .nullable()
      .optional()
      .describe('The Odoo host whose filestore (<ODOO_BASE_PATH>/data/filestore/<database>) holds the files of its databases'),
    owner_role: z
      .string()
      .regex(/^[a-z_][a-z0-9_$-]{0,62}$/, 'a PostgreSQL role name: lower-case letters, digits, _, $ and -, at most 63')
      .nullable()
      .optional()
      .describe(
        "The role that owns the template's copies (Odoo's database user on the host); the only role the service signs in as inside them. Never a superuser. Empty: the template database's owner",
      ),
    owner_password: z
      .string()
      .max(1000)
      .nullable()
      .optional()
      .describe("Write-only: owner_role's password (none for trust or peer authentication); cleared when the server or the role changes"),
  })
  .strict()
  .meta({
    example: { name: 'Odoo 18 base', postgresql_server_id: 1, template_db_name: 'odoo18_template', root_server_id: 1, owner_role: 'odoo' },
  });

const checkReport = z.object({
  ok: z.literal(true),
  template_db_name: z.string(),
  size_bytes: z.number().describe('pg_database_size of the template'),
  filestore: z.enum(['present', 'absent', 'no_root_server']).describe('The template filestore directory on the Odoo host'),
  system_identifier: z.string().describe("The template database's cluster (pg_control_system)"),
  oid: z.number().describe('The template database oid: recorded as the template when none was'),
});

export function registerDatabaseTemplateRoutes(app: FastifyInstance, ctx: AppContext) {
  const service = createDatabaseTemplateService(ctx);
  registerCrud(app, {
    path: '/database-templates',
    model: databaseTemplateModel,
    tag: 'database-templates',
    service,
    output: databaseTemplate,
    create: databaseTemplateCreate,
    update: patchOf(databaseTemplateCreate),
    filters: z.object({ postgresql_server_id: queryId.optional(), root_server_id: queryId.optional() }),
    read: 'user',
    write: 'operator',
  });

  registerActions(app, {
    path: '/database-templates',
    tag: 'database-templates',
    group: 'operator',
    actions: {
      check: action({
        summary: 'Check that a template can be deployed',
        description:
          "Connects to the template database and checks that it is an ordinary database of the operator's with the Odoo tables and columns a deployment sets up (400 user_error naming every missing one), that it is the database recorded as the template (its cluster and oid: recorded now when none is; 400 and an alert in the template's chatter when another database was renamed in), and whether its filestore directory exists on the Odoo host. Briefly holds a session on the template (a copy started meanwhile waits for it).",
        response: checkReport,
        run: ({ id, user }) => service.check(id, user.id),
      }),
      accept_database: action({
        summary: 'Accept the database now under template_db_name as the template',
        description:
          "After a deliberate replacement of the template database (restored, rebuilt by hand): the checks of check but the identity's, then the database's cluster and oid are recorded as the template's. Copies and updates refuse any other database under the name from then on. Check first who put it there: a database renamed into the template's name by a tenant would hand its administrator to every later customer.",
        response: checkReport,
        run: ({ id, user }) => service.check(id, user.id, true),
      }),
    },
  });
}
