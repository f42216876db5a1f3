// The domain jobs: verify_domain (one domain, from the action or the run) and verify_domains, the
// run every 5 minutes (a BullMQ job scheduler: one run per interval across every worker).
import type { Job } from 'bullmq';
import type { AppContext } from '../context.js';
import { authorOfUser } from '../core/chatter.js';
import { publicJobId } from '../core/queue.js';
import { featureJobs } from '../feature.js';
import { INTERRUPTED } from '../jobs/index.js';
import { domainJobs } from './domain-job-specs.js';
import { runDomainChecks } from './domain-checks.js';
import { createDomainVerification } from './domain-verification.js';

const VERIFY_DOMAINS_EVERY_MS = 5 * 60_000;

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
      verify_domain: async (payload, job) => verification.verify(payload.domain_id, await who(ctx, payload, job)),
      verify_domains: async (payload, job) => runDomainChecks(ctx, verification, await who(ctx, payload, job)),
    };
  },
  {
    // Not run again (it was changing Caddy's configuration): the domain shows it; verify again.
    verify_domain: {
      record: (p) => ({ model_name: 'svc.domain', rec_id: p.domain_id }),
      action_type: 'ssh_command',
      async onInterrupted(tx, payload) {
        await tx.domain.updateMany({
          where: { id: payload.domain_id },
          data: { state: 'failed', last_error: `${INTERRUPTED}; verify the domain again` },
        });
      },
    },
  },
);

export async function registerDomainSchedules(ctx: AppContext) {
  await ctx.queues.schedule('verify-domains', { every: VERIFY_DOMAINS_EVERY_MS }, domainJobs.verify_domains, { user_id: null });
}
