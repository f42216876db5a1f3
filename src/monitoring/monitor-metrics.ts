// Monitoring's series. On the poll path only a counter and a histogram observation per due time
// (children bound once: no label hashing per poll); what the runners hold is read when scraped;
// the fleet's latest figures and states come from the database at scrape time (MetricsSource).
import type { AppContext } from '../context.js';
import { counter, gauge, histogram, type MetricsSource, type Sample } from '../core/metrics.js';
import type { PollResult } from './monitor-poll.js';

const polls = counter({
  name: 'svc_monitor_polls_total',
  help: 'Due times of monitored servers handled by this process, by outcome (ok, failed; skipped: recorded by another worker, not monitored, backing off)',
  labelNames: ['outcome'],
});
const pollsBy: Record<PollResult['outcome'], ReturnType<typeof polls.labels>> = {
  ok: polls.labels('ok'),
  failed: polls.labels('failed'),
  skipped: polls.labels('skipped'),
};
const lateness = histogram({
  name: 'svc_monitor_poll_lateness_seconds',
  help: 'How late a recorded poll is: its sample time (streamed) or its recording (one-off poll) minus its due time',
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
});

/** One due time handled; `lateMs` from the due time to the sample (not observed for a skipped one). */
export function recordPoll(outcome: PollResult['outcome'], lateMs: number) {
  pollsBy[outcome].inc();
  if (outcome !== 'skipped') lateness.observe(Math.max(0, lateMs) / 1000);
}

/** What a monitor runner of this process holds, read at scrape time. */
export interface RunnerLoad {
  held(): number[];
  standby(): number[];
  connections(): number;
}
const runners = new Set<RunnerLoad>();
const sum = (f: (r: RunnerLoad) => number) => [...runners].reduce((n, r) => n + f(r), 0);

gauge({
  name: 'svc_monitor_leases_held',
  help: 'Monitored servers whose lease this process holds (it polls them)',
  collect() {
    this.set(sum((r) => r.held().length));
  },
});
gauge({
  name: 'svc_monitor_standbys',
  help: 'Monitored servers this process keeps a warm standby for (a connection and an idle stream)',
  collect() {
    this.set(sum((r) => r.standby().length));
  },
});
gauge({
  name: 'svc_monitor_ssh_connections',
  help: "SSH connections to monitored servers this process has open or is opening (held servers' and standbys')",
  collect() {
    this.set(sum((r) => r.connections()));
  },
});

/** Counts a runner in the gauges above until `untrack` is called. */
export function trackRunner(runner: RunnerLoad): () => void {
  runners.add(runner);
  return () => runners.delete(runner);
}

interface ServerRow {
  id: number;
  name: string;
  state: string;
  cpu_percent: number | null;
  ram_percent: number | null;
  disk_percent: number | null;
  load_1: number | null;
}

/**
 * Per monitored server (labels id and name: its name, else its ip) its state, and the latest
 * sample's figures while it is online or warning (an offline server's last figures are old);
 * servers by state over every root server. Two queries, the latest row found per server by the
 * (root_server_id, created_at) index.
 */
export function monitorMetrics(ctx: Pick<AppContext, 'db'>): MetricsSource[] {
  const perServer = ['id', 'name'] as const;
  return [
    {
      name: 'monitoring',
      needs: 'postgresql',
      gauges: [
        { name: 'svc_servers', help: 'Root servers by server_state (every root server)', labelNames: ['state'] },
        {
          name: 'svc_server_state',
          help: 'The state of each monitored server (1 for its current state)',
          labelNames: [...perServer, 'state'],
        },
        { name: 'svc_server_cpu_usage_ratio', help: 'CPU busy, 0–1, latest sample', labelNames: perServer },
        { name: 'svc_server_memory_usage_ratio', help: 'RAM used (MemTotal − MemAvailable), 0–1, latest sample', labelNames: perServer },
        { name: 'svc_server_disk_usage_ratio', help: 'Root file system used, 0–1, latest sample', labelNames: perServer },
        { name: 'svc_server_load1', help: '1-minute load average, latest sample', labelNames: perServer },
      ],
      async read() {
        const [rows, states] = await Promise.all([
          ctx.db.$queryRaw<ServerRow[]>`
            SELECT r.id, left(coalesce(nullif(btrim(r.name), ''), r.ip), 100) AS name, r.server_state::text AS state,
              m.cpu_percent, m.ram_percent, m.disk_percent, m.load_1
            FROM root_servers r LEFT JOIN LATERAL (
              SELECT cpu_percent, ram_percent, disk_percent, load_1 FROM root_server_monitor_logs
              WHERE root_server_id = r.id ORDER BY created_at DESC LIMIT 1) m ON r.server_state IN ('online', 'warning')
            WHERE r.monitoring_enabled`,
          ctx.db.$queryRaw<
            { state: string; n: number }[]
          >`SELECT server_state::text AS state, count(*)::int AS n FROM root_servers GROUP BY 1`,
        ]);
        const out: Record<string, Sample[]> = {
          svc_servers: states.map((s) => ({ labels: { state: s.state }, value: s.n })),
          svc_server_state: [],
          svc_server_cpu_usage_ratio: [],
          svc_server_memory_usage_ratio: [],
          svc_server_disk_usage_ratio: [],
          svc_server_load1: [],
        };
        for (const r of rows) {
          const labels = { id: r.id, name: r.name };
          out.svc_server_state!.push({ labels: { ...labels, state: r.state }, value: 1 });
          if (r.cpu_percent === null) continue;
          out.svc_server_cpu_usage_ratio!.push({ labels, value: r.cpu_percent / 100 });
          out.svc_server_memory_usage_ratio!.push({ labels, value: (r.ram_percent ?? 0) / 100 });
          out.svc_server_disk_usage_ratio!.push({ labels, value: (r.disk_percent ?? 0) / 100 });
          out.svc_server_load1!.push({ labels, value: r.load_1 ?? 0 });
        }
        return out;
      },
    },
  ];
}
