// A backup, restore or drop claims its subscription while its job runs. When Redis loses its data
// the job is gone and nothing would end the claim: every later backup, restore or drop of that
// subscription would be refused (409) for ever. The recover_lost_operations job (every 10 minutes)
// records such a claim as an interruption and ends it; a claim whose job Redis still has is left.
import { describe, expect, it } from 'vitest';
import { LOST_WITH_REDIS } from '../src/jobs/job-interruption.js';
import { subscriptionJobs } from '../src/subscriptions/index.js';
import { findJob, waitForJob } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';

const t = useTestApp({ workers: true });
const HOUR = 3_600_000;

async function backupClaimedSubscription(name: string) {
  const partner = await t.ctx.db.partner.create({ data: { name, email: `${name.toLowerCase()}-${Date.now()}@svc.test` } });
  const sub = await t.ctx.db.subscription.create({
    data: { name, partner_id: partner.id, state: 'running', database_name: `${name.toLowerCase()}_db` },
  });
  // The job as the API queues it; delayed, so that no worker runs it during the test.
  const jobId = await t.ctx.queues.enqueue(subscriptionJobs.backup_subscription, { subscription_id: sub.id }, { delay: HOUR });
  await t.ctx.db.subscription.update({ where: { id: sub.id }, data: { operation: 'backup', operation_job_id: jobId } });
  return { sub, jobId };
}

async function recover() {
  const id = await t.ctx.queues.enqueue(subscriptionJobs.recover_lost_operations, { user_id: null });
  const job = await waitForJob(t.app, t.as.operator, id);
  expect(job.state).toBe('completed');
  return job.result as { released: number[] };
}

describe('a subscription claimed by a job Redis lost', () => {
  it('is released and the interruption recorded (action log, chatter); a claim whose job is there is left; a second run changes nothing', async () => {
    const lost = await backupClaimedSubscription('Lost');
    const kept = await backupClaimedSubscription('Kept');
    // What Redis losing its data does to the job (the claim stays in PostgreSQL).
    await (await findJob(t.ctx, lost.jobId))!.remove();

    expect(await recover()).toEqual({ released: [lost.sub.id] });

    const after = await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: lost.sub.id } });
    expect({ operation: after.operation, operation_job_id: after.operation_job_id }).toEqual({ operation: null, operation_job_id: null });
    expect(await t.ctx.db.actionLog.findMany({ where: { job_id: lost.jobId } })).toEqual([
      expect.objectContaining({
        model_name: 'svc.subscription',
        rec_id: lost.sub.id,
        action_type: 'database',
        status: 'failure',
        output_text: LOST_WITH_REDIS,
      }),
    ]);
    const messages = await t.ctx.db.message.findMany({ where: { model_name: 'svc.subscription', rec_id: lost.sub.id } });
    expect(messages.map((m) => m.body)).toContainEqual(
      `backup_subscription (job ${lost.jobId}) was interrupted: Redis lost the job while it ran. It was not run again ` +
        'because it changes a remote system; check the remote side before running it again.',
    );

    const stillKept = await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: kept.sub.id } });
    expect({ operation: stillKept.operation, operation_job_id: stillKept.operation_job_id }).toEqual({
      operation: 'backup',
      operation_job_id: kept.jobId,
    });

    expect(await recover()).toEqual({ released: [] });
    expect(await t.ctx.db.actionLog.count({ where: { job_id: lost.jobId } })).toBe(1);
    await (await findJob(t.ctx, kept.jobId))!.remove();
  });
});
