// Monitor logs: raw rows or per-bucket averages for charts,
// and retention in bounded batches. Every query is an index range scan on (root_server_id,
// created_at) or (created_at), so it stays cheap on a table of tens of millions of rows.
import type { AppContext } from '../context.js';
import type { Db } from '../core/db.js';
import { Prisma } from '../generated/prisma/client.js';
import { jsonSafe } from '../core/records.js';
import {
  assertOnePosition,
  boundedTotal,
  type Column,
  cursorSecret,
  decodeCursor,
  encodeCursor,
  estimateRows,
  type Page,
} from '../core/lists.js';
import { ValidationError } from '../core/errors.js';
import { loadRootServer, METRIC_COLUMN_LIST, METRIC_NAMES, type MetricRow, metricsRowOut, rounded } from '../servers/index.js';

export interface MonitorLogQuery extends Page {
  from: Date;
  to: Date;
  /** Bucket width in seconds; absent = raw rows. */
  bucketSeconds?: number;
  /** Time order: asc (charts) or desc (the newest first). */
  order: 'asc' | 'desc';
}

const TABLE = 'root_server_monitor_logs';
/** Each metric column's average over a bucket, under the column's name. */
const BUCKET_AVERAGES = Prisma.raw(METRIC_NAMES.map((name) => `avg(${name})::float8 AS ${name}`).join(', '));
const RESOURCE = 'root-servers/monitor-logs';
const RAW_KEY_COLUMNS: Column[] = [
  { type: 'timestamp', nullable: false },
  { type: 'bigint', nullable: false },
];

/**
 * Rows (or bucket averages) of one server in [from, to), in time order (asc: the order charts
 * draw). A raw page's cursor is its last row's (created_at, id); a bucket page's, its last bucket.
 */
async function queryMonitorLogs(ctx: Pick<AppContext, 'db' | 'secretBox'>, serverId: number, q: MonitorLogQuery) {
  assertOnePosition(q);
  const { db } = ctx;
  const secret = cursorSecret(ctx.secretBox);
  const range = Prisma.sql`root_server_id = ${serverId} AND created_at >= ${q.from} AND created_at < ${q.to}`;
  const desc = q.order === 'desc';
  const direction = desc ? Prisma.sql`DESC` : Prisma.sql`ASC`;
  const page = { limit: q.limit, offset: q.offset };
  if (!q.bucketSeconds) {
    const key = { resource: RESOURCE, sort: desc ? '-created_at' : 'created_at' };
    const [at, id] = q.cursor ? decodeCursor(secret, q.cursor, key, RAW_KEY_COLUMNS) : [];
    const after = !q.cursor
      ? Prisma.empty
      : desc
        ? Prisma.sql`AND created_at <= ${at} AND (created_at < ${at} OR id < ${id})`
        : Prisma.sql`AND created_at >= ${at} AND (created_at > ${at} OR id > ${id})`;
    const [rows, total] = await Promise.all([
      db.$queryRaw<
        (MetricRow & { id: bigint })[]
      >`SELECT id, root_server_id, created_at, ${METRIC_COLUMN_LIST} FROM root_server_monitor_logs WHERE ${range} ${after}
        ORDER BY created_at ${direction}, id ${direction} LIMIT ${q.limit + 1} OFFSET ${q.offset}`,
      boundedTotal(
        async (limit) => {
          const [count] = await db.$queryRaw<[{ n: number }]>`
            SELECT count(*)::int AS n FROM (SELECT 1 FROM root_server_monitor_logs WHERE ${range} LIMIT ${limit}) s`;
          return count.n;
        },
        () => estimateRows(db, TABLE, range),
      ),
    ]);
    const items = rows.slice(0, q.limit);
    const last = items.at(-1);
    const next = rows.length > q.limit && last ? encodeCursor(secret, key, [last.created_at, last.id]) : null;
    return { items: items.map(({ id: _, ...row }) => metricsRowOut(row)), ...total, ...page, next_cursor: next };
  }
  const key = { resource: RESOURCE, sort: `bucket=${q.bucketSeconds}s${desc ? ' desc' : ''}` };
  const [start] = q.cursor ? (decodeCursor(secret, q.cursor, key, RAW_KEY_COLUMNS.slice(0, 1)) as Date[]) : [];
  // The buckets after the cursor's: those starting a width later (asc), or before it (desc).
  const after = !start
    ? Prisma.empty
    : desc
      ? Prisma.sql`AND created_at < ${start}`
      : Prisma.sql`AND created_at >= ${new Date(start.getTime() + q.bucketSeconds * 1000)}`;
  const width = Prisma.sql`make_interval(secs => ${q.bucketSeconds})`;
  const bucket = Prisma.sql`date_bin(${width}, created_at, TIMESTAMP '2000-01-01')`;
  // One pass over the server's rows: the number of buckets comes with them (a window over the
  // groups, before LIMIT), instead of a second scan to count them.
  const rows = await db.$queryRaw<(MetricRow & { bucket_start: Date; samples: number; buckets: number })[]>`
      SELECT ${serverId}::int AS root_server_id, ${bucket} AS bucket_start, count(*)::int AS samples, ${BUCKET_AVERAGES},
        count(*) OVER ()::int AS buckets
      FROM root_server_monitor_logs WHERE ${range} ${after}
      GROUP BY 2 ORDER BY 2 ${direction} LIMIT ${q.limit + 1} OFFSET ${q.offset}`;
  let total = rows[0]?.buckets ?? 0;
  // Past a cursor (or past the end) the window counted only the buckets left: count them all.
  if (start || (rows.length === 0 && q.offset > 0)) {
    const [count] = await db.$queryRaw<
      [{ n: number }]
    >`SELECT count(DISTINCT ${bucket})::int AS n FROM root_server_monitor_logs WHERE ${range}`;
    total = count.n;
  }
  const items = rows.slice(0, q.limit);
  const last = items.at(-1);
  const next = rows.length > q.limit && last ? encodeCursor(secret, key, [last.bucket_start]) : null;
  return {
    items: items.map(({ buckets: _, ...r }) => jsonSafe(rounded(r))),
    total,
    total_is_estimate: false,
    ...page,
    next_cursor: next,
  };
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
  ctx: Pick<AppContext, 'db' | 'secretBox'>,
  serverId: number,
  q: Page & { from?: string; to?: string; bucket?: string; order: 'asc' | 'desc' },
) {
  await loadRootServer(ctx.db, serverId);
  const end = q.to ? new Date(q.to) : new Date();
  const start = q.from ? new Date(q.from) : new Date(end.getTime() - HOUR_MS);
  if (start >= end) throw new ValidationError('from must be before to');
  const unit = q.bucket?.slice(-1) as keyof typeof UNIT_SECONDS | undefined;
  const bucketSeconds = q.bucket && unit ? Number(q.bucket.slice(0, -1)) * UNIT_SECONDS[unit] : undefined;
  return queryMonitorLogs(ctx, serverId, {
    from: start,
    to: end,
    bucketSeconds,
    order: q.order,
    limit: q.limit,
    offset: q.offset,
    cursor: q.cursor,
  });
}
