// start_monitor / stop_monitor: the schedule of every monitored root server (its interval and
// phase) in one Redis hash, with a version bumped by every write of it, which the monitor runners
// of all worker processes read (monitor-runner.ts): they split the servers between them with
// leases, and each due time is recorded once whichever worker takes it. Monitoring follows the
// root server's changes (rootServerChanged): it stops when the server leaves `confirmed`, is
// rescheduled when its interval changes, and is forgotten when the server is deleted.
import type { ChainableCommander } from 'ioredis';
import type { AppContext } from '../context.js';
import type { Db, DbTx, InTransaction } from '../core/db.js';
import type { Author } from '../core/chatter.js';
import { writeActionLog } from '../core/action-log.js';
import type { RootServerChange } from '../feature.js';
import { Prisma } from '../generated/prisma/client.js';
import { loadRootServer, requireConfirmed, updateRootServer, intervalMs } from '../servers/index.js';
import { monitorJobs } from './monitor-job-specs.js';

/**
 * The one rule of what is monitored: monitoring on and the server confirmed. Only such a server is
 * scheduled and polled, and a poll's row, state or failure is written only while it holds (checked
 * in the write itself: a stop_monitor, reset_draft or cancel that commits first wins).
 */
export const MONITORED = { monitoring_enabled: true, state: 'confirmed' } as const satisfies Prisma.RootServerWhereInput;
/** MONITORED in SQL, over root_servers' columns. */
export const MONITORED_SQL = Prisma.sql`monitoring_enabled AND state = 'confirmed'`;

/** Redis hash of the monitored servers: id → "<interval ms>:<phase ms>" (see MonitorSchedule). */
export function scheduleKey(prefix: string): string {
  return `${prefix}:monitor:schedule`;
}

/**
 * Redis counter bumped (INCR) with every write of the schedule hash, in the same MULTI: the runners
 * read it every sync and re-read the hash only when it moved (or is missing).
 */
export function scheduleVersionKey(prefix: string): string {
  return `${prefix}:monitor:schedule-version`;
}

/** A server is due at every time t with t mod every = phase (UTC milliseconds). */
export interface MonitorSchedule {
  every: number;
  phase: number;
}

export function parseSchedule(value: string): MonitorSchedule {
  const [every, phase] = value.split(':').map(Number);
  return { every: every!, phase: phase! };
}

/** A fixed phase spread over the interval: where a server whose start time is unknown falls. */
export function spreadPhase(serverId: number, every: number): number {
  return (Math.imul(serverId, 2654435761) >>> 0) % every;
}

/** The schedule of a monitored server, as the runners see it (undefined: not monitored). */
export async function monitorSchedule(ctx: Pick<AppContext, 'redis' | 'queues'>, serverId: number): Promise<MonitorSchedule | undefined> {
  const value = await ctx.redis.hget(scheduleKey(ctx.queues.prefix), String(serverId));
  return value ? parseSchedule(value) : undefined;
}

/** Redis key of the previous /proc counters of a server (CPU and network rates are deltas). */
export function sampleKey(prefix: string, serverId: number): string {
  return `${prefix}:monitor:sample:${serverId}`;
}

/** How long the previous counters are kept: three intervals and a minute (a late poll still has them). */
export function sampleTtlMs(every: number): number {
  return every * 3 + 60_000;
}

export function createMonitorService(ctx: Pick<AppContext, 'db' | 'queues' | 'redis'>) {
  /** Runs `fn` in the caller's transaction, or in a new one. */
  const inTx = <T>(tx: DbTx | undefined, fn: (tx: DbTx) => Promise<T>) => (tx ? fn(tx) : ctx.db.$transaction(fn));

  const key = scheduleKey(ctx.queues.prefix);
  const versionKey = scheduleVersionKey(ctx.queues.prefix);

  /** Runs a MULTI and throws its first error. */
  async function exec(multi: ChainableCommander) {
    for (const [err] of (await multi.exec()) ?? []) if (err) throw err;
  }

  /**
   * Puts the server on the schedule at its interval. A new schedule's phase is now (the first poll
   * is due at once) unless `phase` is given; a server already scheduled at that interval keeps its
   * phase (no poll is skipped or doubled).
   */
  async function schedule(server: { id: number; monitor_update_interval: string }, phase?: number) {
    const every = intervalMs(server.monitor_update_interval);
    const current = await ctx.redis.hget(key, String(server.id));
    if (current && parseSchedule(current).every === every) return;
    await exec(
      ctx.redis
        .multi()
        .hset(key, String(server.id), `${every}:${phase ?? Date.now() % every}`)
        .incr(versionKey),
    );
  }

  async function unschedule(serverId: number) {
    await exec(ctx.redis.multi().hdel(key, String(serverId)).del(sampleKey(ctx.queues.prefix, serverId)).incr(versionKey));
  }

  /** action_start_monitor: monitoring on, and the server scheduled once that committed. */
  async function start(id: number, author: Author | null, call?: InTransaction) {
    const enable = async (t: DbTx) => {
      const server = await loadRootServer(t, id);
      requireConfirmed(server);
      const after = await updateRootServer(t, id, { monitoring_enabled: true }, author);
      await writeActionLog(t, {
        model_name: 'svc.root.server',
        rec_id: id,
        action_type: 'server_action',
        input_text: `start_monitor (every ${after.monitor_update_interval})`,
        user_id: author?.id ?? null,
      });
      return after;
    };
    // In the caller's transaction (webhooks): scheduled once it commits, not if it rolls back.
    if (call) {
      const after = await enable(call.tx);
      call.afterCommit(() => schedule(after));
      return after;
    }
    // Otherwise schedule after the commit, so the first poll (due at once) sees monitoring on.
    const after = await ctx.db.$transaction(enable);
    try {
      await schedule(after);
    } catch (err) {
      await ctx.db.$transaction((t) => updateRootServer(t, id, { monitoring_enabled: false }, author));
      throw err;
    }
    return after;
  }

  /** action_stop_monitor: monitoring off (server_state → no_monitor), unscheduled, and the features told. */
  async function stop(id: number, author: Author | null, call?: InTransaction) {
    const after = await inTx(call?.tx, async (t) => {
      await loadRootServer(t, id);
      const updated = await updateRootServer(t, id, { monitoring_enabled: false, server_state: 'no_monitor', monitor_failures: 0 }, author);
      await writeActionLog(t, {
        model_name: 'svc.root.server',
        rec_id: id,
        action_type: 'server_action',
        input_text: 'stop_monitor',
        user_id: author?.id ?? null,
      });
      return updated;
    });
    // The features that react to a stop (alerts resolve) are told in a job, once it committed.
    const stopped = () =>
      ctx.queues.enqueue(monitorJobs.monitor_stopped, { root_server_id: id, at: new Date().toISOString(), by: author?.name ?? null });
    if (call) {
      call.afterCommit(() => unschedule(id));
      call.afterCommit(stopped);
    } else {
      await unschedule(id);
      await stopped();
    }
    return after;
  }

  /** The onRootServerChange observer: what monitoring does when a root server changes. */
  async function rootServerChanged(change: RootServerChange) {
    if (change.kind === 'deleting') return unschedule(change.root_server_id);
    if (change.kind === 'updated' && !change.fields.includes('monitor_update_interval')) return;
    const server = await loadRootServer(ctx.db, change.root_server_id);
    if (!server.monitoring_enabled) return;
    if (change.kind === 'unconfirming') await stop(server.id, change.author);
    else await schedule(server);
  }

  return {
    schedule,
    unschedule,
    start,
    stop,
    rootServerChanged,

    /**
     * Makes Redis agree with PostgreSQL: a schedule for every monitored server (e.g. after Redis
     * lost its data: phases spread over the interval; existing ones keep their timing) and none for
     * the others (e.g. left behind by a transaction that rolled back). Run at worker start.
     */
    async reconcile(db: Db = ctx.db) {
      const monitored = await db.rootServer.findMany({
        where: MONITORED,
        select: { id: true, monitor_update_interval: true },
      });
      // One read, the difference worked out here, one write (as schedule() and unschedule() would).
      const current = await ctx.redis.hgetall(key);
      const wanted = new Map(monitored.map((s) => [String(s.id), intervalMs(s.monitor_update_interval)]));
      const missing: Record<string, string> = {};
      for (const [id, every] of wanted) {
        const value = current[id];
        if (!value || parseSchedule(value).every !== every) missing[id] = `${every}:${spreadPhase(Number(id), every)}`;
      }
      const strays = Object.keys(current).filter((id) => !wanted.has(id));
      const write = ctx.redis.multi();
      if (Object.keys(missing).length > 0) write.hset(key, missing);
      if (strays.length > 0) {
        write.hdel(key, ...strays);
        write.del(...strays.map((id) => sampleKey(ctx.queues.prefix, Number(id))));
      }
      // Bumped even when nothing changed, so that the version exists from worker start on.
      await exec(write.incr(versionKey));
      return monitored.length;
    },
  };
}
