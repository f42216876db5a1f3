// Rule evaluation after every recorded monitoring poll (the onMonitorPoll hook), in the monitor
// runner that recorded it, so it must be cheap: a batch of polls (a batch write of streamed
// samples, or one poll) costs, in the steady state, one Redis command (the rules version and
// every server's state) and no database query; what changed is written in one more round trip.
//
// - Per server, Redis holds which rules are firing and since when each pending rule has held
//   (src/alerts/alert-state.ts). Polls of one server may land on any worker: the state is shared.
//   When it is missing it is rebuilt from PostgreSQL (alert-durations.ts).
// - The active rules are kept in memory per process (alert-rules.ts).
// - duration_seconds is sustained: the rule fires once the condition has held on every poll for
//   that long; one sample that does not meet it restarts the count, so a single spike never fires
//   a longer rule and, after a resolve, the whole duration must hold again (flapping is bounded).
//   A failed poll neither fires nor resolves a metric rule but restarts its count, and so does
//   the first poll after monitoring was (re)started.
// - server_offline holds while server_state is offline.
// - Opening, telling late, repeating and resolving an alert, each done and noticed once across
//   workers: alert-notices.ts. Notices held back during maintenance windows and while the server
//   is offline: alert-suppression.ts.
// - A rule with repeat_minutes tells a firing alert again that often (judged on the polls' time).
// - In the state hash, `f:<rule>` is when the alert was last told (ms), 0 while it was never told.
import type { AppContext } from '../context.js';
import type { MonitorPollEvent, MonitorPollObserver, MonitorStopObserver } from '../feature.js';
import { createMaintenanceCalendar, maintenanceVersionKey, type OpenWindow, windowLabel } from '../maintenance/index.js';
import { createStateRebuild } from './alert-durations.js';
import { createAlertNotices } from './alert-notices.js';
import { type ActiveRules, createRuleCache, meets, rulesOf } from './alert-rules.js';
import { SERVER_STATE_TTL_S, serverStateKey } from './alert-state.js';
import { holdBack, toldAt } from './alert-suppression.js';

/**
 * Reads the rules version and the state hashes of a batch's servers in one command. (An ioredis
 * pipeline would do as well in one round trip, but costs ~60 µs of CPU to build on a connection
 * that also carries BullMQ's scripts: more than the rest of an evaluation.)
 */
const READ_LUA = `local out = { redis.call('GET', KEYS[1]), redis.call('GET', KEYS[2]) }
for i = 3, #KEYS do out[i] = redis.call('HGETALL', KEYS[i]) end
return out`;

export function createAlertEvaluation(ctx: Pick<AppContext, 'db' | 'queues' | 'redis' | 'log'>): {
  evaluate: MonitorPollObserver;
  monitoringStopped: MonitorStopObserver;
} {
  const { db, redis } = ctx;
  const maintenanceKey = maintenanceVersionKey(ctx.queues.prefix);
  const calendar = createMaintenanceCalendar(ctx);
  const ruleCache = createRuleCache(ctx);
  const rebuild = createStateRebuild(ctx);
  const notices = createAlertNotices(ctx);

  /** The fields one batch writes to a server's state hash: the last word on a field wins. */
  interface Changes {
    set: Record<string, string>;
    del: Set<string>;
  }

  /**
   * Evaluates one poll of a server against its state, which is kept up to date in place (a later
   * poll of the same server in the batch sees it), and adds what is to be written to `changes`.
   */
  async function evaluateOne(
    event: MonitorPollEvent,
    state: Record<string, string>,
    allRules: ActiveRules,
    windows: readonly OpenWindow[],
    changes: Changes,
  ) {
    const serverId = event.root_server_id;
    const rules = rulesOf(allRules, serverId);
    const hasFiring = Object.keys(state).some((k) => k.startsWith('f:'));
    if (rules.length === 0 && !hasFiring) return;

    const put = (field: string, value: string) => {
      state[field] = value;
      changes.set[field] = value;
      changes.del.delete(field);
    };
    const drop = (field: string) => {
      delete state[field];
      delete changes.set[field];
      changes.del.add(field);
    };
    if (!state.init) {
      const rebuilt = await rebuild(event, rules);
      for (const field of Object.keys(state)) delete state[field];
      for (const [field, value] of Object.entries(rebuilt)) put(field, value);
    }
    const at = event.at.getTime();
    const heldFor = holdBack(calendar.windowOf(windows, serverId, at), state, allRules.offline);
    if (event.previous_state === 'no_monitor') {
      // The first poll after monitoring was (re)started: counts from before the gap do not hold.
      for (const field of Object.keys(state)) if (field.startsWith('s:')) drop(field);
    }
    // Fields of rules that no longer watch the server, as they were before this poll's rules ran.
    const before = Object.keys(state);
    const watched = new Set<number>();
    for (const rule of rules) {
      watched.add(rule.id);
      let holds: boolean;
      let value: number;
      if (rule.metric === 'server_offline') {
        holds = event.server_state === 'offline';
        value = event.failures;
      } else {
        const v = event.metrics?.[rule.metric];
        if (v === undefined) {
          // A failed poll neither fires nor resolves a metric rule, but a sustained count needs
          // every poll: it starts again.
          if (state[`s:${rule.id}`]) drop(`s:${rule.id}`);
          continue;
        }
        value = v;
        holds = meets(v, rule.threshold);
      }
      const firing = state[`f:${rule.id}`];
      const pending = state[`s:${rule.id}`];
      try {
        if (holds) {
          if (firing !== undefined) {
            const told = toldAt(firing);
            if (heldFor(rule.id)) continue;
            if (told === 0) put(`f:${rule.id}`, await notices.tellLate(serverId, rule, event.at));
            else if (rule.repeat_minutes > 0 && at - told >= rule.repeat_minutes * 60_000) {
              put(`f:${rule.id}`, await notices.repeat(serverId, rule, event.at));
            }
            continue;
          }
          const [since, version] = (pending ?? '').split(':').map(Number);
          const start = pending && version === rule.version ? since! : at;
          if (at - start >= rule.duration_seconds * 1000) {
            const opened = await notices.fire(serverId, rule, value, event.at, heldFor(rule.id));
            // Opened by another worker: when it was told is rebuilt from the database on the next poll.
            if (opened === null) drop('init');
            put(`f:${rule.id}`, opened ?? String(at));
            drop(`s:${rule.id}`);
          } else if (start === at) put(`s:${rule.id}`, `${at}:${rule.version}`);
        } else {
          if (pending) drop(`s:${rule.id}`);
          if (firing !== undefined) {
            await notices.resolve(serverId, rule, rule.id, value, heldFor(rule.id));
            drop(`f:${rule.id}`);
          }
        }
      } catch (err) {
        ctx.log.error({ err, root_server_id: serverId, rule_id: rule.id }, 'alert evaluation failed');
      }
    }
    for (const field of before) {
      const ruleId = Number(field.slice(2));
      if (!field.startsWith('f:') && !field.startsWith('s:')) continue;
      if (watched.has(ruleId)) continue;
      try {
        if (field.startsWith('f:')) await notices.resolveUnwatched(serverId, ruleId, heldFor(ruleId));
        drop(field);
      } catch (err) {
        ctx.log.error({ err, root_server_id: serverId, rule_id: ruleId }, 'alert evaluation failed');
      }
    }
  }

  async function evaluate(events: readonly MonitorPollEvent[]) {
    if (events.length === 0) return;
    const serverIds = [...new Set(events.map((e) => e.root_server_id))];
    const keyOf = (serverId: number) => serverStateKey(ctx.queues.prefix, serverId);
    // One command: the rules and maintenance versions and the state of every server of the batch.
    const [version, windowsVersion, ...flats] = (await redis.eval(
      READ_LUA,
      2 + serverIds.length,
      ruleCache.versionKey,
      maintenanceKey,
      ...serverIds.map(keyOf),
    )) as [string | null, string | null, ...string[][]];
    const states = new Map(
      serverIds.map((id, n) => {
        const flat = flats[n] ?? [];
        const state: Record<string, string> = {};
        for (let i = 0; i < flat.length; i += 2) state[flat[i]!] = flat[i + 1]!;
        return [id, state];
      }),
    );
    const rules = await ruleCache.activeRules(version || null);
    const windows = await calendar.windows(windowsVersion || null);

    const changes = new Map<number, Changes>(serverIds.map((id) => [id, { set: {}, del: new Set() }]));
    for (const event of events) {
      const serverId = event.root_server_id;
      try {
        await evaluateOne(event, states.get(serverId)!, rules, windows, changes.get(serverId)!);
      } catch (err) {
        ctx.log.error({ err, root_server_id: serverId }, 'alert evaluation failed');
      }
    }

    // One round trip: every changed state.
    const write = redis.pipeline();
    let writes = 0;
    for (const [serverId, { set, del }] of changes) {
      if (Object.keys(set).length === 0 && del.size === 0) continue;
      const key = keyOf(serverId);
      if (del.size > 0) write.hdel(key, ...del);
      if (Object.keys(set).length > 0) write.hset(key, set);
      write.expire(key, SERVER_STATE_TTL_S);
      writes++;
    }
    if (writes > 0) await write.exec();
  }

  /**
   * Monitoring of the server was stopped: its firing alerts resolve, with a resolve notice saying
   * so (as any resolve: when the rule asks for it, the alert was told, and no maintenance window
   * holds it back). Nothing is done if monitoring was started again meanwhile (the polls decide
   * then). Its working state goes: a new start counts afresh.
   */
  async function monitoringStopped(event: { root_server_id: number; at: Date; by: string | null }) {
    const serverId = event.root_server_id;
    const reason = `monitoring stopped${event.by ? ` by ${event.by}` : ''}`;
    const firing = await db.alert.findMany({ where: { root_server_id: serverId, state: 'firing' }, select: { rule_id: true } });
    if (firing.length > 0) {
      const monitored = await db.rootServer.count({ where: { id: serverId, monitoring_enabled: true } });
      if (monitored > 0) return;
      const [windowsVersion] = await redis.mget(maintenanceKey);
      const maintenance = calendar.windowOf(await calendar.windows(windowsVersion ?? null), serverId, Date.now());
      const rules = new Map((await db.alertRule.findMany({ where: { id: { in: firing.map((a) => a.rule_id) } } })).map((r) => [r.id, r]));
      for (const { rule_id } of firing) {
        await notices.resolve(serverId, rules.get(rule_id) ?? null, rule_id, null, maintenance ? windowLabel(maintenance) : null, reason);
      }
    }
    await redis.del(serverStateKey(ctx.queues.prefix, serverId));
  }

  return { evaluate, monitoringStopped };
}

/** The alert evaluation as a monitoring poll observer. */
export function createAlertEvaluator(ctx: Pick<AppContext, 'db' | 'queues' | 'redis' | 'log'>): MonitorPollObserver {
  return createAlertEvaluation(ctx).evaluate;
}
