// A deployment whose job Redis lost (its data emptied while the job ran) would stay `deploying` for
// ever: nothing ends it. The deployment records its job on the subscription (operation `deploy`),
// and the lost-operations sweep (recover_lost_operations) fails it cleanly: what it made is removed
// (database, its role, filestore, the role's credentials file), the subscription goes `failed`,
// the trial request it came from is told, the action log and the chatter say why. A deployment
// still running somewhere after that never makes the subscription `running`.
import { execFileSync } from 'node:child_process';
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { LOST_WITH_REDIS } from '../src/jobs/job-interruption.js';
import { subscriptionJobs } from '../src/subscriptions/index.js';
import { deploySubscription } from '../src/subscriptions/subscription-deployment.js';
import { findJob, waitForJob } from './helpers/api.js';
import { databaseRow, messages } from './helpers/lifecycle.js';
import { useOdooHost } from './helpers/odoo-host.js';
import { TENANT_ROLE } from './helpers/odoo-template.js';
import { adminQuery } from './helpers/pg.js';
import { createTrialPackage } from './helpers/trial.js';

const f = useOdooHost({ 'ab/logo': 'logo bytes' });
const { t } = f;
const HOUR = 3_600_000;

const credentialsFile = (database: string) => path.join(f.base, 'config', 'tenant-roles', database);

async function recover() {
  const id = await t.ctx.queues.enqueue(subscriptionJobs.recover_lost_operations, { user_id: null });
  const job = await waitForJob(t.app, t.as.operator, id, 120_000);
  expect(job.state, job.error).toBe('completed');
  return job.result as { released: number[] };
}

describe('a deployment whose job Redis lost', () => {
  beforeAll(async () => {
    // The host's Odoo user and role, as in tenant-roles.test.ts: the copy gets a role of its own and a credentials file.
    execFileSync('sh', [
      '-c',
      'id odoo >/dev/null 2>&1 || useradd --system --user-group --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin odoo',
    ]);
    await t.ctx.db.rootServer.update({ where: { id: f.rootServerId }, data: { odoo_db_user: TENANT_ROLE } });
  });

  it('is failed by the sweep: what it made removed, the trial request and the operator told; the lost run never makes it running', async () => {
    const pkg = await createTrialPackage(t.ctx, { database_template_id: f.fx.templateId });
    const partner = await f.fx.partner();
    const trialRequest = await t.ctx.db.trialRequest.create({
      data: {
        name: 'Lost',
        company_name: 'Lost Co',
        email: partner.email,
        mobile: '+49 170 1234567',
        company_size: 's1_5',
        trial_package_id: pkg.id,
        partner_id: partner.id,
      },
    });
    const database = `${t.ctx.dbName}_lost`;
    const sub = await t.ctx.db.subscription.create({
      data: {
        name: 'Lost',
        partner_id: partner.id,
        is_trial: true,
        state: 'confirmed',
        database_template_id: f.fx.templateId,
        database_name: database,
      },
    });
    await t.ctx.db.trialRequest.update({ where: { id: trialRequest.id }, data: { subscription_id: sub.id } });

    // The job as the API queues it (delayed: no worker takes it); the deployment runs here in its
    // place and stops before it records the outcome, as a worker whose Redis lost the job would.
    const jobId = await t.ctx.queues.enqueue(subscriptionJobs.deploy_subscription, { subscription_id: sub.id }, { delay: HOUR });
    let resume!: () => void;
    const resumed = new Promise<void>((resolve) => {
      resume = resolve;
    });
    let paused!: () => void;
    const atRecording = new Promise<void>((resolve) => {
      paused = resolve;
    });
    const deployment = deploySubscription(t.ctx, sub.id, { userId: null, jobId }, async ({ step }) => {
      if (step !== 'recording') return;
      paused();
      await resumed;
    });
    deployment.catch(() => {});
    await atRecording;

    const made = await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: sub.id } });
    expect(made.state).toBe('deploying');
    const role = made.database_role!;
    expect(await databaseRow(database)).not.toBeNull();
    expect(await adminQuery('SELECT 1 FROM pg_roles WHERE rolname = $1', [role])).toHaveLength(1);
    await stat(f.filestore(database));
    await stat(credentialsFile(database));

    // What Redis losing its data does to the job.
    await (await findJob(t.ctx, jobId))!.remove();
    expect(await recover()).toEqual({ released: [sub.id] });

    const after = await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: sub.id } });
    expect({ state: after.state, operation: after.operation, operation_job_id: after.operation_job_id }).toEqual({
      state: 'failed',
      operation: null,
      operation_job_id: null,
    });
    expect(await databaseRow(database)).toBeNull();
    expect(await adminQuery('SELECT 1 FROM pg_roles WHERE rolname = $1', [role])).toEqual([]);
    await expect(stat(f.filestore(database))).rejects.toThrow(/ENOENT/);
    await expect(stat(credentialsFile(database))).rejects.toThrow(/ENOENT/);
    expect({ oid: after.database_oid, role: after.database_role }).toEqual({ oid: null, role: null });

    // The action log: no row of the lost job left running; the sweep's removal, with what it removed.
    expect(await t.ctx.db.actionLog.count({ where: { job_id: jobId, status: 'running' } })).toBe(0);
    const removal = await t.ctx.db.actionLog.findFirstOrThrow({
      where: { model_name: 'svc.subscription', rec_id: sub.id, input_text: { contains: `remove what deploy_subscription (job ${jobId}` } },
    });
    expect(removal).toMatchObject({ action_type: 'deployment', status: 'success', job_id: expect.stringMatching(/^lifecycle-/) });
    expect(removal.output_text).toContain(`Database ${database} it made was dropped.`);
    const said = (await messages(t, sub.id)).map((m) => m.body);
    expect(said).toContainEqual(
      expect.stringContaining(`deploy_subscription (job ${jobId}) was interrupted: Redis lost the job while it ran.`),
    );
    expect(said).toContainEqual(
      `Deployment failed: Redis lost its job ${jobId}. Database ${database} it made was dropped. Its filestore was removed. Its role's credentials file was removed.`,
    );
    const told = await t.ctx.db.message.findMany({ where: { model_name: 'svc.subscription.trial.request', rec_id: trialRequest.id } });
    expect(told.map((m) => m.body)).toContainEqual(`Deployment of subscription ${sub.id} failed: ${LOST_WITH_REDIS}`);

    // The lost run goes on (its worker never died): it ends failed, and the subscription stays failed.
    resume();
    await expect(deployment).rejects.toThrow(/no longer deploying/);
    expect((await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: sub.id } })).state).toBe('failed');
    expect(await databaseRow(database)).toBeNull();

    // A second sweep finds nothing more.
    expect(await recover()).toEqual({ released: [] });
  });
});
