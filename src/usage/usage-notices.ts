// What the customer is told about their usage: a rise to warning (≥ 80 % of a limit) or exceeded
// (≥ 100 %) once per rise — in the chatter and by mail, naming the measure, the value and the limit
// — and a suspension for being over the limits. A rise is claimed with a conditional update of
// usage_notified_state, so two rounds never tell it twice; it is told again only after usage fell
// below 80 %.
import type { AppContext } from '../context.js';
import { postMessage } from '../core/chatter.js';
import { renderMail } from '../core/mail.js';
import type { Partner, Settings, Subscription } from '../generated/prisma/client.js';
import { createCustomerMail, subscriptionUrl, describeMeasure, rises, type Measure } from '../subscriptions/index.js';

type UsageMail = 'usage_warning' | 'usage_exceeded' | 'usage_suspended';
/** The partner and settings a round has read already (one read per round, not per notice). */
type Known = { partner?: Partner; settings?: Settings };

const SUBJECTS: Record<UsageMail, string> = {
  usage_warning: 'Your subscription is near its limits',
  usage_exceeded: 'Your subscription is over its limits',
  usage_suspended: 'Your subscription is suspended: over its limits',
};

export function createUsageNotices(ctx: Pick<AppContext, 'db' | 'mailer' | 'config' | 'log'>) {
  const { db } = ctx;
  const mailCustomer = createCustomerMail(ctx);

  /** The chatter note (unless the change posts its own) and the mail. `known`: what the caller read already. */
  async function tell(sub: Subscription, mail: UsageMail, worst: Measure | null, note = true, known: Known = {}) {
    const measure = worst ? describeMeasure(worst) : 'usage over the package limits';
    if (note)
      await postMessage(db, {
        model_name: 'svc.subscription',
        rec_id: sub.id,
        body: `${SUBJECTS[mail]}: ${measure}.`,
        message_type: 'notification',
        subtype_xmlid: mail === 'usage_warning' ? 'mail.mt_note' : 'mail.mt_alert',
      });
    await mailCustomer(sub.id, mail, async () => {
      const [partner, settings] = await Promise.all([
        known.partner ?? db.partner.findUniqueOrThrow({ where: { id: sub.partner_id } }),
        known.settings ?? db.settings.findUniqueOrThrow({ where: { id: 1 } }),
      ]);
      const data = {
        name: partner.name,
        subscriptionName: sub.name,
        url: subscriptionUrl(ctx.config, sub),
        measure,
        graceDays: settings.enforce_limits ? settings.limit_grace_days : null,
        brand: settings.brand_name,
      };
      return { to: partner.email, subject: SUBJECTS[mail], ...renderMail(mail, data) };
    });
  }

  return {
    /** After a round stored `sub`'s state: tells a rise once; true when it told one. */
    async afterRound(sub: Subscription, worst: Measure | null, known: Known = {}): Promise<boolean> {
      if (sub.usage_state === 'ok') {
        if (sub.usage_notified_state !== 'ok') {
          await db.subscription.updateMany({ where: { id: sub.id, usage_state: 'ok' }, data: { usage_notified_state: 'ok' } });
        }
        return false;
      }
      if (!rises(sub.usage_notified_state, sub.usage_state)) return false;
      const claimed = await db.subscription.updateMany({
        where: { id: sub.id, usage_notified_state: sub.usage_notified_state, usage_state: sub.usage_state },
        data: { usage_notified_state: sub.usage_state },
      });
      if (claimed.count !== 1) return false;
      await tell(sub, sub.usage_state === 'exceeded' ? 'usage_exceeded' : 'usage_warning', worst, true, known);
      return true;
    },

    /** The suspension's own chatter note says why; the customer gets the mail. */
    suspended: (sub: Subscription, worst: Measure | null) => tell(sub, 'usage_suspended', worst, false),
  };
}
