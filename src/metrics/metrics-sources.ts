// The metrics feature's own fleet series: jobs waiting, running, failed… per queue (BullMQ's
// counts in Redis) and subscriptions by state and usage_state (one grouped count).
import type { AppContext } from '../context.js';
import type { MetricsSource, Sample } from '../core/metrics.js';
import type { Registry } from '../feature.js';

const JOB_STATES = ['waiting', 'active', 'delayed', 'prioritized', 'waiting-children', 'completed', 'failed'] as const;

export function ownMetrics(ctx: Pick<AppContext, 'db' | 'queues'>, registry: Registry): MetricsSource[] {
  return [
    {
      name: 'jobs',
      needs: 'redis',
      gauges: [
        { name: 'svc_jobs', help: 'Jobs in each queue by state (completed and failed: those still kept)', labelNames: ['queue', 'state'] },
      ],
      async read() {
        const queues = registry.jobs.queueNames();
        const counts = await Promise.all(queues.map((q) => ctx.queues.queue(q).getJobCounts(...JOB_STATES)));
        const samples: Sample[] = queues.flatMap((queue, i) =>
          JOB_STATES.map((state) => ({ labels: { queue, state }, value: counts[i]![state] ?? 0 })),
        );
        return { svc_jobs: samples };
      },
    },
    {
      name: 'subscriptions',
      needs: 'postgresql',
      gauges: [{ name: 'svc_subscriptions', help: 'Subscriptions by state and usage_state', labelNames: ['state', 'usage_state'] }],
      async read() {
        const rows = await ctx.db.subscription.groupBy({ by: ['state', 'usage_state'], _count: { _all: true } });
        return { svc_subscriptions: rows.map((r) => ({ labels: { state: r.state, usage_state: r.usage_state }, value: r._count._all })) };
      },
    },
  ];
}
