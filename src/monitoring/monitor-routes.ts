// GET /api/v1/root-servers/{id}/monitor-logs (group user): raw rows, or per-bucket averages with
// ?bucket=, for charts. Oldest first within [from, to); default window: the last hour.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { ValidationError } from '../core/errors.js';
import { idParams, listOf, listQuery } from '../core/http/schemas.js';
import { loadRootServer } from '../servers/root-server-store.js';
import { queryMonitorLogs } from './monitor-log-service.js';
import { monitorBucketOut, monitorLogOut } from './monitor-schemas.js';

const UNIT_SECONDS = { s: 1, m: 60, h: 3600, d: 86_400 } as const;
const HOUR_MS = 3600_000;

const query = listQuery.extend({
  from: z.iso.datetime({ offset: true }).optional().describe('Start (inclusive), ISO 8601; default: `to` minus one hour'),
  to: z.iso.datetime({ offset: true }).optional().describe('End (exclusive), ISO 8601; default: now'),
  bucket: z
    .string()
    .regex(/^[1-9][0-9]{0,4}[smhd]$/, 'must be a duration like 30s, 5m, 1h or 1d')
    .optional()
    .describe('Average the rows per bucket of this width (e.g. 1m, 15m, 1h); absent: raw rows'),
});

export function registerMonitorRoutes(parent: FastifyInstance, ctx: AppContext) {
  parent.withTypeProvider<ZodTypeProvider>().get('/api/v1/root-servers/:id/monitor-logs', {
    config: { group: 'user' },
    schema: {
      tags: ['root servers'],
      description: 'Monitor log of a root server: raw rows, or with ?bucket= the average of each bucket (bucket_start, samples).',
      params: idParams,
      querystring: query,
      response: { 200: listOf(z.union([monitorLogOut, monitorBucketOut])) },
    },
    handler: async (req) => {
      await loadRootServer(ctx.db, req.params.id);
      const { from, to, bucket, limit, offset } = req.query;
      const end = to ? new Date(to) : new Date();
      const start = from ? new Date(from) : new Date(end.getTime() - HOUR_MS);
      if (start >= end) throw new ValidationError('from must be before to');
      const bucketSeconds = bucket ? Number(bucket.slice(0, -1)) * UNIT_SECONDS[bucket.slice(-1) as keyof typeof UNIT_SECONDS] : undefined;
      return queryMonitorLogs(ctx.db, req.params.id, { from: start, to: end, bucketSeconds, limit, offset });
    },
  });
}
