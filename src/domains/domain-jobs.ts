// The domain jobs: verify_domain (one domain, from the action or the run, with its own deadline)
// and verify_domains, the run every 5 minutes (a BullMQ job scheduler: one run per interval across
// every worker), which only queues.
import type { Job } from 'bullmq';
import type { AppContext } from '../context.js';
import { authorOfUser } from '../core/chatter.js';
import { publicJobId } from '../core/queue.js';
import { featureJobs } from '../feature.js';
import { INTERRUPTED } from '../jobs/index.js';
import { checkDomain, queueDomainChecks } from './domain-checks.js';
import { domainJobs } from './domain-job-specs.js';
import { createDomainVerification, hasEnded } from './domain-verification.js';
import { withDeadline } from './job-deadline.js';

const VERIFY_DOMAINS_EVERY_MS = 5 * 60_000;
/**
 * A verification's deadline: SSH, up to three Caddy changes (each validate and reload under the
 * host's lock), the 90 s wait for a certificate; done in seconds when the host answers.
 */
const VERIFY_DEADLINE_MS = 5 * 60_000;
/** An active domain's check: a TLS read of its certificate and perhaps web.base.url in its tenant. */
const CHECK_DEADLINE_MS = 2 * 60_000;

const who = async (ctx: AppContext, payload: { user_id: number | null }, job: Job) => ({
  userId: payload.user_id,
  jobId: publicJobId(job.queueName, job.id!),
  author: await authorOfUser(ctx.db, payload.user_id),
});

export const domainJobHandlers = featureJobs(
  domainJobs,
  (ctx) => {
    const verification = createDomainVerification(ctx);
    return {
      async verify_domain(payload, job) {
        const actor = await who(ctx, payload, job);
        const id = payload.domain_id;
        const domain = await ctx.db.domain.findUnique({ where: { id }, include: { subscription: true } });
        // The run's check of an active domain that stays: a certificate read, no change on the host.
        const checkOnly = payload.scheduled && domain?.state === 'active' && !hasEnded(domain.subscription);
        return withDeadline(
          checkOnly ? CHECK_DEADLINE_MS : VERIFY_DEADLINE_MS,
          `verify_domain of ${domain?.hostname ?? `domain ${id}`}`,
          (signal) => {
            const run = { ...actor, signal };
            return payload.scheduled ? checkDomain(ctx, verification, domain, run) : verification.verify(id, run);
          },
          // An active domain keeps serving: the reason is shown, its state stays.
          async (reason) => {
            const data = checkOnly ? { last_error: reason } : { state: 'failed' as const, last_error: reason };
            await ctx.db.domain.updateMany({ where: { id }, data });
          },
        );
      },
      verify_domains: async (payload) => queueDomainChecks(ctx, { userId: payload.user_id }),
    };
  },
  {
    // Not run again (it may have been changing Caddy's configuration or the tenant): the domain
    // shows it. The run queues active, pending and ended domains again within 5 minutes, failed
    // ones within the hour; an operator can verify at once.
    verify_domain: {
      record: (p) => ({ model_name: 'svc.domain', rec_id: p.domain_id }),
      action_type: 'ssh_command',
      async onInterrupted(tx, payload) {
        const last_error = `${INTERRUPTED}; verify the domain again`;
        // The run's check of an active domain only read its certificate and wrote web.base.url
        // (written again by the next run): the domain keeps serving, the error is shown.
        if (payload.scheduled) await tx.domain.updateMany({ where: { id: payload.domain_id, state: 'active' }, data: { last_error } });
        await tx.domain.updateMany({
          where: { id: payload.domain_id, ...(payload.scheduled ? { state: { not: 'active' } } : {}) },
          data: { state: 'failed', last_error },
        });
      },
    },
  },
);

export async function registerDomainSchedules(ctx: AppContext) {
  await ctx.queues.schedule('verify-domains', { every: VERIFY_DOMAINS_EVERY_MS }, domainJobs.verify_domains, { user_id: null });
}
