// The alerts' series: notices decided by this process (a counter), and the alerts firing now
// (read from the database at scrape time).
import type { AppContext } from '../context.js';
import { counter, type MetricsSource } from '../core/metrics.js';

export const alertNotices = counter({
  name: 'svc_alert_notices_total',
  help: 'Alert notices decided by this process: fired, repeated, resolved, and held (an alert opened silenced: maintenance or its server offline)',
  labelNames: ['event'],
});

export function alertMetrics(ctx: Pick<AppContext, 'db'>): MetricsSource[] {
  return [
    {
      name: 'alerts',
      needs: 'postgresql',
      gauges: [
        {
          name: 'svc_alerts_firing',
          help: 'Alerts firing now, by metric and whether they are silenced',
          labelNames: ['metric', 'silenced'],
        },
      ],
      async read() {
        const rows = await ctx.db.alert.groupBy({ by: ['metric', 'silenced'], where: { state: 'firing' }, _count: { _all: true } });
        return {
          svc_alerts_firing: rows.map((r) => ({ labels: { metric: r.metric, silenced: String(r.silenced) }, value: r._count._all })),
        };
      },
    },
  ];
}
