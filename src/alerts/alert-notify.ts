// Delivery of an alert's push and mail notices (the alert_notify job): push through the rule's
// notification server or the company's default (ntfy: the rule's topic, priority 4; FCM: to the
// topic), mail to the rule's email_to. Each attempt's failure is kept in the alert's notify_error
// and in its action log, and the job fails so that BullMQ retries it with a growing delay;
// channels already delivered are not sent again: each is recorded in the job's data as soon as it
// is sent, so neither a retry nor a rerun after a crash sends it twice (only a crash between the
// send and that record can). The chatter notice was posted with the alert.
import type { Job } from 'bullmq';
import type { AppContext } from '../context.js';
import { writeActionLog } from '../core/action-log.js';
import { renderMail } from '../core/mail.js';
import { publicJobId } from '../core/queue.js';
import { createNotificationService } from '../notifications/index.js';
import type { ALERT_CHANNELS, alertJobs } from './alert-job-specs.js';
import type { JobPayload } from '../core/jobs.js';
import { fireNotice, repeatNotice, resolveNotice, serverLabel } from './alert-text.js';

type Channel = (typeof ALERT_CHANNELS)[number];
type Payload = JobPayload<typeof alertJobs.alert_notify>;

export function createAlertNotifier(ctx: Pick<AppContext, 'db' | 'secretBox' | 'config' | 'queues' | 'mailer'>) {
  const { db } = ctx;
  const notifications = createNotificationService(ctx);

  async function pushServerId(ruleServerId: number | null): Promise<number | null> {
    if (ruleServerId !== null) return ruleServerId;
    const fallback = await db.notificationServer.findFirst({
      where: { is_default: true },
      orderBy: { company_id: 'asc' },
      select: { id: true },
    });
    return fallback?.id ?? null;
  }

  return async function notify(payload: Payload, job: Job) {
    const alert = await db.alert.findUnique({ where: { id: payload.alert_id } });
    if (!alert) return { skipped: 'alert not found' };
    const rule = await db.alertRule.findUnique({ where: { id: alert.rule_id } });
    if (!rule) return { skipped: 'rule deleted' };
    const server = await db.rootServer.findUnique({ where: { id: alert.root_server_id }, select: { name: true, ip: true } });
    if (!server) return { skipped: 'root server deleted' };

    const facts = {
      metric: alert.metric,
      threshold: payload.event === 'resolved' ? (rule.threshold ?? alert.threshold) : alert.threshold,
      value: alert.value,
      resolved_value: alert.resolved_value,
      started_at: alert.started_at,
      resolved_at: alert.resolved_at,
      duration_seconds: rule.duration_seconds,
      rule_name: rule.name,
      // An alert opened silenced was told late, when nothing held it back any more.
      held_reason: alert.silenced ? alert.silenced_reason : null,
      resolved_reason: alert.resolved_reason,
    };
    const label = serverLabel(server);
    const notice =
      payload.event === 'fired'
        ? fireNotice(label, facts)
        : payload.event === 'repeated'
          ? repeatNotice(label, facts, payload.repeat, alert.last_notice_at ?? new Date())
          : resolveNotice(label, facts);
    const jobId = publicJobId(job.queueName, job.id!);
    const delivered = new Set<Channel>(payload.delivered);
    const errors: string[] = [];
    const done: string[] = [];
    /** Remembered in the job at once: a rerun after a crash does not send this channel again. */
    const deliveredBy = async (channel: Channel) => {
      delivered.add(channel);
      await job.updateData({ ...payload, delivered: [...delivered] });
    };

    if (!delivered.has('push')) {
      const via = await pushServerId(rule.notification_server_id);
      if (via === null)
        await deliveredBy('push'); // no notification server: nothing to push through
      else {
        let sent: Awaited<ReturnType<typeof notifications.sendNotification>> | null = null;
        try {
          sent = await notifications.sendNotification(
            via,
            { title: notice.title, message: notice.message, topic: rule.topic, priority: 4 },
            null,
          );
        } catch (err) {
          errors.push(`push via notification server ${via}: ${(err as Error).message}`);
        }
        if (sent) {
          await deliveredBy('push');
          done.push(`push via notification server ${via} (${sent.api}, id ${sent.id})`);
        }
      }
    }
    if (!delivered.has('mail')) {
      if (rule.email_to.length === 0) await deliveredBy('mail');
      else {
        const to = rule.email_to.join(', ');
        let sent = false;
        try {
          const { text, html } = renderMail('alert', { title: notice.title, message: notice.message });
          await ctx.mailer.send({ to, subject: notice.title, text, html });
          sent = true;
        } catch (err) {
          errors.push(`mail to ${to}: ${(err as Error).message}`);
        }
        if (sent) {
          await deliveredBy('mail');
          done.push(`mail to ${to}`);
        }
      }
    }

    const attempt = `attempt ${job.attemptsMade + 1} of ${job.opts.attempts ?? 1}`;
    await writeActionLog(db, {
      model_name: 'svc.alert',
      rec_id: alert.id,
      action_type: 'api_call',
      status: errors.length ? 'failure' : 'success',
      input_text: `Notify ${payload.event} alert ${alert.id} (${attempt}): ${notice.title}`,
      output_text: [...done.map((d) => `sent: ${d}`), ...errors.map((e) => `failed: ${e}`)].join('\n') || 'nothing to send',
      job_id: jobId,
    });
    if (errors.length) {
      await db.alert.update({ where: { id: alert.id }, data: { notify_error: errors.join('\n') } });
      throw new Error(errors.join('\n'));
    }
    await db.alert.update({ where: { id: alert.id }, data: { notified_at: new Date(), notify_error: null } });
    return { event: payload.event, delivered: [...delivered], sent: done };
  };
}
