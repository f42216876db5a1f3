// The run every 5 minutes and what it asks of each domain.
//
// The run (verify_domains) only reads PostgreSQL and queues: one scheduled verify_domain per
// domain that needs work, deduplicated per domain. Each of those jobs, on the domains queue with its
// own deadline, does what that domain needs: removed when its subscription ended (cancelled, or its
// database dropped); for an active domain, the served certificate read again (renewals, expiry
// notices) and, when primary, the tenant's web.base.url written again after a new deployment of
// its database; a domain waiting for DNS is verified (failed ones once an hour).
import type { AppContext } from '../context.js';
import { UserError } from '../core/errors.js';
import { mapLimited } from '../core/session-lock.js';
import { domainJobs } from './domain-job-specs.js';
import { endedWhy, hasEnded, type DomainRun, type DomainVerification, type DomainWithSub } from './domain-verification.js';

const RETRY_FAILED_MS = 60 * 60_000;
/** Jobs added to Redis at once. */
const ADDS_AT_ONCE = 50;

const endedSubscription = { OR: [{ state: 'cancelled' as const }, { database_dropped_at: { not: null } }] };

/** verify_domains: which domains need work, one job each; it touches no host and no tenant. */
export async function queueDomainChecks(ctx: Pick<AppContext, 'db' | 'queues'>, actor: Pick<DomainRun, 'userId'>) {
  const due = await ctx.db.domain.findMany({
    where: {
      OR: [
        { subscription: endedSubscription },
        { state: { in: ['active', 'pending_dns'] } },
        { state: 'failed', OR: [{ checked_at: null }, { checked_at: { lt: new Date(Date.now() - RETRY_FAILED_MS) } }] },
      ],
    },
    select: { id: true, state: true, subscription: { select: { state: true, database_dropped_at: true } } },
    orderBy: { id: 'asc' },
  });
  const result = { queued: due.length, removals: 0, certificate_checks: 0, verifications: 0 };
  for (const d of due) {
    if (hasEnded(d.subscription)) result.removals++;
    else if (d.state === 'active') result.certificate_checks++;
    else result.verifications++;
  }
  await mapLimited(due, ADDS_AT_ONCE, (d) =>
    ctx.queues.enqueue(domainJobs.verify_domain, { domain_id: d.id, scheduled: true, user_id: actor.userId }),
  );
  return result;
}

/** The scheduled verify_domain: what the run asks of one domain (as the job read it; null: removed). */
export async function checkDomain(
  ctx: Pick<AppContext, 'db'>,
  verification: DomainVerification,
  domain: DomainWithSub | null,
  run: DomainRun,
) {
  const { db } = ctx;
  if (!domain) return { skipped: 'the domain was removed' };
  const sub = domain.subscription;
  if (hasEnded(sub)) {
    try {
      await verification.remove(domain, run, endedWhy(sub));
    } catch (err) {
      const message = `Removing ${domain.hostname} of ended subscription ${sub.id} failed: ${(err as Error).message}`;
      if (!run.signal?.aborted) await db.domain.updateMany({ where: { id: domain.id }, data: { last_error: message } });
      throw new UserError(message);
    }
    return { removed: domain.hostname };
  }
  if (domain.state !== 'active') return verification.verify(domain.id, run);

  const certificate = await verification.refreshCertificate(domain, run);
  // Not written yet (the database was suspended or not there), or a deployment after the domain
  // went live wrote SUBSCRIPTION_URL's address over it.
  const deployed = sub.database_created_at;
  const baseUrlDue =
    domain.is_primary && deployed !== null && sub.state === 'running' && !(domain.base_url_at && domain.base_url_at >= deployed);
  if (baseUrlDue) await verification.baseUrlAfterChange(sub.id, run, domain.id);
  return { state: 'active', hostname: domain.hostname, certificate, base_url_written: baseUrlDue };
}
