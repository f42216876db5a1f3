// The operator's placement actions: cordon / uncordon / room on a root server, and the pools' room
// (with its alert check run now) on the settings.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { action, registerActions, registerSettingsActions } from '../core/http/actions.js';
import { nullableTimestamp } from '../core/http/schemas.js';
import { createPlacementHosts } from './placement-hosts.js';
import { placementJobs } from './placement-job-specs.js';
import { poolRooms } from './placement-room.js';

const capacityOut = z.object({
  tenants: z.number().int().nullable().describe('Tenants that fit (null: unknown)'),
  tenants_from: z
    .enum(['operator', 'memory', 'unknown'])
    .describe('capacity_tenants set by an operator, else the memory at 64 MB a tenant'),
  memory_bytes: z
    .number()
    .nullable()
    .describe('Memory for tenants: capacity_memory_bytes, else 80 % of the memory setup_odoo read (else of the newest sample)'),
  memory_from: z.enum(['operator', 'facts', 'sample', 'unknown']),
  disk_bytes: z
    .number()
    .nullable()
    .describe("Disk for tenants: capacity_disk_bytes, else the newest sample's disk, less the 10 % kept free"),
  disk_from: z.enum(['operator', 'sample', 'unknown']),
});

export const hostRoomOut = z.object({
  root_server_id: z.number().int(),
  cordoned_at: nullableTimestamp,
  cordon_reason: z.string().nullable(),
  tenants: z.number().int().describe('Subscriptions living on it or being deployed there, and standbys on it'),
  capacity: capacityOut,
  disk_used_bytes: z.number().nullable().describe("The newest sample's, plus the tenants placed since at tenant_disk_bytes each"),
  tenant_disk_bytes: z
    .number()
    .describe('What a new tenant is counted at: the mean size the usage round measured of its tenants (256 MB before any)'),
  fill: z.number().describe('The fullest of tenants and disk against capacity (0..1); placement picks the least filled'),
  room: z.number().int().nullable().describe('New tenants that still fit (null: no capacity known)'),
  left_out: z.string().nullable().describe('Why placement gives it no new tenant now (null: it takes them)'),
});

const poolRoomOut = z.object({
  pools: z.array(
    z.object({
      odoo_version_id: z.number().int(),
      name: z.string(),
      hosts: z.number().int(),
      healthy: z.number().int().describe('Hosts taking new tenants (not cordoned, Odoo running, online, out of maintenance)'),
      unknown_capacity: z.number().int().describe('Healthy hosts whose capacity is unknown: a pool with any is never low'),
      room: z.number().int().describe('New tenants the healthy hosts still take'),
      trials_last_week: z.number().int(),
      threshold: z.number().int(),
      threshold_from: z.enum(['setting', 'trials']),
      low: z.boolean().describe('room < threshold: the alert fires (checked every 5 minutes)'),
      per_host: z.array(
        z.object({
          root_server_id: z.number().int(),
          tenants: z.number().int(),
          room: z.number().int().nullable(),
          left_out: z.string().nullable(),
        }),
      ),
    }),
  ),
});

const cordonBody = z
  .object({
    reason: z
      .string()
      .trim()
      .min(1)
      .max(500)
      .refine((v) => !/\p{Cc}/u.test(v), 'one line of text, no control characters')
      .optional(),
  })
  .strict()
  .meta({ example: { reason: 'disk replacement on Friday' } })
  .nullable()
  .optional();

export function registerPlacementRoutes(app: FastifyInstance, ctx: AppContext) {
  const hosts = createPlacementHosts(ctx);

  registerActions(app, {
    path: '/root-servers',
    tag: 'root servers',
    group: 'operator',
    actions: {
      cordon: action({
        summary: 'Cordon an Odoo host',
        description:
          'Placement gives the host no new tenant (no deployment, no standby) until uncordon; its tenants stay and keep running. Cordoning a cordoned host keeps its first time and replaces the reason. Told in its chatter and the action log.',
        body: cordonBody,
        response: hostRoomOut,
        run: ({ id, body, author, user }) => hosts.cordon(id, body?.reason ?? null, author, user.id),
      }),
      uncordon: action({
        summary: 'Uncordon an Odoo host',
        description: 'Placement may give the host new tenants again (when it is healthy and has room).',
        response: hostRoomOut,
        run: ({ id, author, user }) => hosts.uncordon(id, author, user.id),
      }),
      room: action({
        summary: "Read an Odoo host's room",
        description:
          'Its capacity (set by an operator through capacity_tenants, capacity_memory_bytes, capacity_disk_bytes, else derived from its memory and its newest monitoring sample), what is placed on it, its fill and why placement leaves it out now.',
        group: 'user',
        response: hostRoomOut,
        run: ({ id }) => hosts.room(id),
      }),
    },
  });

  registerSettingsActions(app, 'operator', {
    pool_room: action({
      summary: "Read the pools' room",
      description:
        "Each pool (the Odoo hosts of one version): its hosts' room for new tenants, the threshold (settings' pool_room_alert_tenants, else a day of the last week's trials) and whether it is low (the room alert).",
      response: poolRoomOut,
      run: async () => ({ pools: await poolRooms(ctx.db) }),
    }),
    check_pool_room: action({
      summary: "Check the pools' room now",
      description:
        "Runs the room check the schedule runs every 5 minutes: fires or resolves each pool's room alert. The job result is {fired, resolved, pools}.",
      response: 'job',
      run: ({ user }) => ctx.queues.enqueue(placementJobs.check_pool_room, { user_id: user.id }),
    }),
  });
}
