// The pools' routes (operators): drain on a root server and its drains; a template's copies on the
// hosts of its pool, and sync_copies (made now rather than at the next sweep).
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { NotFoundError } from '../core/errors.js';
import { action, operationId, registerActions } from '../core/http/actions.js';
import { idParams } from '../core/http/schemas.js';
import { HostDrainState, TemplateCopyState } from '../generated/prisma/enums.js';
import { createDrains } from './drain-service.js';
import { poolJobs } from './pool-job-specs.js';

const drainBody = z
  .object({ batch_size: z.number().int().min(1).max(50).optional().describe('Moves under way at once (default 3)') })
  .strict()
  .meta({ example: { batch_size: 3 } })
  .nullable()
  .optional();

const drain = z.object({
  id: z.number().int(),
  root_server_id: z.number().int(),
  state: z.enum(HostDrainState),
  batch_size: z.number().int(),
  moved: z.number().int().describe('Tenants moved away by this drain'),
  failed_subscription_ids: z.array(z.number().int()).describe('Tenants whose move failed in this drain (not tried again by it)'),
  left_over: z.string().nullable().describe('What stayed on the host when the drain ended, and why'),
  job_id: z.string().nullable(),
  created_at: z.date(),
  finished_at: z.date().nullable(),
});

const copy = z.object({
  id: z.number().int(),
  root_server_id: z.number().int(),
  postgresql_server_id: z.number().int(),
  database_name: z.string(),
  state: z.enum(TemplateCopyState),
  content_version: z.number().int().describe("The template's content_version it was copied from"),
  in_step: z.boolean().describe("Ready and made from the template's current contents: only such a copy is deployed from"),
  error: z.string().nullable(),
  seconds: z.number().nullable().describe('How long making it took'),
  updated_at: z.date(),
});

export function registerPoolRoutes(parent: FastifyInstance, ctx: AppContext) {
  const app = parent.withTypeProvider<ZodTypeProvider>();
  const drains = createDrains(ctx);

  registerActions(parent, {
    path: '/root-servers',
    tag: 'root servers',
    group: 'operator',
    actions: {
      drain: action({
        summary: "Drain an Odoo host: move its tenants to the pool's other hosts",
        description:
          "Cordons the host (no new tenant), then in a job moves its tenants (as `move` on each subscription) to the other hosts of its pool, batch_size at a time, each where placement puts a new tenant. Resumable: asking again while a drain runs answers that drain's job (queued again if it was lost), and a worker restart continues it. A tenant whose move fails or cannot start, or that is not running, stays; the drain then ends `failed` naming each. Progress: the job's progress and GET /root-servers/{id}/drains. 409 when the host runs no Odoo.",
        body: drainBody,
        response: 'job',
        run: ({ id, body, author, user }) => drains.request(id, body?.batch_size, author, user.id),
      }),
      stop_drain: action({
        summary: "Stop an Odoo host's drain",
        description:
          'No further move of the drain starts; moves under way finish (or fail) on their own. The drain is `stopped`; the host stays cordoned (`uncordon` to take tenants again, `drain` to go on). 409 when no drain is under way.',
        response: drain,
        run: ({ id, user }) => drains.stop(id, user.id),
      }),
    },
  });

  app.get('/api/v1/root-servers/:id/drains', {
    config: { group: 'operator' },
    schema: {
      tags: ['root servers'],
      operationId: operationId('/root-servers', 'listDrains'),
      summary: "An Odoo host's drains",
      description: 'Newest first: state, moved, failed, what stayed.',
      params: idParams,
      response: { 200: z.object({ items: z.array(drain) }) },
    },
    handler: async (req) => {
      if (!(await ctx.db.rootServer.findUnique({ where: { id: req.params.id }, select: { id: true } })))
        throw new NotFoundError('Root server');
      return { items: await drains.list(req.params.id) };
    },
  });

  registerActions(parent, {
    path: '/database-templates',
    tag: 'database templates',
    group: 'operator',
    actions: {
      sync_copies: action({
        summary: "Make the template's copies on its pool's hosts now",
        description:
          'In a job: a copy (database and filestore) on every other Odoo host of the same version where none is ready and in step, made from the template; copies of hosts that left the pool removed. The same runs every 10 minutes and after setup_odoo, build and update.',
        response: 'job',
        run: async ({ id, user }) => {
          if (!(await ctx.db.databaseTemplate.findUnique({ where: { id }, select: { id: true } })))
            throw new NotFoundError('Database template');
          return ctx.queues.enqueue(poolJobs.template_copies_sync, { database_template_id: id, user_id: user.id });
        },
      }),
    },
  });

  app.get('/api/v1/database-templates/:id/copies', {
    config: { group: 'user' },
    schema: {
      tags: ['database templates'],
      operationId: operationId('/database-templates', 'listCopies'),
      summary: "A template's copies on the hosts of its pool",
      description:
        "One per other Odoo host of the template's Odoo version: its database there, state, and whether it is in step with the template.",
      params: idParams,
      response: { 200: z.object({ content_version: z.number().int(), items: z.array(copy) }) },
    },
    handler: async (req) => {
      const t = await ctx.db.databaseTemplate.findUnique({
        where: { id: req.params.id },
        include: { copies: { orderBy: { root_server_id: 'asc' } } },
      });
      if (!t) throw new NotFoundError('Database template');
      const items = t.copies.map((c) => ({
        ...c,
        in_step: c.state === 'ready' && c.content_version === t.content_version && c.oid !== null,
      }));
      return { content_version: t.content_version, items };
    },
  });
}
