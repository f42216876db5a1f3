// Rule evaluation after every recorded monitoring poll (the onMonitorPoll hook), inside the poll's
// job but cheap: one query reads the rules that watch the server together with its firing alerts;
// a second, one indexed range scan of the server's monitor log, runs only when a rule with a
// duration starts to hold (the latest sample meets it and no alert is open). Nothing is kept in
// memory, so any worker can take any poll and a restart loses nothing.
//
// - duration_seconds is sustained: the rule fires when every sample from (newest - duration) to
//   the newest meets the condition, the older end covered by a sample at or before it. A single
//   spike never fires a longer rule, and after a resolve the whole duration must hold again
//   (flapping is bounded by the duration).
// - server_offline holds while server_state is offline; its duration counts from the last good
//   poll (the newest monitor-log row), or from the server's creation when it never had one.
// - At most one firing alert per (rule, server) is held by the database (a partial unique index):
//   two workers evaluating the same server at once insert one alert; only the insert that wins
//   posts the chatter notice and queues the delivery. A resolve is a conditional update, so it too
//   is done (and noticed) once.
// - Push and mail go through the alert_notify job, never in the poll.
import type { AppContext } from '../context.js';
import { postMessage } from '../core/chatter.js';
import type { MonitorPollEvent, MonitorPollObserver } from '../feature.js';
import { Prisma } from '../generated/prisma/client.js';
import type { AlertMetric } from '../generated/prisma/enums.js';
import { alertJobs } from './alert-job-specs.js';
import { fireNotice, resolveNotice, serverLabel, type AlertFacts } from './alert-text.js';

interface RuleRow {
  rule_id: number;
  name: string;
  metric: AlertMetric;
  threshold: number | null;
  duration_seconds: number;
  notify_resolved: boolean;
  applies: boolean;
  alert_id: number | null;
}

interface SampleRow {
  created_at: Date;
  cpu_percent: number;
  ram_percent: number;
  disk_percent: number;
  load_1: number;
}

type Decision = { kind: 'fire'; rule: RuleRow; value: number } | { kind: 'resolve'; rule: RuleRow; value: number | null };

const meets = (value: number, threshold: number | null) => threshold !== null && value >= threshold;

/** How long (ms) the condition has held without a break, judged on samples newest first. */
export function sustainedMs(samples: readonly SampleRow[], metric: Exclude<AlertMetric, 'server_offline'>, threshold: number): number {
  const newest = samples[0];
  if (!newest || !meets(newest[metric], threshold)) return -1;
  let start = newest.created_at.getTime();
  for (const s of samples) {
    if (!meets(s[metric], threshold)) break;
    start = s.created_at.getTime();
  }
  return newest.created_at.getTime() - start;
}

export function createAlertEvaluator(ctx: Pick<AppContext, 'db' | 'queues' | 'log'>): MonitorPollObserver {
  const { db } = ctx;

  /** The rules watching the server (active, listing it or listing none) and any firing alert of it. */
  function rulesOf(serverId: number) {
    return db.$queryRaw<RuleRow[]>`
      SELECT r.id AS rule_id, r.name, r.metric::text AS metric, r.threshold, r.duration_seconds, r.notify_resolved,
        (r.active AND (cardinality(r.root_server_ids) = 0 OR ${serverId}::int = ANY (r.root_server_ids))) AS applies,
        a.id AS alert_id
      FROM alert_rules r
      LEFT JOIN alerts a ON a.rule_id = r.id AND a.root_server_id = ${serverId} AND a.state = 'firing'
      WHERE (r.active AND (cardinality(r.root_server_ids) = 0 OR ${serverId}::int = ANY (r.root_server_ids))) OR a.id IS NOT NULL`;
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

  async function decide(event: MonitorPollEvent, rules: RuleRow[]): Promise<Decision[]> {
    const decisions: Decision[] = [];
    const pending: { rule: RuleRow; value: number }[] = [];
    for (const rule of rules) {
      if (!rule.applies) {
        if (rule.alert_id) decisions.push({ kind: 'resolve', rule, value: null });
        continue;
      }
      let holds: boolean;
      let value: number;
      if (rule.metric === 'server_offline') {
        holds = event.server_state === 'offline';
        value = event.failures;
      } else {
        const v = event.metrics?.[rule.metric];
        if (v === undefined) continue; // a failed poll says nothing about the metrics
        value = v;
        holds = meets(v, rule.threshold);
      }
      if (rule.alert_id && !holds) decisions.push({ kind: 'resolve', rule, value });
      else if (!rule.alert_id && holds) {
        if (rule.duration_seconds === 0) decisions.push({ kind: 'fire', rule, value });
        else pending.push({ rule, value });
      }
    }
    if (pending.length === 0) return decisions;

    const metricRules = pending.filter((p) => p.rule.metric !== 'server_offline');
    if (metricRules.length > 0) {
      const longest = Math.max(...metricRules.map((p) => p.rule.duration_seconds));
      const samples = await window(event.root_server_id, longest);
      for (const p of metricRules) {
        const held = sustainedMs(samples, p.rule.metric as Exclude<AlertMetric, 'server_offline'>, p.rule.threshold!);
        if (held >= p.rule.duration_seconds * 1000) decisions.push({ kind: 'fire', ...p });
      }
    }
    const offline = pending.filter((p) => p.rule.metric === 'server_offline');
    if (offline.length > 0) {
      const since = await failingSince(event.root_server_id);
      for (const p of offline) if (event.at.getTime() - since >= p.rule.duration_seconds * 1000) decisions.push({ kind: 'fire', ...p });
    }
    return decisions;
  }

  async function serverName(serverId: number): Promise<string> {
    const server = await db.rootServer.findUnique({ where: { id: serverId }, select: { name: true, ip: true } });
    return server ? serverLabel(server) : `root server ${serverId}`;
  }

  const facts = (
    rule: RuleRow,
    a: { value: number; resolved_value: number | null; started_at: Date; resolved_at: Date | null; threshold: number | null },
  ): AlertFacts => ({
    metric: rule.metric,
    threshold: a.threshold,
    value: a.value,
    resolved_value: a.resolved_value,
    started_at: a.started_at,
    resolved_at: a.resolved_at,
    duration_seconds: rule.duration_seconds,
    rule_name: rule.name,
  });

  async function fire(serverId: number, rule: RuleRow, value: number) {
    const name = await serverName(serverId);
    const alertId = await db.$transaction(async (tx) => {
      const [row] = await tx.$queryRaw<{ id: number; started_at: Date }[]>`
        INSERT INTO alerts (rule_id, root_server_id, metric, threshold, value)
        VALUES (${rule.rule_id}, ${serverId}, ${rule.metric}::"AlertMetric", ${rule.threshold}, ${value})
        ON CONFLICT (rule_id, root_server_id) WHERE state = 'firing' DO NOTHING
        RETURNING id, started_at`;
      if (!row) return null; // another worker opened it first
      const notice = fireNotice(name, facts(rule, { ...row, value, threshold: rule.threshold, resolved_value: null, resolved_at: null }));
      await postMessage(tx, {
        model_name: 'svc.root.server',
        rec_id: serverId,
        body: `${notice.title}\n${notice.message}`,
        message_type: 'notification',
        subtype_xmlid: 'mail.mt_alert',
      });
      return row.id;
    });
    if (alertId) await ctx.queues.enqueue(alertJobs.alert_notify, { alert_id: alertId, event: 'fired' });
  }

  async function resolve(serverId: number, rule: RuleRow, value: number | null) {
    const name = await serverName(serverId);
    const resolved = await db.$transaction(async (tx) => {
      const [row] = await tx.$queryRaw<{ id: number; value: number; threshold: number | null; started_at: Date; resolved_at: Date }[]>`
        UPDATE alerts SET state = 'resolved', resolved_at = CURRENT_TIMESTAMP, resolved_value = ${value}
        WHERE id = ${rule.alert_id} AND state = 'firing'
        RETURNING id, value, threshold, started_at, resolved_at`;
      if (!row || !rule.notify_resolved) return null; // resolved by another worker, or silently
      // Judged against the rule as it is now (a raised threshold is what resolved it).
      const notice = resolveNotice(name, facts(rule, { ...row, threshold: rule.threshold ?? row.threshold, resolved_value: value }));
      await postMessage(tx, {
        model_name: 'svc.root.server',
        rec_id: serverId,
        body: `${notice.title}\n${notice.message}`,
        message_type: 'notification',
        subtype_xmlid: 'mail.mt_alert',
      });
      return row.id;
    });
    if (resolved) await ctx.queues.enqueue(alertJobs.alert_notify, { alert_id: resolved, event: 'resolved' });
  }

  return async function evaluate(event: MonitorPollEvent) {
    const rules = await rulesOf(event.root_server_id);
    if (rules.length === 0) return;
    for (const d of await decide(event, rules)) {
      try {
        if (d.kind === 'fire') await fire(event.root_server_id, d.rule, d.value);
        else await resolve(event.root_server_id, d.rule, d.value);
      } catch (err) {
        ctx.log.error({ err, root_server_id: event.root_server_id, rule_id: d.rule.rule_id }, `alert ${d.kind} failed`);
      }
    }
  };
}
