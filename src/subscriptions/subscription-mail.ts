// The customer's lifecycle mails, to the partner's address, each recorded in the
// subscription's chatter (message_type email, with its subject and text):
// - trial_ready: a trial subscription is running for the first time (its address and trial end);
// - ready: a paid subscription is running for the first time, and no trial_ready went out for it
//   (a trial converted to paid had its credentials in that one);
// - trial_ending: trial_reminder_days before the trial end, once per trial end;
// - trial_expired: the trial expiry suspended it (once per suspension).
// A mail is due while its column (trial_ready_sent_at, ...) is empty and the subscription is as
// the mail says. Sending claims the column with a conditional update, so two workers never send
// one mail twice; a failed delivery empties it again (and says so in the chatter), so the next
// lifecycle run sends it again while it is still true. Nothing here blocks a state change.
// trial_ready and ready tell the customer's login and password: the deployment's password when it
// sends the mail at once, else (a mail sent again) a new one set in the instance first. So does the
// credentials mail of the operator's resend_credentials (not a lifecycle mail: it has no column).
// The password is in the mail sent and nowhere else: the chatter copy and any log line show
// ******** instead.
import type { AppContext } from '../context.js';
import type { Config } from '../core/config.js';
import { postMessage, postMessageOnce } from '../core/chatter.js';
import { renderMail, textWithoutSecrets, type MailMessage } from '../core/mail.js';
import { newPassword, setCustomerPassword } from '../instances/index.js';
import { onSubscription } from './subscription-audit.js';
import { onInstance } from './subscription-database.js';
import type { Prisma, Settings, Subscription } from '../generated/prisma/client.js';
import { subscriptionUrl } from './subscription-service.js';

export const LIFECYCLE_MAILS = ['trial_ready', 'ready', 'trial_ending', 'trial_expired'] as const;
export type LifecycleMail = (typeof LIFECYCLE_MAILS)[number];

const SENT_COLUMN = {
  trial_ready: 'trial_ready_sent_at',
  ready: 'ready_sent_at',
  trial_ending: 'trial_reminder_sent_at',
  trial_expired: 'trial_expired_sent_at',
} as const satisfies Record<LifecycleMail, keyof Subscription>;

/** The lifecycle mails that tell the customer's login and a password (as the credentials mail does). */
const TELLS_PASSWORD: ReadonlySet<LifecycleMail> = new Set(['trial_ready', 'ready']);

const DAY_MS = 86_400_000;

/** "7 December 2026, 14:05 UTC" */
function formatDate(d: Date): string {
  const date = d.toLocaleDateString('en-GB', { day: 'numeric', month: 'long', year: 'numeric', timeZone: 'UTC' });
  return `${date}, ${d.toISOString().slice(11, 16)} UTC`;
}

/** When each mail is due, besides its column being empty. */
function dueWhere(mail: LifecycleMail, now: Date, reminderDays: number): Prisma.SubscriptionWhereInput {
  switch (mail) {
    case 'trial_ready':
      return {
        is_trial: true,
        state: 'running',
        database_name: { not: null },
        OR: [{ trial_end_date: null }, { trial_end_date: { gt: now } }],
      };
    case 'ready':
      // Only where a password can be set: the database its deployment made.
      return { is_trial: false, state: 'running', database_created_at: { not: null }, trial_ready_sent_at: null };
    case 'trial_ending':
      // After the ready mail (a reminder never comes first).
      return {
        is_trial: true,
        state: 'running',
        trial_ready_sent_at: { not: null },
        trial_end_date: { gt: now, lte: new Date(now.getTime() + reminderDays * DAY_MS) },
      };
    case 'trial_expired':
      return { is_trial: true, state: 'suspended', suspend_reason: 'trial_expired' };
  }
}

export interface MailRunResult {
  sent: number;
  failed: { subscription_id: number; mail: LifecycleMail; error: string }[];
}

/**
 * Sends a mail to a subscription's customer and keeps its copy (secrets masked) in the chatter; a
 * mail that cannot be made or delivered is an alert there instead (with `afterFailure`, what
 * happens next). Answers the error, or null when sent.
 */
export function createCustomerMail(ctx: Pick<AppContext, 'db' | 'mailer' | 'log'>) {
  return async function mailCustomer(
    id: number,
    mail: string,
    build: () => Promise<MailMessage>,
    afterFailure = '',
  ): Promise<string | null> {
    let message: MailMessage | null = null;
    try {
      message = await build();
      await ctx.mailer.send(message);
    } catch (err) {
      const error = (err as Error).message;
      ctx.log.warn({ err, subscription_id: id, mail }, 'customer mail could not be sent');
      await postMessageOnce(ctx.db, {
        ...onSubscription(id),
        body: `The ${mail} e-mail${message ? ` "${message.subject}" to ${message.to}` : ''} could not be sent: ${error}.${afterFailure ? ` ${afterFailure}` : ''}`,
        message_type: 'notification',
        subtype_xmlid: 'mail.mt_alert',
      });
      return error;
    }
    await postMessage(ctx.db, {
      ...onSubscription(id),
      body: `${message.subject}\n\nTo: ${message.to}\n\n${textWithoutSecrets(message)}`,
      message_type: 'email',
      subtype_xmlid: 'mail.mt_comment',
    });
    return null;
  };
}

type Mail = LifecycleMail | 'credentials';
type MailSubscription = Subscription & { partner: { name: string; email: string } };

const SUBJECTS: Record<Mail, (data: { trialEnd: string | null }) => string> = {
  trial_ready: () => 'Your trial is ready',
  ready: () => 'Your subscription is ready',
  trial_ending: (d) => `Your trial ends on ${d.trialEnd}`,
  trial_expired: () => 'Your trial has ended',
  credentials: () => 'Your new password',
};

/** One mail to the subscription's customer; `password` for the mails that tell one. */
function compose(
  config: Pick<Config, 'SUBSCRIPTION_URL'>,
  mail: Mail,
  sub: MailSubscription,
  settings: Settings,
  password: string | null,
): MailMessage {
  const trialEnd = sub.trial_end_date;
  const data = {
    name: sub.partner.name,
    login: sub.partner.email,
    password,
    subscriptionName: sub.name,
    url: subscriptionUrl(config, sub),
    trialEnd: trialEnd ? formatDate(trialEnd) : null,
    daysLeft: trialEnd ? Math.max(1, Math.ceil((trialEnd.getTime() - Date.now()) / DAY_MS)) : null,
    remindDays: settings.trial_reminder_days,
    brand: settings.brand_name,
    // Only promised when the lifecycle really drops expired trials after their grace period.
    deletedAfter: settings.drop_expired_trials && sub.grace_end_date ? formatDate(sub.grace_end_date) : null,
  };
  const subject = SUBJECTS[mail](data);
  return { to: sub.partner.email, subject, ...renderMail(mail, data), secrets: password ? [password] : [] };
}

/**
 * The credentials mail (resend_credentials): `password`, just set in the instance, to the customer,
 * its copy (masked) in the chatter. Answers the error, or null when sent.
 */
export async function mailCredentials(ctx: Pick<AppContext, 'db' | 'mailer' | 'config' | 'log'>, sub: MailSubscription, password: string) {
  const settings = await ctx.db.settings.findUniqueOrThrow({ where: { id: 1 } });
  return createCustomerMail(ctx)(
    sub.id,
    'credentials',
    async () => compose(ctx.config, 'credentials', sub, settings, password),
    'The new password is set in the instance and told to nobody: run resend_credentials again.',
  );
}

export function createLifecycleMail(ctx: Pick<AppContext, 'db' | 'secretBox' | 'mailer' | 'config' | 'log'>) {
  const { db } = ctx;
  const mailCustomer = createCustomerMail(ctx);

  /** The password a ready mail tells: the deployment's, else a new one set in the instance now. */
  async function passwordFor(sub: Subscription, given: string | undefined): Promise<string> {
    if (given) return given;
    const password = newPassword();
    await onInstance(ctx, sub, (query) => setCustomerPassword(query, password));
    return password;
  }

  /** Sends `mail` for one subscription if it is due and no one else claimed it; true when sent. */
  async function sendOne(
    mail: LifecycleMail,
    id: number,
    due: Prisma.SubscriptionWhereInput,
    settings: Settings,
    result: MailRunResult,
    givenPassword?: string,
  ) {
    const column = SENT_COLUMN[mail];
    const claimedAt = new Date();
    const claimed = await db.subscription.updateMany({ where: { id, [column]: null, ...due }, data: { [column]: claimedAt } });
    if (claimed.count !== 1) return;
    const sub = await db.subscription.findUniqueOrThrow({ where: { id }, include: { partner: { select: { name: true, email: true } } } });
    const error = await mailCustomer(
      id,
      mail,
      async () => compose(ctx.config, mail, sub, settings, TELLS_PASSWORD.has(mail) ? await passwordFor(sub, givenPassword) : null),
      'The next lifecycle run sends it again.',
    );
    if (error !== null) {
      await db.subscription.updateMany({ where: { id, [column]: claimedAt }, data: { [column]: null } });
      result.failed.push({ subscription_id: id, mail, error });
      return;
    }
    result.sent++;
  }

  return {
    /** Sends every due mail (of one subscription, or all), one claim at a time. */
    async sendDue(
      opts: {
        subscriptionId?: number;
        mails?: readonly LifecycleMail[];
        /** The password the ready mail tells, just set in the instance (with subscriptionId). */
        password?: string;
      } = {},
    ): Promise<MailRunResult> {
      // Read once per run: every mail of it is composed with the same settings.
      const settings = await db.settings.findUniqueOrThrow({ where: { id: 1 } });
      const reminderDays = settings.trial_reminder_days;
      const result: MailRunResult = { sent: 0, failed: [] };
      for (const mail of opts.mails ?? LIFECYCLE_MAILS) {
        if (mail === 'trial_ending' && reminderDays === 0) continue;
        const now = new Date();
        const due = dueWhere(mail, now, reminderDays);
        const candidates = await db.subscription.findMany({
          where: { ...due, [SENT_COLUMN[mail]]: null, ...(opts.subscriptionId ? { id: opts.subscriptionId } : {}) },
          select: { id: true },
          orderBy: { id: 'asc' },
        });
        for (const c of candidates) await sendOne(mail, c.id, due, settings, result, opts.subscriptionId ? opts.password : undefined);
      }
      return result;
    },
  };
}
