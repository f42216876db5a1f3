// The run every 5 minutes: domains of ended subscriptions (cancelled, or their database dropped)
// are removed; active domains have their served certificate read again (renewals, expiry notices)
// and, when primary, their tenant's web.base.url written again after a new deployment of its
// database; domains waiting for DNS get a verify_domain job (failed ones once an hour).
import type { AppContext } from '../context.js';
import { domainJobs } from './domain-job-specs.js';
import type { DomainVerification } from './domain-verification.js';
import type { DomainActor } from './tenant-base-url.js';

const RETRY_FAILED_MS = 60 * 60_000;
/** Certificates read at once. */
const READS_AT_ONCE = 10;

export async function runDomainChecks(ctx: Pick<AppContext, 'db' | 'queues'>, verification: DomainVerification, actor: DomainActor) {
  const { db } = ctx;
  const result = { removed: [] as string[], certificates_read: 0, base_urls_written: 0, queued: 0, errors: [] as string[] };

  const ended = await db.domain.findMany({
    where: { subscription: { OR: [{ state: 'cancelled' }, { database_dropped_at: { not: null } }] } },
    include: { subscription: true },
    orderBy: { id: 'asc' },
  });
  for (const domain of ended) {
    const sub = domain.subscription;
    try {
      await verification.remove(domain, actor, `subscription ${sub.id} is ${sub.database_dropped_at ? 'dropped' : sub.state}`);
      result.removed.push(domain.hostname);
    } catch (err) {
      const message = `Removing ${domain.hostname} of ended subscription ${sub.id} failed: ${(err as Error).message}`;
      await db.domain.updateMany({ where: { id: domain.id }, data: { last_error: message } });
      result.errors.push(message);
    }
  }

  const active = await db.domain.findMany({ where: { state: 'active' }, include: { subscription: true }, orderBy: { id: 'asc' } });
  for (let i = 0; i < active.length; i += READS_AT_ONCE) {
    await Promise.all(active.slice(i, i + READS_AT_ONCE).map((d) => verification.refreshCertificate(d, actor)));
  }
  result.certificates_read = active.length;
  // Not written yet (the database was suspended or not there), or a deployment after the domain
  // went live wrote SUBSCRIPTION_URL's address over it.
  for (const domain of active) {
    const deployed = domain.subscription.database_created_at;
    if (!domain.is_primary || !deployed || domain.subscription.state !== 'running') continue;
    if (domain.base_url_at && domain.base_url_at >= deployed) continue;
    await verification.baseUrlAfterChange(domain.subscription_id, actor, domain.id);
    result.base_urls_written++;
  }

  const due = await db.domain.findMany({
    where: {
      OR: [
        { state: 'pending_dns' },
        { state: 'failed', OR: [{ checked_at: null }, { checked_at: { lt: new Date(Date.now() - RETRY_FAILED_MS) } }] },
      ],
    },
    select: { id: true },
    orderBy: { id: 'asc' },
  });
  for (const { id } of due) await ctx.queues.enqueue(domainJobs.verify_domain, { domain_id: id, user_id: null });
  result.queued = due.length;
  return result;
}
