// start_monitor / stop_monitor (spec §4.4): a BullMQ job scheduler per monitored root server, at
// its monitor_update_interval. Schedulers live in Redis, so they survive restarts and each
// interval produces exactly one poll job whichever worker process takes it.
import type { AppContext } from '../context.js';
import type { Db, DbTx, InTransaction } from '../core/db.js';
import type { Author } from '../core/chatter.js';
import { writeActionLog } from '../core/action-log.js';
import { loadRootServer, requireConfirmed, updateRootServer } from '../servers/root-server-store.js';
import { monitorJobs } from './monitor-job-specs.js';
import { INTERVAL_MS, MONITOR_INTERVALS, type MonitorInterval } from './monitor-schemas.js';

const SCHEDULER_PREFIX = 'monitor-root-server-';

export function monitorSchedulerId(serverId: number): string {
  return `${SCHEDULER_PREFIX}${serverId}`;
}

/** Redis key of the previous /proc counters of a server (CPU and network rates are deltas). */
export function sampleKey(prefix: string, serverId: number): string {
  return `${prefix}:monitor:sample:${serverId}`;
}

export function intervalMs(interval: string): number {
  return INTERVAL_MS[(MONITOR_INTERVALS as readonly string[]).includes(interval) ? (interval as MonitorInterval) : '1m'];
}

export function createMonitorService(ctx: Pick<AppContext, 'db' | 'queues' | 'redis'>) {
  /** Runs `fn` in the caller's transaction, or in a new one. */
  const inTx = <T>(tx: DbTx | undefined, fn: (tx: DbTx) => Promise<T>) => (tx ? fn(tx) : ctx.db.$transaction(fn));

  async function schedule(server: { id: number; monitor_update_interval: string }) {
    await ctx.queues.schedule(
      monitorSchedulerId(server.id),
      { every: intervalMs(server.monitor_update_interval) },
      monitorJobs.monitor_poll,
      { root_server_id: server.id },
      // A poll's outcome is on the server and in its monitor log; keep Redis small.
      { removeOnComplete: true, removeOnFail: { count: 1000 } },
    );
  }

  async function unschedule(serverId: number) {
    await ctx.queues.unschedule(monitorJobs.monitor_poll, monitorSchedulerId(serverId));
    await ctx.redis.del(sampleKey(ctx.queues.prefix, serverId));
  }

  return {
    schedule,
    unschedule,

    async start(id: number, author: Author | null, call?: InTransaction) {
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
    },

    async stop(id: number, author: Author | null, call?: InTransaction) {
      const after = await inTx(call?.tx, async (t) => {
        await loadRootServer(t, id);
        const updated = await updateRootServer(
          t,
          id,
          { monitoring_enabled: false, server_state: 'no_monitor', monitor_failures: 0 },
          author,
        );
        await writeActionLog(t, {
          model_name: 'svc.root.server',
          rec_id: id,
          action_type: 'server_action',
          input_text: 'stop_monitor',
          user_id: author?.id ?? null,
        });
        return updated;
      });
      if (call) call.afterCommit(() => unschedule(id));
      else await unschedule(id);
      return after;
    },

    /**
     * Makes Redis agree with PostgreSQL: a scheduler for every monitored server (e.g. after Redis
     * lost its data; existing ones keep their timing) and none for the others (e.g. left behind by
     * a transaction that rolled back). Run at worker start.
     */
    async reconcile(db: Db = ctx.db) {
      const monitored = await db.rootServer.findMany({
        where: { monitoring_enabled: true, state: 'confirmed' },
        select: { id: true, monitor_update_interval: true },
      });
      for (const server of monitored) await schedule(server);
      const wanted = new Set(monitored.map((s) => monitorSchedulerId(s.id)));
      const existing = await ctx.queues.queue('monitor').getJobSchedulers(0, -1);
      for (const { key } of existing) {
        if (key.startsWith(SCHEDULER_PREFIX) && !wanted.has(key)) await ctx.queues.unschedule(monitorJobs.monitor_poll, key);
      }
      return monitored.length;
    },
  };
}
