// A subscription's moves (operators): move and move_back (202), the list.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { action, operationId, registerActions } from '../core/http/actions.js';
import { idParams, refId } from '../core/http/schemas.js';
import { MoveState } from '../generated/prisma/enums.js';
import { createMoveService } from './move-service.js';

const moveBody = z
  .object({
    root_server_id: refId.optional().describe('The Odoo host to move to; its PostgreSQL server is where the database goes'),
    postgresql_server_id: refId
      .optional()
      .describe("The PostgreSQL server to move to: checked against the host's, or without root_server_id the one running Odoo host on it"),
  })
  .strict()
  .refine((b) => b.root_server_id !== undefined || b.postgresql_server_id !== undefined, {
    message: 'name root_server_id or postgresql_server_id',
    path: ['root_server_id'],
  })
  .meta({ example: { root_server_id: 2 } });

const move = z.object({
  id: z.number().int(),
  subscription_id: z.number().int(),
  state: z.enum(MoveState),
  step: z.string().describe('queued, copy, freeze, switch, switched, done; where a failed move stopped'),
  is_back: z.boolean(),
  database_name: z.string(),
  from_postgresql_server_id: z.number().int(),
  from_root_server_id: z.number().int(),
  to_postgresql_server_id: z.number().int(),
  to_root_server_id: z.number().int(),
  freeze_seconds: z.number().nullable().describe('How long the instance was closed'),
  seconds: z.number().nullable(),
  error: z.string().nullable(),
  switched_at: z.date().nullable(),
  keep_until: z.date().nullable().describe('Until when the old copy is kept (MOVE_KEEP_DAYS): move_back until then'),
  old_dropped_at: z.date().nullable(),
  created_at: z.date(),
});

export function registerMoveRoutes(parent: FastifyInstance, ctx: AppContext) {
  const app = parent.withTypeProvider<ZodTypeProvider>();
  const service = createMoveService(ctx);

  registerActions(parent, {
    path: '/subscriptions',
    tag: 'moves',
    group: 'operator',
    actions: {
      move: action({
        summary: 'Move the instance to another Odoo host and PostgreSQL server',
        description:
          "In a job: the filestore copied while the instance runs; then a freeze (the maintenance page; the database takes no new session), the database copied whole (pg_dump | pg_restore as the new host's role) with the files added meanwhile, the records switched, and the instance answers on the new host; its domains wait for DNS pointing there. The old copy is kept closed for MOVE_KEEP_DAYS. A failure before the switch leaves it where it was. 409 when the subscription is not running or busy, the target is where it is, runs another Odoo version, uses the same PostgreSQL server, has a database of that name or no room.",
        body: moveBody,
        response: 'job',
        run: ({ id, body, user }) => service.request(id, body, user.id),
      }),
      move_back: action({
        summary: 'Move the instance back to where its last move took it from',
        description:
          "A move (as `move`) to the last move's old place while its old copy is kept (that copy is stale: dropped, and the instance copied there as it is now). 409 when there is none.",
        response: 'job',
        run: ({ id, user }) => service.requestBack(id, user.id),
      }),
    },
  });

  app.get('/api/v1/subscriptions/:id/moves', {
    config: { group: 'operator' },
    schema: {
      tags: ['moves'],
      operationId: operationId('/subscriptions', 'listMoves'),
      summary: "A subscription's moves",
      description: 'Newest first: from where to where, the step, the freeze, how long the old copy is kept.',
      params: idParams,
      response: { 200: z.object({ items: z.array(move) }) },
    },
    handler: async (req) => ({ items: await service.list(req.params.id) }),
  });
}
