// Operations whose in-progress state would outlive a job Redis lost (its data emptied while the job
// ran): each records its job, and a sweep ends it cleanly. A deployment would stay `deploying` for
// ever: it records its job on the subscription (operation `deploy`), and recover_lost_operations
// removes what it made (database, its role, filestore, the role's credentials file), fails it,
// tells the trial request it came from, the action log and the chatter; a run of the lost job still
// going never makes the subscription `running`. A staging copy would stay `creating` (never
// dropped, never expired): staging_expire drops what was made and fails it.
import { execFileSync } from 'node:child_process';
import { mkdir, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { LOST_WITH_REDIS } from '../src/jobs/job-interruption.js';
import { stagingJobs } from '../src/staging/staging-job-specs.js';
import { subscriptionJobs } from '../src/subscriptions/index.js';
import { deploySubscription } from '../src/subscriptions/subscription-deployment.js';
import { findJob, waitForJob } from './helpers/api.js';
import { databaseRow, messages } from './helpers/lifecycle.js';
import { useOdooHost } from './helpers/odoo-host.js';
import { TENANT_ROLE } from './helpers/odoo-template.js';
import { adminQuery, dropDatabase } from './helpers/pg.js';
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

describe('a staging copy whose job Redis lost', () => {
  it('is failed by staging_expire: what was made dropped, the action log and the chatter told', async () => {
    const sub = await f.fx.deployed();
    const copy = `${t.ctx.dbName}_stg_lost`;
    const row = await t.ctx.db.stagingInstance.create({
      data: {
        subscription_id: sub.id,
        database_name: copy,
        postgresql_server_id: f.fx.serverId,
        root_server_id: f.rootServerId,
        url: `https://${copy}.staging.test`,
        expires_at: new Date(Date.now() + 7 * 24 * HOUR),
      },
    });
    // Half made (the job's first steps), its job as request() queues and records it (delayed: no worker takes it).
    await adminQuery(`CREATE DATABASE "${copy}"`);
    await mkdir(f.filestore(copy), { recursive: true });
    await writeFile(path.join(f.filestore(copy), 'half'), 'copied so far');
    const jobId = await t.ctx.queues.enqueue(stagingJobs.staging_create, { staging_instance_id: row.id }, { delay: HOUR });
    await t.ctx.db.stagingInstance.update({ where: { id: row.id }, data: { job_id: jobId } });
    try {
      await (await findJob(t.ctx, jobId))!.remove();
      const sweep = await t.ctx.queues.enqueue(stagingJobs.staging_expire, { user_id: null });
      const done = await waitForJob(t.app, t.as.operator, sweep, 120_000);
      expect(done.state, done.error).toBe('completed');
      expect(done.result).toMatchObject({ lost: [copy] });

      const after = await t.ctx.db.stagingInstance.findUniqueOrThrow({ where: { id: row.id } });
      expect(after.state).toBe('failed');
      expect(after.error).toBe(`${LOST_WITH_REDIS} (job ${jobId})`);
      expect(await databaseRow(copy)).toBeNull();
      await expect(stat(f.filestore(copy))).rejects.toThrow(/ENOENT/);
      expect(await t.ctx.db.actionLog.findMany({ where: { job_id: jobId } })).toEqual([
        expect.objectContaining({ model_name: 'svc.subscription', rec_id: sub.id, status: 'failure', output_text: LOST_WITH_REDIS }),
      ]);
      const said = (await messages(t, sub.id)).map((m) => m.body);
      expect(said).toContainEqual(`Staging copy ${copy} failed: Redis lost its job ${jobId}; what it made was removed.`);

      // A second sweep finds nothing more; the failed copy can be dropped as usual.
      const again = await waitForJob(
        t.app,
        t.as.operator,
        await t.ctx.queues.enqueue(stagingJobs.staging_expire, { user_id: null }),
        120_000,
      );
      expect(again.result).toMatchObject({ lost: [] });
    } finally {
      await dropDatabase(copy);
    }
  });
});
