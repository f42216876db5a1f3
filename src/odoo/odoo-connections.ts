// How many PostgreSQL connections an Odoo host svc set up may hold at worst, and whether every such
// host of one PostgreSQL server fits in its max_connections (docs/odoo-hosts.md, "Connections").
//
// Odoo keeps a pool per process (db_maxconn, 64 by default) and keeps connections to every database
// it served there, idle, until the pool is full: one connection per tenant and process, since each
// tenant is its own role. A prefork host with 50 tenants asked in turn held about 50 per worker, and
// PostgreSQL's 100 were gone (bench:rollout). A worker serves one request at a time and Odoo counts
// two connections per request (its server.py), so a small pool per worker is enough: a full pool
// closes its oldest idle connection to open the next one.

/** Each prefork process (HTTP worker, cron worker, one-off odoo-bin run): one request or job, 2 connections, twice. */
export const PREFORK_DB_MAXCONN = 4;
/** The gevent process of a prefork host serves every websocket of the host at once. */
export const GEVENT_DB_MAXCONN = 8;
/** A threaded host's one process serves every request in threads (Odoo admits db_maxconn / 2 at once) ... */
const THREADED_DB_MAXCONN = 16;
/** ... and each cron thread listens on one connection while its job holds two. */
const PER_CRON_THREAD = 3;
/**
 * What svc itself may hold on a PostgreSQL server it administers: the usage round's 8 tenant
 * sessions and its maintenance connection, rollouts', deployments' and copies' sessions.
 */
export const SVC_CONNECTIONS = 20;

export interface HostProcesses {
  workers: number;
  maxCronThreads: number;
}

/** db_maxconn for every process of the host, and the gevent process's (prefork only). */
export function dbMaxconn(p: HostProcesses): { db_maxconn: number; db_maxconn_gevent: number | null } {
  if (p.workers === 0) return { db_maxconn: THREADED_DB_MAXCONN + PER_CRON_THREAD * p.maxCronThreads, db_maxconn_gevent: null };
  return { db_maxconn: PREFORK_DB_MAXCONN, db_maxconn_gevent: GEVENT_DB_MAXCONN };
}

export interface HostConnections {
  /** The running Odoo at worst: every process's pool full. */
  serving: number;
  /** Each odoo-bin run beside it (a rollout's update of one tenant): it reads the same db_maxconn. */
  perUpdate: number;
  /** `serving` and `updates` update processes. */
  total: number;
  /** How `total` is made, for messages. */
  text: string;
}

/** The host's worst case with `updates` tenants updated at once. */
export function hostConnections(p: HostProcesses, updates: number): HostConnections {
  const { db_maxconn, db_maxconn_gevent } = dbMaxconn(p);
  const serving = db_maxconn_gevent === null ? db_maxconn : (p.workers + p.maxCronThreads) * db_maxconn + db_maxconn_gevent;
  const total = serving + updates * db_maxconn;
  const processes =
    db_maxconn_gevent === null
      ? `1 threaded process × ${db_maxconn}`
      : `${p.workers} workers + ${p.maxCronThreads} cron × ${db_maxconn} + gevent ${db_maxconn_gevent}`;
  return { serving, perUpdate: db_maxconn, total, text: `${total} (${processes} + ${updates} update(s) × ${db_maxconn})` };
}

/** What a PostgreSQL server allows, read on a connection to it. */
export interface PostgresqlRoom {
  max: number;
  /** Kept for superusers (and, from 16, for pg_use_reserved_connections). */
  reserved: number;
  /** What Odoo hosts may use: max − reserved − SVC_CONNECTIONS. */
  forOdoo: number;
}

type Query = (sql: string, params?: unknown[]) => Promise<{ rows: Record<string, unknown>[] }>;

export async function postgresqlRoom(query: Query): Promise<PostgresqlRoom> {
  const { rows } = await query(
    `SELECT current_setting('max_connections')::int AS max,
            current_setting('superuser_reserved_connections')::int + COALESCE(current_setting('reserved_connections', true)::int, 0) AS reserved`,
  );
  const max = Number(rows[0]!.max);
  const reserved = Number(rows[0]!.reserved);
  return { max, reserved, forOdoo: max - reserved - SVC_CONNECTIONS };
}

/** Client connections open on the server now (whoever holds them). */
export async function connectionsInUse(query: Query): Promise<number> {
  const { rows } = await query("SELECT count(*)::int AS n FROM pg_catalog.pg_stat_activity WHERE backend_type = 'client backend'");
  return Number(rows[0]!.n);
}

export interface OtherHost extends HostProcesses {
  id: number;
}

/**
 * Why the host cannot run as sized beside the other hosts of the PostgreSQL server (the numbers),
 * or null when every host's worst case fits. Each host counts `updates` update processes (the
 * rollout settings' tenants_per_host).
 */
export function sizingRefusal(
  where: string,
  room: PostgresqlRoom,
  host: OtherHost,
  others: readonly OtherHost[],
  updates: number,
): string | null {
  const mine = hostConnections(host, updates);
  const theirs = others.map((o) => ({ id: o.id, ...hostConnections(o, updates) }));
  const needed = mine.total + theirs.reduce((n, o) => n + o.total, 0);
  if (needed <= room.forOdoo) return null;
  const besides =
    theirs.length === 0
      ? 'no other Odoo host uses it'
      : `the other Odoo hosts using it ${theirs.reduce((n, o) => n + o.total, 0)} (${theirs.map((o) => `root server ${o.id}: ${o.total}`).join(', ')})`;
  return (
    `PostgreSQL at ${where} allows ${room.max} connections (${room.reserved} reserved for superusers, ${SVC_CONNECTIONS} kept for svc: ` +
    `${room.forOdoo} for Odoo hosts); root server ${host.id} would need up to ${mine.text}, ${besides}: ${needed} > ${room.forOdoo}. ` +
    'Raise max_connections on that server, give this host fewer workers or cron threads, lower tenants_per_host, or use another PostgreSQL server; nothing was changed'
  );
}
