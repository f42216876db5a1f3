// What placement reads of the hosts, in one statement: each host's record, its newest monitoring
// sample, what is placed on it (subscriptions living there or being deployed there, standbys, the
// moves to it not switched yet) and the maintenance window it is in. Read again for one host under its lock (placement-service.ts).
import type { Db, DbTx } from '../core/db.js';
import { Prisma } from '../generated/prisma/client.js';
import { DEFAULT_TENANT_DISK_BYTES, type HostFigures } from './placement-capacity.js';

/** The host's own columns, as placement keeps them. */
type HostColumns = Pick<
  HostFigures,
  | 'id'
  | 'name'
  | 'ip'
  | 'state'
  | 'odoo_state'
  | 'server_state'
  | 'cordoned_at'
  | 'cordon_reason'
  | 'capacity_tenants'
  | 'capacity_memory_bytes'
  | 'capacity_disk_bytes'
  | 'memory_bytes'
>;

interface Row extends HostColumns {
  ram_total_bytes: bigint | null;
  disk_total_bytes: bigint | null;
  disk_used_bytes: bigint | null;
  sampled_at: Date | null;
  subs: bigint;
  subs_since: bigint;
  last_placed_at: Date | null;
  standbys: bigint;
  standbys_since: bigint;
  moving_in: bigint | null;
  window_id: number | null;
  window_reason: string | null;
}

/** A subscription that holds room on its host: its database lives there, or a deployment placed it there. */
export const HOLDS_ROOM = Prisma.sql`((s.state = 'deploying' AND s.placed_at IS NOT NULL)
  OR (s.database_created_at IS NOT NULL AND s.database_dropped_at IS NULL))`;

/**
 * The figures of the hosts `ids` (the PostgreSQL server paired with each), at `now`. `exceptSub`:
 * a subscription being placed again is not counted where its earlier attempt put it.
 */
export async function loadHosts(
  db: Db | DbTx,
  hosts: readonly { root_server_id: number; postgresql_server_id: number }[],
  now: Date,
  exceptSub = 0,
): Promise<HostFigures[]> {
  if (hosts.length === 0) return [];
  const ids = hosts.map((h) => h.root_server_id);
  const rows = await db.$queryRaw<Row[]>`
    SELECT r.id, r.name, r.ip, r.state::text, r.odoo_state::text, r.server_state::text, r.cordoned_at, r.cordon_reason,
           r.capacity_tenants, r.capacity_memory_bytes, r.capacity_disk_bytes, r.memory_bytes,
           m.ram_total_bytes, m.disk_total_bytes, m.disk_used_bytes, m.created_at AS sampled_at,
           sub.n AS subs, sub.since AS subs_since, sub.last AS last_placed_at,
           sb.n AS standbys, sb.since AS standbys_since, mi.n AS moving_in,
           w.id AS window_id, w.reason AS window_reason
      FROM root_servers r
      LEFT JOIN LATERAL (
        SELECT ram_total_bytes, disk_total_bytes, disk_used_bytes, created_at
          FROM root_server_monitor_logs WHERE root_server_id = r.id ORDER BY created_at DESC LIMIT 1) m ON true
      LEFT JOIN LATERAL (
        SELECT count(*) AS n, count(*) FILTER (WHERE s.placed_at > m.created_at) AS since, max(s.placed_at) AS last
          FROM subscriptions s WHERE s.root_server_id = r.id AND s.id <> ${exceptSub} AND ${HOLDS_ROOM}) sub ON true
      LEFT JOIN LATERAL (
        SELECT count(*) AS n, count(*) FILTER (WHERE d.created_at > m.created_at) AS since
          FROM standby_databases d WHERE d.root_server_id = r.id) sb ON true
      -- A move to the host holds its room from when it is recorded (a drain's batch, an operator's move) to its switch.
      LEFT JOIN (
        SELECT to_root_server_id, count(*) AS n FROM subscription_moves
         WHERE state = 'moving' AND switched_at IS NULL AND subscription_id <> ${exceptSub} GROUP BY to_root_server_id) mi
        ON mi.to_root_server_id = r.id
      LEFT JOIN LATERAL (
        SELECT id, reason FROM maintenance_windows
         WHERE r.id = ANY(root_server_ids) AND starts_at <= ${now} AND ends_at > ${now} ORDER BY id LIMIT 1) w ON true
     WHERE r.id = ANY(${ids}::int[])`;
  const byId = new Map(rows.map((r) => [r.id, r]));
  return hosts.flatMap((h) => {
    const r = byId.get(h.root_server_id);
    if (!r) return [];
    const {
      ram_total_bytes,
      disk_total_bytes,
      disk_used_bytes,
      sampled_at,
      subs,
      subs_since,
      last_placed_at,
      standbys,
      standbys_since,
      moving_in,
      window_id,
      window_reason,
      ...columns
    } = r;
    // With no sample, everything counts as placed after it; a tenant moving in is being copied there.
    const incoming = Number(moving_in ?? 0);
    const since = (sampled_at ? Number(subs_since) + Number(standbys_since) : Number(subs) + Number(standbys)) + incoming;
    return [
      {
        ...columns,
        postgresql_server_id: h.postgresql_server_id,
        sample:
          sampled_at && ram_total_bytes !== null
            ? { ram_total_bytes, disk_total_bytes: disk_total_bytes!, disk_used_bytes: disk_used_bytes!, at: sampled_at }
            : null,
        tenants: Number(subs) + Number(standbys) + incoming,
        tenants_since_sample: since,
        last_placed_at,
        maintenance:
          window_id === null ? null : `maintenance window ${window_id}${window_reason ? ` (${window_reason.slice(0, 100)})` : ''}`,
      },
    ];
  });
}

const estimates = new Map<string, { at: number; bytes: number }>();
/** Tenants' sizes are re-read this often at most (the usage round measures every 15 minutes by default). */
const ESTIMATE_MAX_AGE_MS = 60_000;

/**
 * What a new tenant is expected to take on disk: the mean size the usage round measured (database
 * and filestore) of the tenants on these hosts, else DEFAULT_TENANT_DISK_BYTES. Cached a minute.
 */
export async function tenantDiskEstimate(db: Db | DbTx, hostIds: readonly number[]): Promise<number> {
  const key = [...hostIds].sort((a, b) => a - b).join(',');
  const cached = estimates.get(key);
  if (cached && Date.now() - cached.at < ESTIMATE_MAX_AGE_MS) return cached.bytes;
  const [row] = await db.$queryRaw<{ mean: number | null }[]>`
    SELECT avg(COALESCE((s.usage->>'db_size_bytes')::float8, 0) + COALESCE((s.usage->>'filestore_bytes')::float8, 0))::float8 AS mean
      FROM subscriptions s
     WHERE s.root_server_id = ANY(${[...hostIds]}::int[]) AND ${HOLDS_ROOM} AND s.usage ? 'db_size_bytes'`;
  const bytes = row?.mean && row.mean > 0 ? Math.round(row.mean) : DEFAULT_TENANT_DISK_BYTES;
  if (estimates.size > 1000) estimates.clear();
  estimates.set(key, { at: Date.now(), bytes });
  return bytes;
}
