// The monitoring figures a root server carries as its own columns and fields: the polling intervals
// (monitor_update_interval), the figures of a monitor-log row, and the newest row of each server
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

export const metricFields = {
  cpu_percent: z.number(),
  ram_used_bytes: z.number(),
  ram_total_bytes: z.number(),
  ram_percent: z.number(),
  disk_used_bytes: z.number(),
  disk_total_bytes: z.number(),
  disk_percent: z.number(),
  net_rx_bytes_per_s: z.number(),
  net_tx_bytes_per_s: z.number(),
  load_1: z.number(),
  load_5: z.number(),
  load_15: z.number(),
};

/** A root server's latest_metrics: its newest monitor-log row. */
export const latestMetricsOut = z.object({ created_at: timestamp, ...metricFields });

export type MetricRow = {
  root_server_id: number;
  created_at: Date;
  cpu_percent: number;
  ram_used_bytes: bigint | number;
  ram_total_bytes: bigint | number;
  ram_percent: number;
  disk_used_bytes: bigint | number;
  disk_total_bytes: bigint | number;
  disk_percent: number;
  net_rx_bytes_per_s: number;
  net_tx_bytes_per_s: number;
  load_1: number;
  load_5: number;
  load_15: number;
};

export const METRIC_ROW_COLUMNS = Prisma.sql`root_server_id, created_at, cpu_percent, ram_used_bytes, ram_total_bytes, ram_percent,
  disk_used_bytes, disk_total_bytes, disk_percent, net_rx_bytes_per_s, net_tx_bytes_per_s, load_1, load_5, load_15`;

/** Figures as people read them: percents to 0.1, loads to 0.01, bytes and bytes/s whole. */
export function rounded<T extends MetricRow>(row: T): T {
  const to = (x: number, step: number) => Math.round(Number(x) / step) * step;
  const tenth = (x: number) => Number(to(x, 0.1).toFixed(1));
  const hundredth = (x: number) => Number(to(x, 0.01).toFixed(2));
  return {
    ...row,
    cpu_percent: tenth(row.cpu_percent),
    ram_percent: tenth(row.ram_percent),
    disk_percent: tenth(row.disk_percent),
    ram_used_bytes: Math.round(Number(row.ram_used_bytes)),
    ram_total_bytes: Math.round(Number(row.ram_total_bytes)),
    disk_used_bytes: Math.round(Number(row.disk_used_bytes)),
    disk_total_bytes: Math.round(Number(row.disk_total_bytes)),
    net_rx_bytes_per_s: Math.round(row.net_rx_bytes_per_s),
    net_tx_bytes_per_s: Math.round(row.net_tx_bytes_per_s),
    load_1: hundredth(row.load_1),
    load_5: hundredth(row.load_5),
    load_15: hundredth(row.load_15),
  };
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
      SELECT ${METRIC_ROW_COLUMNS} FROM root_server_monitor_logs
      WHERE root_server_id = s.id ORDER BY created_at DESC LIMIT 1
    ) m`;
  return new Map(
    rows.map((r) => {
      const { root_server_id, ...metrics } = metricsRowOut(r);
      return [root_server_id, metrics];
    }),
  );
}
