// GET /metrics in the Prometheus text format, for any user's bearer token. An API process answers
// with its own instruments (HTTP requests, and the jobs and polls it runs when it is a worker too)
// and the fleet's series read at scrape time; a worker process (SVC_ROLE=worker) answers on
// METRICS_PORT with its own instruments only (metrics-listener.ts), so the fleet's series are not
// read once per process. Whatever is down, the scrape answers 200 with what the process knows:
// svc_dependency_up says which of PostgreSQL and Redis answered, svc_scrape_source_up which fleet
// series could be read.
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../context.js';
import {
  cellHistogram,
  counter,
  createScrapeRegistry,
  gauge,
  type HistogramCell,
  METRICS_CONTENT_TYPE,
  processMetrics,
} from '../core/metrics.js';
import { noAnswer, withTimeout } from '../core/timeout.js';
import type { Registry } from '../feature.js';
import { createScrapeAuth } from './metrics-auth.js';

const PROBE_TIMEOUT_MS = 1_000;
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

const dependencyUp = gauge({
  name: 'svc_dependency_up',
  help: 'Whether this process reached the dependency at the last scrape (1) or not (0)',
  labelNames: ['dependency'],
});

async function probe(what: () => Promise<unknown>, name: string): Promise<boolean> {
  try {
    await withTimeout(what(), PROBE_TIMEOUT_MS, noAnswer(name, PROBE_TIMEOUT_MS));
    return true;
  } catch {
    return false;
  }
}

/**
 * Counts every request of the API by method, route template (never the raw URL) and status, with its
 * duration. Per request, the label set's cell is found through three small maps and counted into
 * (prom-client's inc() and observe() with a labels object: 3.4 µs a request in the CPU profile of
 * bench:webhook); the request counter is the cells' counts, read when scraped.
 */
export function instrumentHttp(app: FastifyInstance) {
  const duration = cellHistogram({
    name: 'svc_http_request_duration_seconds',
    help: 'Time to answer an HTTP request, by method, route template and status',
    labelNames: ['method', 'route', 'status'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  });
  counter({
    name: 'svc_http_requests_total',
    help: 'HTTP requests answered, by method, route template and status (webhook calls: route="/svc/webhook/:token")',
    labelNames: ['method', 'route', 'status'],
    collect() {
      this.reset();
      for (const cell of duration.cells()) this.inc(cell.labels, cell.count);
    },
  });
  // method → route → status → cell. Unknown paths share one label value: the label set stays
  // bounded whatever is requested.
  const cells = new Map<string, Map<string, Map<number, HistogramCell>>>();
  const cellOf = (method: string, route: string, status: number) => {
    let byRoute = cells.get(method);
    if (!byRoute) {
      byRoute = new Map();
      cells.set(method, byRoute);
    }
    let byStatus = byRoute.get(route);
    if (!byStatus) {
      byStatus = new Map();
      byRoute.set(route, byStatus);
    }
    let cell = byStatus.get(status);
    if (!cell) {
      cell = duration.cell({ method, route, status: String(status) });
      byStatus.set(status, cell);
    }
    return cell;
  };
  app.addHook('onResponse', (req, reply, done) => {
    const method = METHODS.has(req.method) ? req.method : 'other';
    cellOf(method, req.routeOptions.url ?? 'unmatched', reply.statusCode).observe(reply.elapsedTime / 1000);
    done();
  });
}

/** Registers GET /metrics; `fleet`: also the features' series read at scrape time. */
export function registerMetricsRoute(app: FastifyInstance, ctx: AppContext, registry: Registry, { fleet }: { fleet: boolean }) {
  const checkScraper = createScrapeAuth(ctx);
  const scraped = createScrapeRegistry(fleet ? registry.metricsSources : [], (source, err) =>
    ctx.log.warn({ err, source }, 'a metrics source could not be read; its series are left out of this scrape'),
  );
  app.get('/metrics', {
    config: {
      // Authenticated in the handler (any user's bearer token), in a way that survives PostgreSQL being down.
      group: 'public',
      openapi: {
        produces: 'text/plain',
        responses: {
          200: 'The metrics, Prometheus text format 0.0.4',
          401: 'unauthenticated: no bearer token, or not the token of an active user',
        },
      },
    },
    schema: {
      tags: ['metrics'],
      operationId: 'metrics.scrape',
      summary: 'Scrape the metrics',
      description:
        'Prometheus text format; needs the bearer token of any user (Authorization: Bearer <token>). HTTP requests, jobs, ' +
        'webhook calls, monitoring polls, per-server figures and states, alerts firing, subscriptions. Answers 200 even when ' +
        'PostgreSQL or Redis is down (svc_dependency_up and svc_scrape_source_up say what is missing).',
    },
    handler: async (req, reply) => {
      await checkScraper(req.headers.authorization);
      const [postgresql, redis] = await Promise.all([
        probe(() => ctx.db.$queryRaw`SELECT 1`, 'PostgreSQL'),
        probe(() => ctx.redis.ping(), 'Redis'),
      ]);
      dependencyUp.set({ dependency: 'postgresql' }, postgresql ? 1 : 0);
      dependencyUp.set({ dependency: 'redis' }, redis ? 1 : 0);
      const down = new Set([...(postgresql ? [] : ['postgresql']), ...(redis ? [] : ['redis'])]);
      const [own, fleetText] = await Promise.all([processMetrics.metrics(), scraped.metrics(down)]);
      return reply.type(METRICS_CONTENT_TYPE).send(`${own.trimEnd()}\n${fleetText}`);
    },
  });
}
