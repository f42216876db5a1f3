// The one notice a certificate gets when it comes close to its end without Caddy having renewed it:
// on the subscription's chatter and as a push through the default notification server.
import type { AppContext } from '../context.js';
import { postMessage } from '../core/chatter.js';
import type { Domain } from '../generated/prisma/client.js';
import { createNotificationService } from '../notifications/index.js';

/** A certificate this close to its end gets one notice (Caddy renews at about 30 days). */
const EXPIRY_NOTICE_DAYS = 14;
const DAY_MS = 86_400_000;

const onSubscription = (id: number) => ({ model_name: 'svc.subscription' as const, rec_id: id });

export function createExpiryNotice(ctx: Pick<AppContext, 'db' | 'secretBox' | 'config' | 'queues' | 'log'>) {
  const { db } = ctx;
  const notifications = createNotificationService(ctx);
  /** One notice per certificate that comes within EXPIRY_NOTICE_DAYS: the subscription's chatter and a push. */
  return async function noticeExpiry(domain: Domain, now = new Date()) {
    const notAfter = domain.certificate_not_after;
    if (!notAfter || notAfter.getTime() - now.getTime() > EXPIRY_NOTICE_DAYS * DAY_MS) return false;
    const claimed = await db.domain.updateMany({
      where: { id: domain.id, OR: [{ expiry_notified_for: null }, { expiry_notified_for: { not: notAfter } }] },
      data: { expiry_notified_for: notAfter },
    });
    if (claimed.count === 0) return false;
    const days = Math.max(0, Math.floor((notAfter.getTime() - now.getTime()) / DAY_MS));
    const title = `Certificate of ${domain.hostname} expires in ${days} days`;
    const message =
      `The HTTPS certificate of ${domain.hostname} (${domain.certificate_issuer ?? 'unknown issuer'}) is valid until ` +
      `${notAfter.toISOString()}. Caddy renews it about 30 days before its end, so renewal has not worked: check that ` +
      `${domain.hostname} still points to ${domain.dns_target ?? 'the Odoo host'} and that the host reaches the ACME server.`;
    await postMessage(db, {
      ...onSubscription(domain.subscription_id),
      body: `${title}. ${message}`,
      message_type: 'notification',
      subtype_xmlid: 'mail.mt_alert',
    });
    const server = await db.notificationServer.findFirst({
      where: { is_default: true },
      orderBy: { company_id: 'asc' },
      select: { id: true },
    });
    if (server) {
      try {
        await notifications.sendNotification(server.id, { title, message, priority: 4 }, null);
      } catch (err) {
        await postMessage(db, {
          ...onSubscription(domain.subscription_id),
          body: `The push notice about ${domain.hostname} could not be sent through notification server ${server.id}: ${(err as Error).message}`,
          message_type: 'notification',
        });
      }
    }
    return true;
  };
}
