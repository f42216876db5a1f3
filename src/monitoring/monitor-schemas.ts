// Monitoring shapes (DESIGN §8): a monitor-log row, per-bucket averages, and the intervals.
import { z } from 'zod';
import { timestamp } from '../core/http/schemas.js';

export const MONITOR_INTERVALS = ['5s', '10s', '30s', '1m', '5m'] as const;
export type MonitorInterval = (typeof MONITOR_INTERVALS)[number];

export const INTERVAL_MS: Record<MonitorInterval, number> = {
  '5s': 5_000,
  '10s': 10_000,
  '30s': 30_000,
  '1m': 60_000,
  '5m': 300_000,
};

const metricFields = {
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

export const monitorLogOut = z.object({ root_server_id: z.number().int(), created_at: timestamp, ...metricFields });

export const monitorBucketOut = z.object({
  root_server_id: z.number().int(),
  bucket_start: timestamp,
  samples: z.number().int().describe('Polls averaged into this bucket'),
  ...metricFields,
});
