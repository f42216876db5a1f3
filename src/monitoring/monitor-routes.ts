// Monitoring's routes on the root servers: the start_monitor and stop_monitor actions (group
// operator; they answer the root server), and GET /api/v1/root-servers/{id}/monitor-logs (group
// user): raw rows, or per-bucket averages with ?bucket=, for charts. Oldest first within [from, to)
// (?order=desc: newest first); default window: the last hour.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import type { Registry } from '../feature.js';
import { idParams, listOf, listQuery, isoInstant } from '../core/http/schemas.js';
import { action, operationId, registerActions } from '../core/http/actions.js';
import { createRootServerService, rootServerOut } from '../servers/index.js';
import { readMonitorLogs } from './monitor-log-service.js';
import { createMonitorService } from './monitor-service.js';
import { monitorBucketOut, monitorLogOut } from './monitor-schemas.js';

const query = listQuery.extend({
  from: isoInstant({ offset: true }).optional().describe('Start (inclusive), ISO 8601; default: `to` minus one hour'),
  to: isoInstant({ offset: true }).optional().describe('End (exclusive), ISO 8601; default: now'),
  bucket: z
    .string()
    .regex(/^[1-9][0-9]{0,4}[smhd]$/, 'must be a duration like 30s, 5m, 1h or 1d')
    .optional()
    .describe('Average the rows per bucket of this width (e.g. 1m, 15m, 1h); absent: raw rows'),
  order: z.enum(['asc', 'desc']).default('asc').describe('Time order: asc (oldest first, as charts draw) or desc (newest first)'),
});

export function registerMonitorRoutes(parent: FastifyInstance, ctx: AppContext, registry: Registry) {
  const monitor = createMonitorService(ctx);
  const servers = createRootServerService(ctx, registry.rootServerObservers);
  registerActions(parent, {
    path: '/root-servers',
    tag: 'root servers',
    group: 'operator',
    actions: {
      start_monitor: action({
        summary: 'Start monitoring a root server',
        description: 'Polls CPU, RAM, disk and network every monitor_update_interval.',
        response: rootServerOut,
        run: async ({ id, author }) => servers.output(await monitor.start(id, author)),
      }),
      stop_monitor: action({
        summary: 'Stop monitoring a root server',
        description: 'Stops polling; server_state → no_monitor.',
        response: rootServerOut,
        run: async ({ id, author }) => servers.output(await monitor.stop(id, author)),
      }),
    },
  });

  parent.withTypeProvider<ZodTypeProvider>().get('/api/v1/root-servers/:id/monitor-logs', {
    config: { group: 'user' },
    schema: {
      tags: ['root servers'],
      operationId: operationId('/root-servers', 'listMonitorLogs'),
      summary: 'List the monitor log of a root server',
      description: 'Monitor log of a root server: raw rows, or with ?bucket= the average of each bucket (bucket_start, samples).',
      params: idParams,
      querystring: query,
      response: { 200: listOf(z.union([monitorLogOut, monitorBucketOut])) },
    },
    handler: (req) => readMonitorLogs(ctx, req.params.id, req.query),
  });
}
