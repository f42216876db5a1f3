// The tenant's web.base.url follows its domains: https://<primary domain> while that domain is
// active, else the subscription's own address (SUBSCRIPTION_URL). Written inside the customer's
// database (once it is known to be the one its deployment created), with an action-log row.
import type { AppContext } from '../context.js';
import { startActionLog } from '../core/action-log.js';
import { postMessage, type Author } from '../core/chatter.js';
import { UserError } from '../core/errors.js';
import { setBaseUrl } from '../instances/index.js';
import { onInstance, subscriptionUrl, type Actor } from '../subscriptions/index.js';

/** Whom a domain change is done for, and the author its chatter notices carry. */
export interface DomainActor extends Actor {
  author: Author | null;
}

/**
 * Writes the address the tenant should have now; null when there is no database to write to, or it
 * is suspended (closed to every connection: the run writes it once it runs again).
 */
export async function applyBaseUrl(ctx: Pick<AppContext, 'db' | 'secretBox' | 'config'>, subscriptionId: number, actor: DomainActor) {
  const { db } = ctx;
  const sub = await db.subscription.findUnique({ where: { id: subscriptionId } });
  if (!sub?.database_created_at || sub.database_dropped_at || sub.state === 'suspended') return null;
  const primary = await db.domain.findFirst({ where: { subscription_id: sub.id, is_primary: true, state: 'active' } });
  const url = primary ? `https://${primary.hostname}` : subscriptionUrl(ctx.config, sub);
  if (!url) return null;
  const step = await startActionLog(db, {
    model_name: 'svc.subscription',
    rec_id: sub.id,
    action_type: 'database',
    input_text: `web.base.url = ${url} -- in ${sub.database_name}`,
    user_id: actor.userId,
    job_id: actor.jobId,
  });
  try {
    await onInstance(ctx, sub, (query) => setBaseUrl(query, url));
  } catch (err) {
    const message = `web.base.url of ${sub.database_name} could not be set to ${url}: ${(err as Error).message}`;
    await step.finish('failure', message);
    throw new UserError(message);
  }
  await step.finish('success', `web.base.url = ${url}`);
  await db.$transaction([
    db.domain.updateMany({ where: { subscription_id: sub.id, NOT: { id: primary?.id ?? 0 } }, data: { base_url_at: null } }),
    ...(primary ? [db.domain.updateMany({ where: { id: primary.id }, data: { base_url_at: new Date() } })] : []),
  ]);
  await postMessage(db, {
    model_name: 'svc.subscription',
    rec_id: sub.id,
    body: `The instance's web.base.url is now ${url}.`,
    message_type: 'notification',
    author: actor.author,
  });
  return url;
}
