// The Odoo actions of root servers (group operator): setup_odoo, restart_odoo and stop_odoo answer
// 202 {job_id}; odoo_status answers what runs on the host now.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { ValidationError } from '../core/errors.js';
import { action, registerActions } from '../core/http/actions.js';
import { refId } from '../core/http/schemas.js';
import { OdooState } from '../generated/prisma/enums.js';
import { loadRootServer, requireConfirmed } from '../servers/index.js';
import { assertHostFits } from './odoo-host-fit.js';
import { odooJobs } from './odoo-job-specs.js';
import { basePath, dbfilter, httpPort, moduleName } from './odoo-names.js';
import { createTemplateBuilder } from './odoo-template-build.js';
import { createOdooService } from './odoo-service.js';
import { setupBasePath } from './odoo-store.js';

const setupBody = z
  .object({
    odoo_version_id: refId,
    postgresql_server_id: refId.describe("Where the host's own role is made; Odoo's databases live there"),
    http_port: httpPort.optional().describe('Where Odoo listens on 127.0.0.1 (default: the port it has, else ODOO_HTTP_PORT)'),
    workers: z
      .number()
      .int()
      .min(0)
      .max(256)
      .optional()
      .describe('Worker processes (0: one threaded process); default: from the cores and memory of the host'),
    base_path: basePath
      .optional()
      .describe(
        'Where Odoo lives on the host (versions, configuration, data, logs): chosen by the first setup (default ODOO_BASE_PATH) and kept; another one later is refused',
      ),
    max_cron_threads: z.number().int().min(0).max(16).default(1).describe('Processes running scheduled actions (default 1)'),
    dbfilter: dbfilter
      .default('^%d$')
      .describe("Odoo's dbfilter: which databases a request may use (%h: its host, %d: the host's first label)"),
  })
  .strict()
  .meta({ example: { odoo_version_id: 1, postgresql_server_id: 1, http_port: 8069 } });

const statusOut = z.object({
  odoo_state: z.enum(OdooState),
  http_port: z.number().int(),
  service: z.enum(['running', 'stopped']),
  start_job_id: z
    .string()
    .nullable()
    .describe(
      'The odoo_start_again job queued because the service was stopped while odoo_state is running (a reboot without systemd, a crash); null otherwise (stop_odoo is never undone)',
    ),
  healthy: z.boolean().describe('/web/health answered 200 on the host'),
  health: z.string().describe("/web/health's answer, or why there was none"),
  routing_loaded: z
    .boolean()
    .nullable()
    .describe(
      "Whether svc's routing (svc_instance) is loaded in the running Odoo; null when Odoo is not healthy. False marks the server failed",
    ),
  routing: z
    .string()
    .describe("The routing probe's answer (db.db_exist through a proxy: refused with the routing), or why it was not probed"),
  version: z.string().nullable().describe('odoo-bin --version of the tree it runs'),
  odoo_version_id: z.number().int().nullable(),
  workers: z.number().int().nullable().describe('Workers in its configuration (0: threaded)'),
  processes: z.number().int().describe('Odoo processes of this service running on the host'),
  worker_processes: z.number().int(),
  memory_bytes: z.number().describe('Their resident memory, in total'),
  process_memory_bytes: z.array(z.number()),
});

export function registerOdooHostRoutes(app: FastifyInstance, ctx: AppContext) {
  const service = createOdooService(ctx);

  registerActions(app, {
    path: '/root-servers',
    tag: 'root servers',
    group: 'operator',
    actions: {
      setup_odoo: action({
        summary: 'Install and run Odoo on a root server',
        description:
          "In a job: the OS packages of the version, the odoo user, the source (checked against source_sha256, unpacked beside the old one, then switched), the host's own PostgreSQL role, a configuration only root and odoo read, and a service (systemd, else a supervised process), healthy on /web/health. Running it again changes nothing that is already right and never stops a running Odoo for nothing; a failure before the switch leaves the running Odoo on its old version. 409 (with the numbers) when the PostgreSQL server's max_connections cannot hold this host's worst case beside every other Odoo host using it (checked here when workers is given, else by the job before it changes anything).",
        body: setupBody,
        response: 'job',
        run: async ({ id, body, user }) => {
          const server = await loadRootServer(ctx.db, id);
          requireConfirmed(server);
          const [version, pg] = await Promise.all([
            ctx.db.odooVersion.findUnique({ where: { id: body.odoo_version_id }, select: { id: true } }),
            ctx.db.postgresqlServer.findUnique({ where: { id: body.postgresql_server_id } }),
          ]);
          if (!version)
            throw new ValidationError('odoo_version_id: no such Odoo version', [
              { field: 'odoo_version_id', message: 'no such Odoo version' },
            ]);
          if (!pg) {
            throw new ValidationError('postgresql_server_id: no such PostgreSQL server', [
              { field: 'postgresql_server_id', message: 'no such PostgreSQL server' },
            ]);
          }
          setupBasePath(ctx.config, server, body.base_path);
          // Workers given: 409 now when the host would not fit beside the others (else the job checks, from the host's cores).
          if (body.workers !== undefined)
            await assertHostFits(ctx, pg, { id, workers: body.workers, maxCronThreads: body.max_cron_threads });
          return ctx.queues.enqueue(odooJobs.odoo_setup, { root_server_id: id, ...body, user_id: user.id });
        },
      }),
      restart_odoo: action({
        summary: 'Restart Odoo on a root server',
        description:
          'In a job: restarts the service setup_odoo made and waits for /web/health (failed, with the end of its log, when it does not come).',
        response: 'job',
        run: async ({ id, user }) => {
          await service.assertOdooHost(id);
          return ctx.queues.enqueue(odooJobs.odoo_restart, { root_server_id: id, user_id: user.id });
        },
      }),
      stop_odoo: action({
        summary: 'Stop Odoo on a root server',
        description: 'In a job: stops the service (and keeps it from starting again until restart_odoo or setup_odoo).',
        response: 'job',
        run: async ({ id, user }) => {
          await service.assertOdooHost(id);
          return ctx.queues.enqueue(odooJobs.odoo_stop, { root_server_id: id, user_id: user.id });
        },
      }),
      odoo_status: action({
        summary: 'Read the state of Odoo on a root server',
        description:
          "Its health (/web/health on the host), the version it runs, its workers and its processes' memory. A service found stopped while odoo_state is running is started again by a job (start_job_id).",
        response: statusOut,
        run: ({ id, user }) => service.status(id, user.id),
      }),
    },
  });

  const templates = createTemplateBuilder(ctx);
  registerActions(app, {
    path: '/database-templates',
    tag: 'database-templates',
    group: 'operator',
    actions: {
      build: action({
        summary: "Build a template's database with its host's Odoo",
        description:
          "In a job, on the template's root server (which must run Odoo on the template's PostgreSQL server): odoo-bin -i <modules> --stop-after-init without demo data makes template_db_name, owned by the host's role, with its filestore; the template's owner_role becomes that role. The modules installed: those asked for (optional), the union of the `packages` of the trial packages that use the template, and base, web and svc_instance; the template then records every module installed in it (`modules`). 409 when the database exists (build never overwrites one). A module that is not on the host's addons path fails the job naming it before anything is made; one that fails to install fails it with Odoo's words, and nothing half-built stays.",
        body: z
          .object({
            modules: z
              .array(moduleName)
              .max(200)
              .optional()
              .describe(
                "Technical names, e.g. ['crm']; default: only the template's trial packages' modules (and base, web, svc_instance)",
              ),
          })
          .strict()
          .meta({ example: { modules: ['crm'] } })
          .nullable()
          .optional(),
        response: 'job',
        run: async ({ id, body, user }) => {
          await templates.assertBuildable(id, 'build');
          return ctx.queues.enqueue(odooJobs.odoo_build_template, {
            database_template_id: id,
            ...(body?.modules ? { modules: [...new Set(body.modules)] } : {}),
            user_id: user.id,
          });
        },
      }),
      update: action({
        operationId: 'databaseTemplates.updateModules',
        summary: "Update every module of a template's database",
        description:
          "In a job: odoo-bin -u all --stop-after-init on template_db_name with its host's Odoo (after a new source of the same version); modules asked for, and its trial packages' modules, are installed where missing (-i), so the template keeps every module it had and gains those. The template then records every module installed in it. 409 when the database does not exist.",
        body: z
          .object({
            modules: z.array(moduleName).max(200).optional().describe('Technical names of modules to install as well, e.g. ["sale"]'),
          })
          .strict()
          .meta({ example: { modules: ['sale'] } })
          .nullable()
          .optional(),
        response: 'job',
        run: async ({ id, body, user }) => {
          await templates.assertBuildable(id, 'update');
          return ctx.queues.enqueue(odooJobs.odoo_update_template, {
            database_template_id: id,
            ...(body?.modules ? { modules: [...new Set(body.modules)] } : {}),
            user_id: user.id,
          });
        },
      }),
    },
  });
}
