// The monitoring figures a root server carries as its own columns and fields: the polling intervals
// (monitor_update_interval), the metric columns of its monitor log (METRIC_COLUMNS, the one list
// that every query, write and schema of them uses), and the newest row of each server
// (latest_metrics). Monitoring writes them; servers shows them without importing monitoring.
import { z } from 'zod';
import type { Db } from '../core/db.js';
import { timestamp } from '../core/http/schemas.js';
import { jsonSafe } from '../core/records.js';
import { Prisma } from '../generated/prisma/client.js';

export const MONITOR_INTERVALS = ['5s', '10s', '30s', '1m', '5m'] as const;
export type MonitorInterval = (typeof MONITOR_INTERVALS)[number];

export const INTERVAL_MS: Record<MonitorInterval, number> = {
  '5s': 5_000,
  '10s': 10_000,
  '30s': 30_000,
  '1m': 60_000,
  '5m': 300_000,
};

/** The interval in milliseconds; a value the column should not hold counts as the default, 1m. */
export function intervalMs(interval: string): number {
  return INTERVAL_MS[(MONITOR_INTERVALS as readonly string[]).includes(interval) ? (interval as MonitorInterval) : '1m'];
}

/**
 * The figures of a monitor-log row: the one list of its metric columns, in their order, each with
 * its kind. `bytes` are stored as bigint and shown whole, like `rate` (bytes/s, a float); a
 * `percent` is shown to 0.1, a `load` to 0.01.
 */
export const METRIC_COLUMNS = {
  cpu_percent: 'percent',
  ram_used_bytes: 'bytes',
  ram_total_bytes: 'bytes',
  ram_percent: 'percent',
  disk_used_bytes: 'bytes',
  disk_total_bytes: 'bytes',
  disk_percent: 'percent',
  net_rx_bytes_per_s: 'rate',
  net_tx_bytes_per_s: 'rate',
  load_1: 'load',
  load_5: 'load',
  load_15: 'load',
} as const satisfies Record<string, 'percent' | 'bytes' | 'rate' | 'load'>;

type MetricName = keyof typeof METRIC_COLUMNS;
export const METRIC_NAMES = Object.keys(METRIC_COLUMNS) as MetricName[];

/** One sample's figures. */
export type Metrics = Record<MetricName, number>;

/** The metric columns, for a query's SELECT or INSERT list. */
export const METRIC_COLUMN_LIST = Prisma.raw(METRIC_NAMES.join(', '));

/** The figures as the API shows them (every one a number). */
export const metricFields = Object.fromEntries(METRIC_NAMES.map((name) => [name, z.number()])) as Record<MetricName, z.ZodNumber>;

/** A root server's latest_metrics: its newest monitor-log row. */
export const latestMetricsOut = z.object({ created_at: timestamp, ...metricFields });

/** A monitor-log row as PostgreSQL answers it (bigint columns as bigint). */
export type MetricRow = { root_server_id: number; created_at: Date } & Record<MetricName, number | bigint>;

const SHOWN_STEP = { percent: 0.1, load: 0.01, bytes: 1, rate: 1 } as const;

/** Figures as people read them: percents to 0.1, loads to 0.01, bytes and bytes/s whole. */
export function rounded<T extends MetricRow>(row: T): T & Metrics {
  const out: Record<string, unknown> = { ...row };
  for (const name of METRIC_NAMES) {
    const step = SHOWN_STEP[METRIC_COLUMNS[name]];
    const value = Number(row[name]);
    out[name] = step === 1 ? Math.round(value) : Number((Math.round(value / step) * step).toFixed(step === 0.1 ? 1 : 2));
  }
  return out as T & Metrics;
}

export function metricsRowOut(row: MetricRow) {
  return jsonSafe(rounded(row));
}

/** The newest monitor log row of each server (one index probe per server). */
export async function latestMetrics(db: Db, serverIds: number[]) {
  if (serverIds.length === 0) return new Map<number, Omit<ReturnType<typeof metricsRowOut>, 'root_server_id'>>();
  const rows = await db.$queryRaw<MetricRow[]>`
    SELECT m.* FROM unnest(${serverIds}::int[]) AS s(id)
    CROSS JOIN LATERAL (
      SELECT root_server_id, created_at, ${METRIC_COLUMN_LIST} FROM root_server_monitor_logs
      WHERE root_server_id = s.id ORDER BY created_at DESC LIMIT 1
    ) m`;
  return new Map(
    rows.map((r) => {
      const { root_server_id, ...metrics } = metricsRowOut(r);
      return [root_server_id, metrics];
    }),
  );
}
