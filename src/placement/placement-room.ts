// The pools' room (issue 49, point 4): a pool (the Odoo hosts of one version) whose free room falls
// under the threshold is an alert, with the numbers. Kept as the backup alert is (backup-overdue.ts):
// on the record (odoo_versions.room_low_since: firing since then), claimed by a conditional update
// so it fires once however many runs race, told in the version's chatter (mail.mt_alert) and pushed
// through the default notification server; resolved, with a notice, when the room is back.
import type { AppContext } from '../context.js';
import { postMessage, type RecordRef } from '../core/chatter.js';
import type { Db } from '../core/db.js';
import { createNotificationService } from '../notifications/index.js';
import { type HostFigures, hostLabel, roomOf, unhealthy } from './placement-capacity.js';
import { loadHosts, tenantDiskEstimate } from './placement-load.js';

type Ctx = Pick<AppContext, 'db' | 'secretBox' | 'config' | 'queues'>;

const WEEK_MS = 7 * 24 * 3600_000;

/** A push through the default notification server (none: nothing to push); a failure is logged, never thrown. */
export async function tellOperators(ctx: Ctx, notice: { title: string; message: string }, on?: RecordRef) {
  const server = await ctx.db.notificationServer.findFirst({
    where: { is_default: true },
    orderBy: { company_id: 'asc' },
    select: { id: true },
  });
  if (!server) return;
  try {
    await createNotificationService(ctx).sendNotification(server.id, { ...notice, priority: 4 }, null);
  } catch (err) {
    if (on) {
      await postMessage(ctx.db, {
        ...on,
        body: `The push notice "${notice.title}" could not be sent through notification server ${server.id}: ${(err as Error).message}`,
        message_type: 'notification',
      });
    }
  }
}

export interface PoolRoom {
  odoo_version_id: number;
  name: string;
  hosts: number;
  /** Hosts that take new tenants now (healthy), and those of them whose room is unknown. */
  healthy: number;
  unknown_capacity: number;
  /** New tenants the healthy hosts of known capacity still take. */
  room: number;
  /** Trials placed on the pool in the last 7 days, and the threshold (set, or a day of them). */
  trials_last_week: number;
  threshold: number;
  threshold_from: 'setting' | 'trials';
  low: boolean;
  /** Each host: its tenants, room, and why it takes none when it does not. */
  per_host: { root_server_id: number; tenants: number; room: number | null; left_out: string | null }[];
}

/** The room of every pool (each Odoo version with a host where svc set up Odoo). */
export async function poolRooms(db: Db, now = new Date()): Promise<PoolRoom[]> {
  const [settings, versions] = await Promise.all([
    db.settings.findUnique({ where: { id: 1 }, select: { pool_room_alert_tenants: true } }),
    db.odooVersion.findMany({
      where: { root_servers: { some: { odoo_state: { not: 'not_installed' } } } },
      select: {
        id: true,
        name: true,
        root_servers: { where: { odoo_state: { not: 'not_installed' } }, select: { id: true, odoo_postgresql_server_id: true } },
      },
      orderBy: { id: 'asc' },
    }),
  ]);
  const out: PoolRoom[] = [];
  for (const v of versions) {
    const pairs = v.root_servers.map((r) => ({ root_server_id: r.id, postgresql_server_id: r.odoo_postgresql_server_id ?? 0 }));
    const ids = pairs.map((p) => p.root_server_id);
    const [hosts, tenantDisk, trials] = await Promise.all([
      loadHosts(db, pairs, now),
      tenantDiskEstimate(db, ids),
      db.subscription.count({
        where: { is_trial: true, root_server_id: { in: ids }, placed_at: { gt: new Date(now.getTime() - WEEK_MS) } },
      }),
    ]);
    const judged = hosts.map((h: HostFigures) => ({ h, why: unhealthy(h), room: roomOf(h, tenantDisk) }));
    const healthy = judged.filter((j) => j.why === null);
    const set = settings?.pool_room_alert_tenants ?? null;
    const threshold = set ?? Math.max(1, Math.ceil(trials / 7));
    const room = healthy.reduce((sum, j) => sum + (j.room ?? 0), 0);
    const unknown = healthy.filter((j) => j.room === null).length;
    out.push({
      odoo_version_id: v.id,
      name: v.name,
      hosts: hosts.length,
      healthy: healthy.length,
      unknown_capacity: unknown,
      room,
      trials_last_week: trials,
      threshold,
      threshold_from: set === null ? 'trials' : 'setting',
      // A host of unknown capacity takes any number: such a pool is never low.
      low: unknown === 0 && room < threshold,
      per_host: judged.map((j) => ({ root_server_id: j.h.id, tenants: j.h.tenants, room: j.room, left_out: j.why })),
    });
  }
  return out;
}

function numbers(p: PoolRoom, hosts: Map<number, string>) {
  const lines = p.per_host.map(
    (h) =>
      `${hosts.get(h.root_server_id) ?? `root server ${h.root_server_id}`}: ${h.tenants} tenant(s), room for ${h.room ?? 'an unknown number'}${h.left_out ? ` — takes none: ${h.left_out}` : ''}`,
  );
  return `Room for ${p.room} new tenant(s) on ${p.healthy} of ${p.hosts} host(s); the threshold is ${p.threshold} (${p.threshold_from === 'setting' ? 'settings: pool_room_alert_tenants' : `a day of the last week's ${p.trials_last_week} trial(s)`}).\n${lines.join('\n')}`;
}

export interface RoomCheckResult {
  fired: number[];
  resolved: number[];
  pools: PoolRoom[];
}

/** One pass (every few minutes): fires the alert of each pool low on room, resolves those with room again. */
export async function checkPoolRoom(ctx: Ctx, now = new Date()): Promise<RoomCheckResult> {
  const { db } = ctx;
  const pools = await poolRooms(db, now);
  const result: RoomCheckResult = { fired: [], resolved: [], pools };
  const names = new Map(
    (
      await db.rootServer.findMany({
        where: { id: { in: pools.flatMap((p) => p.per_host.map((h) => h.root_server_id)) } },
        select: { id: true, name: true, ip: true },
      })
    ).map((r) => [r.id, hostLabel(r)]),
  );
  for (const p of pools) {
    const on: RecordRef = { model_name: 'svc.odoo.version', rec_id: p.odoo_version_id };
    const notice = p.low
      ? { title: `[ALERT] Pool ${p.name}: room for ${p.room} new tenant(s), under ${p.threshold}`, message: numbers(p, names) }
      : { title: `[RESOLVED] Pool ${p.name}: room for ${p.room} new tenant(s) again`, message: numbers(p, names) };
    const changed = await db.$transaction(async (tx) => {
      const done = await tx.odooVersion.updateMany({
        where: { id: p.odoo_version_id, room_low_since: p.low ? null : { not: null } },
        data: { room_low_since: p.low ? now : null },
      });
      if (done.count !== 1) return false;
      await postMessage(tx, {
        ...on,
        body: `${notice.title}\n${notice.message}`,
        message_type: 'notification',
        ...(p.low ? { subtype_xmlid: 'mail.mt_alert' } : {}),
      });
      return true;
    });
    if (!changed) continue;
    (p.low ? result.fired : result.resolved).push(p.odoo_version_id);
    await tellOperators(ctx, notice, on);
  }
  return result;
}
