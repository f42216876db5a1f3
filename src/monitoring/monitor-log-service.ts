// Monitor logs (DESIGN §8): the latest row per server, raw rows or per-bucket averages for charts,
// and retention in bounded batches. Every query is an index range scan on (root_server_id,
// created_at) or (created_at), so it stays cheap on a table of tens of millions of rows.
import type { Db } from '../core/db.js';
import { Prisma } from '../generated/prisma/client.js';
import { jsonSafe } from '../core/records.js';
import { ValidationError } from '../core/errors.js';
import { loadRootServer } from '../servers/root-server-store.js';

type MetricRow = {
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

const COLUMNS = Prisma.sql`root_server_id, created_at, cpu_percent, ram_used_bytes, ram_total_bytes, ram_percent,
  disk_used_bytes, disk_total_bytes, disk_percent, net_rx_bytes_per_s, net_tx_bytes_per_s, load_1, load_5, load_15`;

/** Figures as people read them: percents to 0.1, loads to 0.01, bytes and bytes/s whole. */
function rounded<T extends MetricRow>(row: T): T {
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

function metricsOut(row: MetricRow) {
  return jsonSafe(rounded(row));
}

/** The newest monitor log row of each server (one index probe per server). */
export async function latestMetrics(db: Db, serverIds: number[]) {
  if (serverIds.length === 0) return new Map<number, Omit<ReturnType<typeof metricsOut>, 'root_server_id'>>();
  const rows = await db.$queryRaw<MetricRow[]>`
    SELECT m.* FROM unnest(${serverIds}::int[]) AS s(id)
    CROSS JOIN LATERAL (
      SELECT ${COLUMNS} FROM root_server_monitor_logs
      WHERE root_server_id = s.id ORDER BY created_at DESC LIMIT 1
    ) m`;
  return new Map(
    rows.map((r) => {
      const { root_server_id, ...metrics } = metricsOut(r);
      return [root_server_id, metrics];
    }),
  );
}

export interface MonitorLogQuery {
  from: Date;
  to: Date;
  /** Bucket width in seconds; absent = raw rows. */
  bucketSeconds?: number;
  /** Time order: asc (charts) or desc (the newest first). */
  order: 'asc' | 'desc';
  limit: number;
  offset: number;
}

/** Rows (or bucket averages) of one server in [from, to), in time order (asc: the order charts draw). */
async function queryMonitorLogs(db: Db, serverId: number, q: MonitorLogQuery) {
  const range = Prisma.sql`root_server_id = ${serverId} AND created_at >= ${q.from} AND created_at < ${q.to}`;
  const direction = q.order === 'desc' ? Prisma.sql`DESC` : Prisma.sql`ASC`;
  if (!q.bucketSeconds) {
    const [rows, [count]] = await Promise.all([
      db.$queryRaw<MetricRow[]>`SELECT ${COLUMNS} FROM root_server_monitor_logs WHERE ${range}
        ORDER BY created_at ${direction} LIMIT ${q.limit} OFFSET ${q.offset}`,
      db.$queryRaw<[{ n: number }]>`SELECT count(*)::int AS n FROM root_server_monitor_logs WHERE ${range}`,
    ]);
    return { items: rows.map(metricsOut), total: count.n, limit: q.limit, offset: q.offset };
  }
  const width = Prisma.sql`make_interval(secs => ${q.bucketSeconds})`;
  const bucket = Prisma.sql`date_bin(${width}, created_at, TIMESTAMP '2000-01-01')`;
  const [rows, [count]] = await Promise.all([
    db.$queryRaw<(MetricRow & { bucket_start: Date; samples: number })[]>`
      SELECT ${serverId}::int AS root_server_id, ${bucket} AS bucket_start, count(*)::int AS samples,
        avg(cpu_percent)::float8 AS cpu_percent,
        avg(ram_used_bytes)::float8 AS ram_used_bytes, avg(ram_total_bytes)::float8 AS ram_total_bytes,
        avg(ram_percent)::float8 AS ram_percent,
        avg(disk_used_bytes)::float8 AS disk_used_bytes, avg(disk_total_bytes)::float8 AS disk_total_bytes,
        avg(disk_percent)::float8 AS disk_percent,
        avg(net_rx_bytes_per_s)::float8 AS net_rx_bytes_per_s, avg(net_tx_bytes_per_s)::float8 AS net_tx_bytes_per_s,
        avg(load_1)::float8 AS load_1, avg(load_5)::float8 AS load_5, avg(load_15)::float8 AS load_15
      FROM root_server_monitor_logs WHERE ${range}
      GROUP BY 2 ORDER BY 2 ${direction} LIMIT ${q.limit} OFFSET ${q.offset}`,
    db.$queryRaw<[{ n: number }]>`SELECT count(DISTINCT ${bucket})::int AS n FROM root_server_monitor_logs WHERE ${range}`,
  ]);
  return { items: rows.map((r) => jsonSafe(rounded(r))), total: count.n, limit: q.limit, offset: q.offset };
}

export interface RetentionResult {
  deleted: number;
  cutoff: string;
}

/**
 * Deletes monitor logs older than `days`, `batchSize` rows per statement. Each batch is its own
 * short transaction, so polls keep inserting and nothing waits on a long lock, however big the table.
 */
export async function deleteOldMonitorLogs(
  db: Db,
  days: number,
  { batchSize = 10_000, afterBatch }: { batchSize?: number; afterBatch?: (deleted: number) => unknown } = {},
): Promise<RetentionResult> {
  const cutoff = new Date(Date.now() - days * 24 * 3600 * 1000);
  let deleted = 0;
  for (;;) {
    const n = await db.$executeRaw`
      DELETE FROM root_server_monitor_logs WHERE id IN (
        SELECT id FROM root_server_monitor_logs WHERE created_at < ${cutoff} LIMIT ${batchSize})`;
    deleted += n;
    await afterBatch?.(deleted);
    if (n < batchSize) break;
  }
  return { deleted, cutoff: cutoff.toISOString() };
}

const UNIT_SECONDS = { s: 1, m: 60, h: 3600, d: 86_400 } as const;
const HOUR_MS = 3600_000;

/**
 * The monitor log of an existing root server as the API asks for it: [from, to) as ISO strings
 * (default: the last hour), and an optional bucket width such as `30s`, `5m`, `1h`, `1d`.
 */
export async function readMonitorLogs(
  db: Db,
  serverId: number,
  q: { from?: string; to?: string; bucket?: string; order: 'asc' | 'desc'; limit: number; offset: number },
) {
  await loadRootServer(db, serverId);
  const end = q.to ? new Date(q.to) : new Date();
  const start = q.from ? new Date(q.from) : new Date(end.getTime() - HOUR_MS);
  if (start >= end) throw new ValidationError('from must be before to');
  const unit = q.bucket?.slice(-1) as keyof typeof UNIT_SECONDS | undefined;
  const bucketSeconds = q.bucket && unit ? Number(q.bucket.slice(0, -1)) * UNIT_SECONDS[unit] : undefined;
  return queryMonitorLogs(db, serverId, { from: start, to: end, bucketSeconds, order: q.order, limit: q.limit, offset: q.offset });
}
