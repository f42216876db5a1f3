// Metrics for Prometheus: GET /metrics on the API (and on METRICS_PORT in a worker-only process),
// the HTTP instruments, and the jobs and subscriptions series. Other features give their own
// series in their manifests (`metrics`).
import type { Feature } from '../feature.js';
import { startMetricsListener } from './metrics-listener.js';
import { instrumentHttp, registerMetricsRoute } from './metrics-routes.js';
import { ownMetrics } from './metrics-sources.js';

export const metrics: Feature = {
  name: 'metrics',
  routes(app, ctx, registry) {
    instrumentHttp(app);
    registerMetricsRoute(app, ctx, registry, { fleet: true });
  },
  metrics: ownMetrics,
  // A worker-only process has no API: it serves its own metrics on METRICS_PORT.
  background: (ctx, registry) =>
    ctx.config.SVC_ROLE === 'worker' && ctx.config.METRICS_PORT > 0
      ? startMetricsListener(ctx, registry)
      : Promise.resolve({ async close() {} }),
};
