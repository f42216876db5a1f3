// Whether a subscription can move where it is asked to (409 naming why otherwise): a running
// instance on an Odoo host, to another host that runs the same Odoo version, where no database has
// its name (on another PostgreSQL server) and there is room for it: the host's disk for the
// filestore, the PostgreSQL server's for the database. Two hosts of one PostgreSQL server share
// the database itself: only a database with a role of its own moves between them.
import type { AppContext } from '../context.js';
import { type DiskSpace, diskSpaceScript, parseDiskSpace } from '../core/disk-space.js';
import { ConflictError, NotFoundError } from '../core/errors.js';
import type { PostgresqlServer, RootServer, SubscriptionMove } from '../generated/prisma/client.js';
import { filestorePath, onServer, PLACEMENT_INCLUDE, placementOf, runOnOdooHost } from '../instances/index.js';
import { basePathOf } from '../servers/index.js';
import { loadOdooHost, odooLayout } from '../odoo/index.js';
import { dataDiskOf, findDatabase } from '../postgresql/index.js';
import type { Usage } from '../subscriptions/index.js';
import { filestoreBytesScript } from './move-programs.js';

/** Room asked on the target beyond the instance's size (its database is rebuilt there, with indexes). */
const HEADROOM = 1.5;
const STEP_MS = 5 * 60_000;
/** A usage round's filestore size younger than this stands for the filestore (the margin covers a day's growth). */
const MEASURED_FILESTORE_MS = 24 * 3600_000;

/** The filestore's size from the last usage round when it is recent: `du` over a large filestore takes minutes. */
export function measuredFilestoreBytes(usage: unknown, now = Date.now()): number | null {
  const u = usage as Partial<Usage> | null;
  if (typeof u?.filestore_bytes !== 'number' || typeof u.measured_at !== 'string') return null;
  return now - Date.parse(u.measured_at) <= MEASURED_FILESTORE_MS ? u.filestore_bytes : null;
}

export interface Target {
  postgresql_server_id?: number | undefined;
  root_server_id?: number | undefined;
}

export interface MoveEnds {
  from: { pg: PostgresqlServer; host: RootServer };
  to: { pg: PostgresqlServer; host: RootServer };
}

type Ctx = Pick<AppContext, 'db' | 'secretBox' | 'config'>;

/** A running subscription with an Odoo host and nothing else under way: where it is now. */
export async function movableFrom(ctx: Ctx, id: number) {
  const sub = await ctx.db.subscription.findUnique({ where: { id }, include: PLACEMENT_INCLUDE });
  if (!sub) throw new NotFoundError('Subscription');
  if (sub.state !== 'running' || !sub.database_name || !sub.database_created_at) {
    throw new ConflictError(`Subscription ${id} is ${sub.state}: only the instance of a running subscription is moved`, {
      state: sub.state,
    });
  }
  if (sub.operation) throw new ConflictError(`Subscription ${id} is busy with a ${sub.operation}: move it once that has ended`);
  if (!sub.database_template) throw new ConflictError(`Subscription ${id} has no database template: where its database lives is unknown`);
  const place = placementOf(sub);
  if (!place.host) throw new ConflictError(`Subscription ${id} has no Odoo host: only an instance served by one is moved`);
  return { sub: { ...sub, database_name: sub.database_name }, from: { pg: place.pg, host: place.host } };
}

/** The Odoo host asked for (or the one host on the PostgreSQL server asked for) and its server. */
async function targetOf(ctx: Ctx, target: Target, versionId: number | null) {
  let hostId = target.root_server_id;
  if (hostId === undefined) {
    const hosts = await ctx.db.rootServer.findMany({
      where: { odoo_postgresql_server_id: target.postgresql_server_id, odoo_state: 'running', odoo_version_id: versionId },
      select: { id: true },
    });
    if (hosts.length !== 1) {
      throw new ConflictError(
        `PostgreSQL server ${target.postgresql_server_id} is used by ${hosts.length === 0 ? 'no' : hosts.length} running Odoo host(s) of the same version: name the one to move to (root_server_id)`,
      );
    }
    hostId = hosts[0]!.id;
  }
  const host = await loadOdooHost(ctx.db, hostId);
  if (host.odoo_state !== 'running') throw new ConflictError(`Odoo on root server ${host.id} is ${host.odoo_state}, not running`);
  if (!host.odoo_postgresql_server_id || !host.odoo_db_user) throw new ConflictError(`Odoo on root server ${host.id} has no database role`);
  if (target.postgresql_server_id !== undefined && target.postgresql_server_id !== host.odoo_postgresql_server_id) {
    throw new ConflictError(
      `Odoo on root server ${host.id} reads the databases of PostgreSQL server ${host.odoo_postgresql_server_id}, not ${target.postgresql_server_id}`,
    );
  }
  const pg = await ctx.db.postgresqlServer.findUniqueOrThrow({ where: { id: host.odoo_postgresql_server_id } });
  return { host, pg };
}

/** The checks of a move, with what it needs; `sizeBytes` is the instance's size (database and filestore). */
export async function checkMove(ctx: Ctx, id: number, target: Target, userId: number | null, back: SubscriptionMove | null = null) {
  const { sub, from } = await movableFrom(ctx, id);
  const to = await targetOf(ctx, target, from.host.odoo_version_id);
  if (to.host.id === from.host.id) throw new ConflictError(`Subscription ${id} is already on root server ${to.host.id}`);
  if (to.host.odoo_version_id !== from.host.odoo_version_id) {
    throw new ConflictError(
      `Root server ${to.host.id} runs another Odoo version than root server ${from.host.id}, where the instance runs`,
    );
  }
  if (!back) {
    // Its files there are the old copy, dropped when its keep period ends: only move_back goes there meanwhile.
    const kept = await ctx.db.subscriptionMove.findFirst({
      where: { subscription_id: id, state: 'done', old_dropped_at: null, from_root_server_id: to.host.id },
    });
    if (kept) {
      throw new ConflictError(
        `Root server ${to.host.id} keeps the old copy of move ${kept.id} until ${kept.keep_until?.toISOString().slice(0, 10)}: move_back goes there`,
      );
    }
  }
  // Two hosts of one server: the database stays as it is, served by the other host as its own role.
  const sameServer = to.pg.id === from.pg.id;
  if (sameServer && !(sub.database_role && sub.database_role_password)) {
    throw new ConflictError(
      `Subscription ${id}'s database has no role of its own (setup_odoo on root server ${from.host.id} gives its tenants theirs): root server ${to.host.id} could not serve it from the same PostgreSQL server ${to.pg.id}`,
    );
  }
  const name = sub.database_name;
  const checks = { user_id: userId, operation: 'move (checks)' };
  const [dbBytes, taken] = await Promise.all([
    onServer(ctx.secretBox, from.pg, async (q) => {
      const { rows } = await q('SELECT pg_catalog.pg_database_size($1)::text AS size', [name]);
      return Number(rows[0]!.size);
    }),
    sameServer ? null : onServer(ctx.secretBox, to.pg, (q) => findDatabase(q, name)),
  ]);
  const kept = back && taken?.oid === back.from_database_oid && taken.systemIdentifier === back.from_system_identifier;
  if (taken && !kept) throw new ConflictError(`PostgreSQL server ${to.pg.id} already has a database named ${name}`);
  const fileBytes =
    measuredFilestoreBytes(sub.usage) ??
    Number(
      await runOnOdooHost(ctx, from.host, checks, filestoreBytesScript(filestorePath(basePathOf(ctx.config, from.host), name)), STEP_MS),
    );
  await checkRoom(ctx, { ...to, dataDir: odooLayout(basePathOf(ctx.config, to.host), to.host.odoo_http_port).dataDir }, checks, {
    dbBytes: sameServer ? 0 : dbBytes,
    fileBytes,
  });
  return { sub, ends: { from, to } satisfies MoveEnds, sizeBytes: dbBytes + fileBytes };
}

/**
 * Room for the copy, 1.5 times what goes there: the filestore on the target host's disk, the
 * database on the disk where the target PostgreSQL server keeps its data (measured by the server
 * itself); both on one disk of one machine, their sum there. No database copy, no database room.
 */
async function checkRoom(
  ctx: Ctx,
  to: { host: RootServer; pg: PostgresqlServer; dataDir: string },
  checks: { user_id: number | null; operation: string },
  size: { dbBytes: number; fileBytes: number },
) {
  const host = parseDiskSpace(await runOnOdooHost(ctx, to.host, checks, diskSpaceScript(to.dataDir), STEP_MS));
  let pg: DiskSpace | null = null;
  if (size.dbBytes > 0) {
    pg = await onServer(ctx.secretBox, to.pg, dataDiskOf).catch((err: Error) => {
      throw new ConflictError(
        `PostgreSQL server ${to.pg.id}: the room where it keeps its data could not be measured (${err.message}); a move asks its administrator role to be a superuser, which runs df there (COPY FROM PROGRAM)`,
      );
    });
  }
  const oneDisk = pg !== null && pg.fileSystem === host.fileSystem;
  const onHost = oneDisk ? size.dbBytes + size.fileBytes : size.fileBytes;
  const short: string[] = [];
  const hostNeeds = Math.ceil(onHost * HEADROOM);
  if (!(host.freeBytes >= hostNeeds)) {
    short.push(
      `Root server ${to.host.id} has no room: ${gb(host.freeBytes)} free in ${to.dataDir}, the ${oneDisk ? 'instance (its database on the same disk)' : 'filestore'} needs ${gb(hostNeeds)} (${gb(onHost)} and a margin)`,
    );
  }
  const pgNeeds = Math.ceil(size.dbBytes * HEADROOM);
  if (pg && !oneDisk && !(pg.freeBytes >= pgNeeds)) {
    short.push(
      `PostgreSQL server ${to.pg.id} has no room: ${gb(pg.freeBytes)} free where it keeps its data, the database needs ${gb(pgNeeds)} (${gb(size.dbBytes)} and a margin)`,
    );
  }
  if (short.length > 0) throw new ConflictError(short.join('. '));
}

const gb = (bytes: number) => `${(bytes / 1e9).toFixed(2)} GB`;
