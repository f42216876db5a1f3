// GET /healthz: is the process up, and can it reach PostgreSQL and Redis? 503 when either is down.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../context.js';

const CHECK_TIMEOUT_MS = 2_000;
const status = z.enum(['up', 'down']);

async function check(probe: () => Promise<unknown>): Promise<'up' | 'down'> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error('timeout')), CHECK_TIMEOUT_MS);
  });
  try {
    await Promise.race([probe(), timeout]);
    return 'up';
  } catch {
    return 'down';
  } finally {
    clearTimeout(timer);
  }
}

export function registerHealthRoutes(parent: FastifyInstance, ctx: AppContext) {
  parent.withTypeProvider<ZodTypeProvider>().get('/healthz', {
    config: { group: 'public' },
    schema: {
      tags: ['health'],
      operationId: 'health.check',
      summary: 'Check the service',
      description: 'Whether the process is up and reaches PostgreSQL and Redis; 503 when either is down.',
      response: {
        200: z.object({ status: z.literal('ok'), database: status, redis: status }),
        503: z.object({ status: z.literal('degraded'), database: status, redis: status }),
      },
    },
    handler: async (_req, reply) => {
      const [database, redis] = await Promise.all([check(() => ctx.db.$queryRaw`SELECT 1`), check(() => ctx.redis.ping())]);
      if (database === 'up' && redis === 'up') return { status: 'ok' as const, database, redis };
      return reply.status(503).send({ status: 'degraded' as const, database, redis });
    },
  });
}
