// GET /metrics of a worker process (SVC_ROLE=worker has no API): a small HTTP listener on
// METRICS_PORT with the process's own instruments (jobs, monitoring polls, leases, SSH).
import Fastify, { type FastifyBaseLogger } from 'fastify';
import type { AppContext } from '../context.js';
import { registerErrorHandler } from '../core/http/error-handler.js';
import type { BackgroundTask, Registry } from '../feature.js';
import { registerMetricsRoute } from './metrics-routes.js';

export async function startMetricsListener(ctx: AppContext, registry: Registry): Promise<BackgroundTask> {
  const app = Fastify({ loggerInstance: ctx.log as FastifyBaseLogger });
  registerErrorHandler(app);
  registerMetricsRoute(app, ctx, registry, { fleet: false });
  await app.listen({ port: ctx.config.METRICS_PORT, host: ctx.config.HOST });
  ctx.log.info({ port: ctx.config.METRICS_PORT }, 'metrics served on /metrics');
  return { close: () => app.close() };
}
