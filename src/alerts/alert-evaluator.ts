// Rule evaluation after every recorded monitoring poll (the onMonitorPoll hook), in the monitor
// runner that recorded it, so it must be cheap: a batch of polls (a batch write of streamed
// samples, or one poll) costs, in the steady state, one Redis command (the rules version and
// every server's state) and no database query; what changed is written in one more round trip.
//
// - The active rules are kept in memory per process and reloaded when the rules version in Redis
//   moved (every rule write bumps it; at the latest after a minute), so a change or a
//   deactivation takes effect on the next poll of every worker.
// - Per server, Redis holds which rules are firing and since when each pending rule has held
//   (src/alerts/alert-state.ts). Polls of one server may land on any worker: the state is shared.
//   When it is missing (Redis lost it, or a quiet server's hash expired) it is rebuilt from
//   PostgreSQL with one indexed range scan of the server's monitor log (and its firing alerts).
// - duration_seconds is sustained: the rule fires once the condition has held on every poll for
//   that long; one sample that does not meet it restarts the count, so a single spike never fires
//   a longer rule and, after a resolve, the whole duration must hold again (flapping is bounded).
//   A failed poll neither fires nor resolves a metric rule but restarts its count, and so does
//   the first poll after monitoring was (re)started.
// - server_offline holds while server_state is offline, counted from the first poll that saw it
//   offline (after a rebuild: from the last good poll, or the server's creation).
// - At most one firing alert per (rule, server) is held by the database (a partial unique index):
//   two workers deciding to fire at once insert one alert; only the insert that wins posts the
//   chatter notice and queues the delivery. A resolve is a conditional update, so it too is done
//   (and noticed) once. Push and mail go through the alert_notify job, never in the poll.
import type { AppContext } from '../context.js';
import { postMessage } from '../core/chatter.js';
import type { DbTx } from '../core/db.js';
import type { MonitorPollEvent, MonitorPollObserver } from '../feature.js';
import { Prisma } from '../generated/prisma/client.js';
import type { AlertMetric } from '../generated/prisma/enums.js';
import { alertJobs } from './alert-job-specs.js';
import { rulesVersionKey, SERVER_STATE_TTL_S, serverStateKey } from './alert-state.js';
import { fireNotice, resolveNotice, serverLabel, type AlertFacts } from './alert-text.js';

/**
 * Reads the rules version and the state hashes of a batch's servers in one command. (An ioredis
 * pipeline would do as well in one round trip, but costs ~60 µs of CPU to build on a connection
 * that also carries BullMQ's scripts: more than the rest of an evaluation.)
 */
const READ_LUA = `local out = { redis.call('GET', KEYS[1]) }
for i = 2, #KEYS do out[i] = redis.call('HGETALL', KEYS[i]) end
return out`;

/** The active rules are reloaded at least this often, even if a version bump was lost. */
const RULES_MAX_AGE_MS = 60_000;

type ValueMetric = Exclude<AlertMetric, 'server_offline'>;

interface Rule {
  id: number;
  name: string;
  metric: AlertMetric;
  threshold: number | null;
  duration_seconds: number;
  notify_resolved: boolean;
  /** null = every monitored server */
  servers: Set<number> | null;
  /** Changes with every write of the rule: a pending count started under another version restarts. */
  version: number;
}

interface SampleRow {
  created_at: Date;
  cpu_percent: number;
  ram_percent: number;
  disk_percent: number;
  load_1: number;
}

const meets = (value: number, threshold: number | null) => threshold !== null && value >= threshold;

/** How long (ms) the condition has held without a break, judged on samples newest first; -1 when it does not hold. */
export function sustainedMs(samples: readonly SampleRow[], metric: ValueMetric, threshold: number): number {
  const newest = samples[0];
  if (!newest || !meets(newest[metric], threshold)) return -1;
  let start = newest.created_at.getTime();
  for (const s of samples) {
    if (!meets(s[metric], threshold)) break;
    start = s.created_at.getTime();
  }
  return newest.created_at.getTime() - start;
}

export function createAlertEvaluator(ctx: Pick<AppContext, 'db' | 'queues' | 'redis' | 'log'>): MonitorPollObserver {
  const { db, redis } = ctx;
  const versionKey = rulesVersionKey(ctx.queues.prefix);
  let cache: { version: string; loadedAt: number; rules: Rule[] } | null = null;

  async function activeRules(version: string | null): Promise<Rule[]> {
    if (version === null) {
      // No version yet (or Redis lost it): start one, so every process agrees from now on.
      await redis.set(versionKey, String(Date.now()), 'NX');
      version = (await redis.get(versionKey)) ?? '';
    }
    if (cache && cache.version === version && Date.now() - cache.loadedAt < RULES_MAX_AGE_MS) return cache.rules;
    const rows = await db.alertRule.findMany({ where: { active: true }, orderBy: { id: 'asc' } });
    const rules = rows.map((r) => ({
      id: r.id,
      name: r.name,
      metric: r.metric,
      threshold: r.threshold,
      duration_seconds: r.duration_seconds,
      notify_resolved: r.notify_resolved,
      servers: r.root_server_ids.length > 0 ? new Set(r.root_server_ids) : null,
      version: r.updated_at.getTime(),
    }));
    cache = { version, loadedAt: Date.now(), rules };
    return rules;
  }

  /** The server's samples of the last `seconds` before its newest, newest first, plus the one before them. */
  function window(serverId: number, seconds: number) {
    const since = Prisma.sql`(SELECT created_at FROM root_server_monitor_logs WHERE root_server_id = ${serverId}
      ORDER BY created_at DESC LIMIT 1) - make_interval(secs => ${seconds})`;
    return db.$queryRaw<SampleRow[]>`
      (SELECT created_at, cpu_percent, ram_percent, disk_percent, load_1 FROM root_server_monitor_logs
        WHERE root_server_id = ${serverId} AND created_at >= ${since} ORDER BY created_at DESC)
      UNION ALL
      (SELECT created_at, cpu_percent, ram_percent, disk_percent, load_1 FROM root_server_monitor_logs
        WHERE root_server_id = ${serverId} AND created_at < ${since} ORDER BY created_at DESC LIMIT 1)`;
  }

  /** Since when the server is failing: its last good poll, else its creation (ms since the epoch). */
  async function failingSince(serverId: number): Promise<number> {
    const [row] = await db.$queryRaw<{ at: Date | null }[]>`
      SELECT coalesce(
        (SELECT created_at FROM root_server_monitor_logs WHERE root_server_id = ${serverId} ORDER BY created_at DESC LIMIT 1),
        (SELECT created_at FROM root_servers WHERE id = ${serverId})) AS at`;
    return row?.at?.getTime() ?? 0;
  }

  /** The server's state rebuilt from PostgreSQL: its firing alerts, and since when its duration rules hold. */
  async function rebuild(event: MonitorPollEvent, rules: Rule[]): Promise<Record<string, string>> {
    const serverId = event.root_server_id;
    const state: Record<string, string> = { init: '1' };
    const firing = await db.alert.findMany({ where: { root_server_id: serverId, state: 'firing' }, select: { rule_id: true } });
    for (const a of firing) state[`f:${a.rule_id}`] = '1';
    const pending = rules.filter((r) => r.duration_seconds > 0 && !state[`f:${r.id}`]);
    const valueRules = pending.filter((r) => r.metric !== 'server_offline');
    if (valueRules.length > 0 && event.metrics) {
      const samples = await window(serverId, Math.max(...valueRules.map((r) => r.duration_seconds)));
      for (const r of valueRules) {
        const held = sustainedMs(samples, r.metric as ValueMetric, r.threshold ?? Number.POSITIVE_INFINITY);
        if (held >= 0) state[`s:${r.id}`] = `${event.at.getTime() - held}:${r.version}`;
      }
    }
    if (event.server_state === 'offline' && pending.some((r) => r.metric === 'server_offline')) {
      const since = await failingSince(serverId);
      for (const r of pending) if (r.metric === 'server_offline') state[`s:${r.id}`] = `${since}:${r.version}`;
    }
    return state;
  }

  async function serverName(serverId: number): Promise<string> {
    const server = await db.rootServer.findUnique({ where: { id: serverId }, select: { name: true, ip: true } });
    return server ? serverLabel(server) : `root server ${serverId}`;
  }

  type RuleFacts = Pick<Rule, 'id' | 'name' | 'metric' | 'threshold' | 'duration_seconds' | 'notify_resolved'>;
  const facts = (
    rule: RuleFacts,
    a: { value: number; resolved_value: number | null; started_at: Date; resolved_at: Date | null; threshold: number | null },
  ): AlertFacts => ({ ...a, metric: rule.metric, duration_seconds: rule.duration_seconds, rule_name: rule.name });

  /** A fire or resolve notice in the root server's chatter, in the transaction that decided it. */
  function postNotice(tx: DbTx, serverId: number, notice: { title: string; message: string }) {
    return postMessage(tx, {
      model_name: 'svc.root.server',
      rec_id: serverId,
      body: `${notice.title}\n${notice.message}`,
      message_type: 'notification',
      subtype_xmlid: 'mail.mt_alert',
    });
  }

  /** Opens the alert unless one is firing; the winner of a race posts the notice and queues the delivery. */
  async function fire(serverId: number, rule: RuleFacts, value: number) {
    const name = await serverName(serverId);
    const alertId = await db.$transaction(async (tx) => {
      const [row] = await tx.$queryRaw<{ id: number; started_at: Date }[]>`
        INSERT INTO alerts (rule_id, root_server_id, metric, threshold, value)
        VALUES (${rule.id}, ${serverId}, ${rule.metric}::"AlertMetric", ${rule.threshold}, ${value})
        ON CONFLICT (rule_id, root_server_id) WHERE state = 'firing' DO NOTHING
        RETURNING id, started_at`;
      if (!row) return null; // another worker opened it first
      const notice = fireNotice(name, facts(rule, { ...row, value, threshold: rule.threshold, resolved_value: null, resolved_at: null }));
      await postNotice(tx, serverId, notice);
      return row.id;
    });
    if (alertId) await ctx.queues.enqueue(alertJobs.alert_notify, { alert_id: alertId, event: 'fired' });
  }

  /** Resolves the firing alert of (rule, server), if any; `value` null: the rule no longer watches the server. */
  async function resolve(serverId: number, rule: RuleFacts | null, ruleId: number, value: number | null) {
    // Read before the transaction (as fire() does): not on a second connection while it is open.
    const name = rule?.notify_resolved ? await serverName(serverId) : null;
    const resolved = await db.$transaction(async (tx) => {
      const [row] = await tx.$queryRaw<{ id: number; value: number; threshold: number | null; started_at: Date; resolved_at: Date }[]>`
        UPDATE alerts SET state = 'resolved', resolved_at = CURRENT_TIMESTAMP, resolved_value = ${value}
        WHERE rule_id = ${ruleId} AND root_server_id = ${serverId} AND state = 'firing'
        RETURNING id, value, threshold, started_at, resolved_at`;
      // Resolved by another worker, or silently (a deleted rule, notify_resolved off).
      if (!row || !rule?.notify_resolved || name === null) return null;
      // Judged against the rule as it is now (a raised threshold is what resolved it).
      const notice = resolveNotice(name, facts(rule, { ...row, threshold: rule.threshold ?? row.threshold, resolved_value: value }));
      await postNotice(tx, serverId, notice);
      return row.id;
    });
    if (resolved) await ctx.queues.enqueue(alertJobs.alert_notify, { alert_id: resolved, event: 'resolved' });
  }

  /** A firing alert whose rule no longer watches the server (deactivated, narrowed or deleted). */
  async function resolveUnwatched(serverId: number, ruleId: number) {
    const rule = await db.alertRule.findUnique({ where: { id: ruleId } });
    await resolve(serverId, rule, ruleId, null);
  }

  /** The fields one batch writes to a server's state hash: the last word on a field wins. */
  interface Changes {
    set: Record<string, string>;
    del: Set<string>;
  }

  /**
   * Evaluates one poll of a server against its state, which is kept up to date in place (a later
   * poll of the same server in the batch sees it), and adds what is to be written to `changes`.
   */
  async function evaluateOne(event: MonitorPollEvent, state: Record<string, string>, allRules: Rule[], changes: Changes) {
    const serverId = event.root_server_id;
    const rules = allRules.filter((r) => r.servers === null || r.servers.has(serverId));
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
      const firing = state[`f:${rule.id}`] !== undefined;
      const pending = state[`s:${rule.id}`];
      try {
        if (holds) {
          if (firing) continue;
          const [since, version] = (pending ?? '').split(':').map(Number);
          const start = pending && version === rule.version ? since! : at;
          if (at - start >= rule.duration_seconds * 1000) {
            await fire(serverId, rule, value);
            put(`f:${rule.id}`, '1');
            drop(`s:${rule.id}`);
          } else if (start === at) put(`s:${rule.id}`, `${at}:${rule.version}`);
        } else {
          if (pending) drop(`s:${rule.id}`);
          if (firing) {
            await resolve(serverId, rule, rule.id, value);
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
        if (field.startsWith('f:')) await resolveUnwatched(serverId, ruleId);
        drop(field);
      } catch (err) {
        ctx.log.error({ err, root_server_id: serverId, rule_id: ruleId }, 'alert evaluation failed');
      }
    }
  }

  return async function evaluate(events: readonly MonitorPollEvent[]) {
    if (events.length === 0) return;
    const serverIds = [...new Set(events.map((e) => e.root_server_id))];
    const keyOf = (serverId: number) => serverStateKey(ctx.queues.prefix, serverId);
    // One command: the rules version and the state of every server of the batch.
    const [version, ...flats] = (await redis.eval(READ_LUA, 1 + serverIds.length, versionKey, ...serverIds.map(keyOf))) as [
      string | null,
      ...string[][],
    ];
    const states = new Map(
      serverIds.map((id, n) => {
        const flat = flats[n] ?? [];
        const state: Record<string, string> = {};
        for (let i = 0; i < flat.length; i += 2) state[flat[i]!] = flat[i + 1]!;
        return [id, state];
      }),
    );
    const rules = await activeRules(version || null);

    const changes = new Map<number, Changes>(serverIds.map((id) => [id, { set: {}, del: new Set() }]));
    for (const event of events) {
      const serverId = event.root_server_id;
      try {
        await evaluateOne(event, states.get(serverId)!, rules, changes.get(serverId)!);
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
  };
}
