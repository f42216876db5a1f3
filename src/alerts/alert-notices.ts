// Notices: an alert opens, is told late (it opened while held back), is told again
// (repeat_minutes) or resolves. At most one firing alert per (rule, server) is held by the database
// (a partial unique index): two workers deciding to fire at once insert one alert; only the insert
// that wins posts the chatter notice and queues the delivery. Telling late, repeating and resolving
// are conditional updates, so each too is done (and noticed) once. Push and mail go through the
// alert_notify job, never in the poll.
import type { AppContext } from '../context.js';
import { postMessage } from '../core/chatter.js';
import type { DbTx } from '../core/db.js';
import { alertJobs } from './alert-job-specs.js';
import { alertNotices } from './alert-metrics.js';
import type { RuleFacts } from './alert-rules.js';
import { fireNotice, repeatNotice, resolveNotice, serverLabel, type AlertFacts } from './alert-text.js';

export function createAlertNotices(ctx: Pick<AppContext, 'db' | 'queues'>) {
  const { db } = ctx;

  async function serverName(serverId: number): Promise<string> {
    const server = await db.rootServer.findUnique({ where: { id: serverId }, select: { name: true, ip: true } });
    return server ? serverLabel(server) : `root server ${serverId}`;
  }

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

  return { fire, tellLate, repeat, resolve, resolveUnwatched };
}
