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
// - Notices are held back while the server is inside a maintenance window, and, for its other
//   alerts, while a server_offline alert of the server is firing and was told (one notice per
//   outage, not one per rule): an alert opened then is recorded `silenced` and told only if it
//   still fires once nothing holds it back; no repeat or resolve notice goes out meanwhile.
// - A rule with repeat_minutes tells a firing alert again that often (judged on the polls' time).
// - In the state hash, `f:<rule>` is when the alert was last told (ms), 0 while it was never told.
import type { AppContext } from '../context.js';
import { postMessage } from '../core/chatter.js';
import type { DbTx } from '../core/db.js';
import type { MonitorPollEvent, MonitorPollObserver, MonitorStopObserver } from '../feature.js';
import { Prisma } from '../generated/prisma/client.js';
import type { AlertMetric } from '../generated/prisma/enums.js';
import { createMaintenanceCalendar, maintenanceVersionKey, type OpenWindow, windowLabel } from '../maintenance/index.js';
import { alertJobs } from './alert-job-specs.js';
import { alertNotices } from './alert-metrics.js';
import { rulesVersionKey, SERVER_STATE_TTL_S, serverStateKey } from './alert-state.js';
import { fireNotice, repeatNotice, resolveNotice, serverLabel, type AlertFacts } from './alert-text.js';

/**
 * Reads the rules version and the state hashes of a batch's servers in one command. (An ioredis
 * pipeline would do as well in one round trip, but costs ~60 µs of CPU to build on a connection
 * that also carries BullMQ's scripts: more than the rest of an evaluation.)
 */
const READ_LUA = `local out = { redis.call('GET', KEYS[1]), redis.call('GET', KEYS[2]) }
for i = 3, #KEYS do out[i] = redis.call('HGETALL', KEYS[i]) end
return out`;

/** The active rules are reloaded at least this often, even if a version bump was lost. */
const RULES_MAX_AGE_MS = 60_000;

type ValueMetric = Exclude<AlertMetric, 'server_offline'>;

/** The active rules as loaded: server_offline ones first, and their ids. */
interface ActiveRules {
  list: Rule[];
  offline: Set<number>;
}

interface Rule {
  id: number;
  name: string;
  metric: AlertMetric;
  threshold: number | null;
  duration_seconds: number;
  notify_resolved: boolean;
  repeat_minutes: number;
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

/** When a firing alert was last told, from its state field: 0 = never (held back so far); a legacy '1' counts as told. */
const toldAt = (field: string | undefined) => Number(field ?? 0) || 0;

export function createAlertEvaluation(ctx: Pick<AppContext, 'db' | 'queues' | 'redis' | 'log'>): {
  evaluate: MonitorPollObserver;
  monitoringStopped: MonitorStopObserver;
} {
  const { db, redis } = ctx;
  const versionKey = rulesVersionKey(ctx.queues.prefix);
  const maintenanceKey = maintenanceVersionKey(ctx.queues.prefix);
  const calendar = createMaintenanceCalendar(ctx);
  let cache: { version: string; loadedAt: number; rules: ActiveRules } | null = null;

  async function activeRules(version: string | null): Promise<ActiveRules> {
    if (version === null) {
      // No version yet (or Redis lost it): start one, so every process agrees from now on.
      await redis.set(versionKey, String(Date.now()), 'NX');
      version = (await redis.get(versionKey)) ?? '';
    }
    if (cache && cache.version === version && Date.now() - cache.loadedAt < RULES_MAX_AGE_MS) return cache.rules;
    const rows = await db.alertRule.findMany({ where: { active: true }, orderBy: { id: 'asc' } });
    const list = rows.map((r) => ({
      id: r.id,
      name: r.name,
      metric: r.metric,
      threshold: r.threshold,
      duration_seconds: r.duration_seconds,
      notify_resolved: r.notify_resolved,
      repeat_minutes: r.repeat_minutes,
      servers: r.root_server_ids.length > 0 ? new Set(r.root_server_ids) : null,
      version: r.updated_at.getTime(),
    }));
    // server_offline rules first: whether a server's other alerts are held back depends on them.
    const rules: ActiveRules = {
      list: list.sort((a, b) => Number(b.metric === 'server_offline') - Number(a.metric === 'server_offline')),
      offline: new Set(list.filter((r) => r.metric === 'server_offline').map((r) => r.id)),
    };
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

  /** The server's state rebuilt from PostgreSQL: its firing alerts (when last told), and since when its duration rules hold. */
  async function rebuild(event: MonitorPollEvent, rules: Rule[]): Promise<Record<string, string>> {
    const serverId = event.root_server_id;
    const state: Record<string, string> = { init: '1' };
    const firing = await db.alert.findMany({
      where: { root_server_id: serverId, state: 'firing' },
      select: { rule_id: true, last_notice_at: true },
    });
    for (const a of firing) state[`f:${a.rule_id}`] = String(a.last_notice_at?.getTime() ?? 0);
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

  type RuleFacts = Pick<Rule, 'id' | 'name' | 'metric' | 'threshold' | 'duration_seconds' | 'notify_resolved' | 'repeat_minutes'>;
  type RowFacts = Omit<AlertFacts, 'metric' | 'duration_seconds' | 'rule_name'>;
  const facts = (rule: RuleFacts, a: RowFacts): AlertFacts => ({
    ...a,
    metric: rule.metric,
    duration_seconds: rule.duration_seconds,
    rule_name: rule.name,
  });

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

  /**
   * Opens the alert unless one is firing; the winner of a race posts the notice and queues the
   * delivery, or, while `held` names what holds its notices back, records it silenced and tells
   * nobody. Answers the alert's state field (when it was told; 0: not told), or null when another
   * worker opened it.
   */
  async function fire(serverId: number, rule: RuleFacts, value: number, at: Date, held: string | null): Promise<string | null> {
    const name = held ? null : await serverName(serverId);
    const alertId = await db.$transaction(async (tx) => {
      const [row] = await tx.$queryRaw<{ id: number; started_at: Date }[]>`
        INSERT INTO alerts (rule_id, root_server_id, metric, threshold, value, silenced, silenced_reason, last_notice_at)
        VALUES (${rule.id}, ${serverId}, ${rule.metric}::"AlertMetric", ${rule.threshold}, ${value},
          ${held !== null}, ${held}, ${held ? null : at})
        ON CONFLICT (rule_id, root_server_id) WHERE state = 'firing' DO NOTHING
        RETURNING id, started_at`;
      if (!row) return null; // another worker opened it first
      if (name !== null) {
        const notice = fireNotice(name, facts(rule, { ...row, value, threshold: rule.threshold, resolved_value: null, resolved_at: null }));
        await postNotice(tx, serverId, notice);
      }
      return row.id;
    });
    if (!alertId) return null;
    alertNotices.inc({ event: held ? 'held' : 'fired' });
    if (!held) await ctx.queues.enqueue(alertJobs.alert_notify, { alert_id: alertId, event: 'fired' });
    return held ? '0' : String(at.getTime());
  }

  /**
   * Tells a firing alert that was never told (it opened while held back): the fire notice, late.
   * Conditional, so one worker does it. Answers its new state field.
   */
  async function tellLate(serverId: number, rule: RuleFacts, at: Date): Promise<string> {
    const name = await serverName(serverId);
    const alertId = await db.$transaction(async (tx) => {
      const [row] = await tx.$queryRaw<
        { id: number; value: number; threshold: number | null; started_at: Date; silenced_reason: string | null }[]
      >`
        UPDATE alerts SET last_notice_at = ${at}
        WHERE rule_id = ${rule.id} AND root_server_id = ${serverId} AND state = 'firing' AND last_notice_at IS NULL
        RETURNING id, value, threshold, started_at, silenced_reason`;
      if (!row) return null;
      const notice = fireNotice(
        name,
        facts(rule, { ...row, resolved_value: null, resolved_at: null, held_reason: row.silenced_reason ?? 'held back' }),
      );
      await postNotice(tx, serverId, notice);
      return row.id;
    });
    if (alertId) {
      alertNotices.inc({ event: 'fired' });
      await ctx.queues.enqueue(alertJobs.alert_notify, { alert_id: alertId, event: 'fired' });
    }
    return String(at.getTime());
  }

  /** Tells a firing alert again (repeat_minutes), once across workers: only if its last notice is that old. */
  async function repeat(serverId: number, rule: RuleFacts, at: Date): Promise<string> {
    const name = await serverName(serverId);
    const due = new Date(at.getTime() - rule.repeat_minutes * 60_000);
    const sent = await db.$transaction(async (tx) => {
      const [row] = await tx.$queryRaw<{ id: number; value: number; threshold: number | null; started_at: Date; repeats: number }[]>`
        UPDATE alerts SET last_notice_at = ${at}, repeats = repeats + 1
        WHERE rule_id = ${rule.id} AND root_server_id = ${serverId} AND state = 'firing' AND last_notice_at <= ${due}
        RETURNING id, value, threshold, started_at, repeats`;
      if (!row) return null; // another worker told it, or it was told later than the state said
      const notice = repeatNotice(name, facts(rule, { ...row, resolved_value: null, resolved_at: null }), row.repeats, at);
      await postNotice(tx, serverId, notice);
      return row;
    });
    if (sent) {
      alertNotices.inc({ event: 'repeated' });
      await ctx.queues.enqueue(alertJobs.alert_notify, { alert_id: sent.id, event: 'repeated', repeat: sent.repeats });
    }
    return String(at.getTime());
  }

  /**
   * Resolves the firing alert of (rule, server), if any; `value` null: resolved by no sample
   * (`reason` says why). The resolve notice goes out when the rule asks for it, the alert was told,
   * and nothing holds notices back.
   */
  async function resolve(
    serverId: number,
    rule: RuleFacts | null,
    ruleId: number,
    value: number | null,
    held: string | null,
    reason: string | null = null,
  ) {
    // Read before the transaction (as fire() does): not on a second connection while it is open.
    const name = rule?.notify_resolved && !held ? await serverName(serverId) : null;
    const resolved = await db.$transaction(async (tx) => {
      const [row] = await tx.$queryRaw<
        { id: number; value: number; threshold: number | null; started_at: Date; resolved_at: Date; last_notice_at: Date | null }[]
      >`
        UPDATE alerts SET state = 'resolved', resolved_at = CURRENT_TIMESTAMP, resolved_value = ${value}, resolved_reason = ${reason}
        WHERE rule_id = ${ruleId} AND root_server_id = ${serverId} AND state = 'firing'
        RETURNING id, value, threshold, started_at, resolved_at, last_notice_at`;
      // Resolved by another worker, or silently (a deleted rule, notify_resolved off, never told, held back).
      if (!row || !rule?.notify_resolved || name === null || row.last_notice_at === null) return null;
      // Judged against the rule as it is now (a raised threshold is what resolved it).
      const notice = resolveNotice(
        name,
        facts(rule, { ...row, threshold: rule.threshold ?? row.threshold, resolved_value: value, resolved_reason: reason }),
      );
      await postNotice(tx, serverId, notice);
      return row.id;
    });
    if (resolved) {
      alertNotices.inc({ event: 'resolved' });
      await ctx.queues.enqueue(alertJobs.alert_notify, { alert_id: resolved, event: 'resolved' });
    }
  }

  /** A firing alert whose rule no longer watches the server (deactivated, narrowed or deleted). */
  async function resolveUnwatched(serverId: number, ruleId: number, held: string | null) {
    const rule = await db.alertRule.findUnique({ where: { id: ruleId } });
    await resolve(serverId, rule, ruleId, null, held, 'no longer watched (the rule was deactivated or changed)');
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
  async function evaluateOne(
    event: MonitorPollEvent,
    state: Record<string, string>,
    allRules: ActiveRules,
    windows: readonly OpenWindow[],
    changes: Changes,
  ) {
    const serverId = event.root_server_id;
    const rules = allRules.list.filter((r) => r.servers === null || r.servers.has(serverId));
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
    const maintenance = calendar.windowOf(windows, serverId, at);
    /** What holds back the notices of a rule's alert now: a maintenance window, or another told server_offline alert. */
    const heldFor = (ruleId: number): string | null => {
      if (maintenance) return windowLabel(maintenance);
      for (const [field, value] of Object.entries(state)) {
        if (!field.startsWith('f:')) continue;
        const other = Number(field.slice(2));
        if (other !== ruleId && allRules.offline.has(other) && toldAt(value) > 0) return 'server_offline is firing';
      }
      return null;
    };
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
            if (told === 0) put(`f:${rule.id}`, await tellLate(serverId, rule, event.at));
            else if (rule.repeat_minutes > 0 && at - told >= rule.repeat_minutes * 60_000) {
              put(`f:${rule.id}`, await repeat(serverId, rule, event.at));
            }
            continue;
          }
          const [since, version] = (pending ?? '').split(':').map(Number);
          const start = pending && version === rule.version ? since! : at;
          if (at - start >= rule.duration_seconds * 1000) {
            const opened = await fire(serverId, rule, value, event.at, heldFor(rule.id));
            // Opened by another worker: when it was told is rebuilt from the database on the next poll.
            if (opened === null) drop('init');
            put(`f:${rule.id}`, opened ?? String(at));
            drop(`s:${rule.id}`);
          } else if (start === at) put(`s:${rule.id}`, `${at}:${rule.version}`);
        } else {
          if (pending) drop(`s:${rule.id}`);
          if (firing !== undefined) {
            await resolve(serverId, rule, rule.id, value, heldFor(rule.id));
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
        if (field.startsWith('f:')) await resolveUnwatched(serverId, ruleId, heldFor(ruleId));
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
      versionKey,
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
    const rules = await activeRules(version || null);
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
        await resolve(serverId, rules.get(rule_id) ?? null, rule_id, null, maintenance ? windowLabel(maintenance) : null, reason);
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
