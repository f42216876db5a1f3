// PostgreSQL servers: REST resource (operators write, everyone reads) and test_connection.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { action, registerActions } from '../core/http/actions.js';
import { registerCrud } from '../core/http/crud.js';
import { patchOf, timestamp } from '../core/http/schemas.js';
import { createPostgresqlService } from './postgresql-service.js';
import { postgresqlServerModel } from './postgresql-models.js';

const host = z
  .string()
  .trim()
  .min(1)
  .max(253)
  .regex(/^[A-Za-z0-9.:_-]+$/, 'a host name or an IP address');

const postgresqlServer = z.object({
  id: z.number(),
  name: z.string().nullable(),
  ip: z.string(),
  username: z.string().nullable(),
  password_set: z.boolean(),
  port: z.number(),
  created_at: timestamp,
  updated_at: timestamp,
});

const postgresqlServerCreate = z
  .object({
    name: z.string().max(200).nullable().optional(),
    ip: host.describe('Host name or IP address'),
    username: z.string().max(63).nullable().optional().describe('Role to connect as (postgres when empty)'),
    password: z.string().max(1000).nullable().optional().describe('Write-only; "" or null clears it'),
    port: z.number().int().min(1).max(65535).default(5432),
  })
  .strict()
  .meta({ example: { name: 'db1', ip: '10.0.0.5', port: 5432, username: 'odoo', password: 's3cret' } });

const postgresqlServerUpdate = patchOf(postgresqlServerCreate);

const connectionReport = z.object({
  ok: z.literal(true),
  version: z.string().describe('SELECT version()'),
  server_version: z.string(),
  tls: z.boolean().describe('Whether the session is encrypted'),
  tls_version: z.string().nullable(),
});

export function registerPostgresqlRoutes(app: FastifyInstance, ctx: AppContext) {
  const service = createPostgresqlService(ctx);
  registerCrud(app, {
    path: '/postgresql-servers',
    model: postgresqlServerModel,
    tag: 'postgresql-servers',
    service,
    output: postgresqlServer,
    create: postgresqlServerCreate,
    update: postgresqlServerUpdate,
    read: 'user',
    write: 'operator',
    noun: { one: 'PostgreSQL server', many: 'PostgreSQL servers' },
  });

  registerActions(app, {
    path: '/postgresql-servers',
    tag: 'postgresql-servers',
    group: 'operator',
    actions: {
      test_connection: action({
        summary: 'Test a PostgreSQL server connection',
        description:
          'Connects to the server (TLS when it offers it, as sslmode=prefer) and reports its version. A failed connection answers 400 user_error carrying the error.',
        response: connectionReport,
        run: ({ id, user }) => service.testConnection(id, user.id),
      }),
    },
  });
}
