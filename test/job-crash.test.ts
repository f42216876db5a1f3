// Crash recovery of jobs, with real processes: a worker started as `npm start` with
// SVC_ROLE=worker is killed with SIGKILL while it runs a job, then another worker takes over.
// A job that changes a remote system (run_cmd on a real sshd) is not run again: it ends failed
// with `interrupted`, and the action log, the chatter and cmd_output say so. An idempotent
// maintenance job (key rotation, its data side is tested halfway in secrets.test.ts) is run again.
// Stall detection is shortened through JOB_LOCK_MS / JOB_STALLED_INTERVAL_MS.
import { readFileSync } from 'node:fs';
import { chmod, mkdtemp, readFile, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { startWorkers, type Workers } from '../src/worker.js';
import { BULLMQ_STALLED_REASON, jobErrorOf, recordInterruption } from '../src/jobs/job-interruption.js';
import { createJobCatalog, type JobSpec } from '../src/core/jobs.js';
import { composeFeatures } from '../src/features.js';
import { subscriptionJobHandlers } from '../src/subscriptions/subscription-jobs.js';
import { postgresqlServerModel } from '../src/postgresql/postgresql-models.js';
import { keyVersionOf } from '../src/core/crypto.js';
import { createRecordService } from '../src/core/records.js';
import { actionsOf, confirmedRootServer, findJob, request, waitForJob } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';
import { useSshd } from './helpers/sshd.js';
import { startService, type ServiceProcess } from './helpers/spawn.js';

const TIMINGS = { JOB_LOCK_MS: '2000', JOB_STALLED_INTERVAL_MS: '1000' };

const sshd = useSshd();
let scratch: string;
let worker: ServiceProcess | null = null;
let workers: Workers | null = null;

beforeAll(async () => {
  scratch = await mkdtemp(path.join(tmpdir(), 'svc-job-crash-'));
  await chmod(scratch, 0o777); // the SSH test user writes the marker here
});
afterAll(async () => {
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

const t = useTestApp({ env: TIMINGS });
const act = actionsOf(t, 'root-servers');

afterEach(async () => {
  await worker?.kill9();
  worker = null;
  await workers?.close();
  workers = null;
});

/** A worker process on this test's database, Redis prefix and master key. */
function startWorkerProcess(): Promise<ServiceProcess> {
  return startService({
    SVC_ROLE: 'worker',
    DATABASE_URL: t.ctx.config.DATABASE_URL,
    REDIS_URL: t.ctx.config.REDIS_URL,
    QUEUE_PREFIX: t.ctx.config.QUEUE_PREFIX,
    SVC_MASTER_KEY_FILE: t.ctx.config.SVC_MASTER_KEY_FILE,
    LOG_LEVEL: 'info',
    // No metrics listener: its fixed port would be taken by any other worker process on the machine.
    METRICS_PORT: '0',
    ...TIMINGS,
  });
}

/** How long a test waits for a step of the worker (vi.waitUntil polls every 50 ms). */
const WAIT = { timeout: 30_000 };

const readLines = async (file: string) => (await readFile(file, 'utf8').catch(() => '')).split('\n').filter(Boolean);

describe('crash recovery per queue', () => {
  it('jobs that change a remote system are never run again; maintenance is', () => {
    const catalog = composeFeatures(t.ctx).jobs;
    expect(Object.fromEntries(catalog.queueNames().map((q) => [q, catalog.afterCrashOf(q)]))).toEqual({
      maintenance: 'rerun',
      trials: 'rerun',
      lifecycle: 'rerun',
      alerts: 'rerun',
      monitor: 'rerun',
      ssh: 'interrupt',
      deployments: 'interrupt',
      backups: 'interrupt',
      notifications: 'interrupt',
      domains: 'interrupt',
      odoo: 'interrupt',
      rollouts: 'rerun',
      staging: 'rerun',
      moves: 'rerun',
      pools: 'rerun',
    });
  });

  it('a queue mixing both kinds is refused', () => {
    const mixed = [
      { name: 'a', queue: 'q', afterCrash: 'rerun' },
      { name: 'b', queue: 'q', afterCrash: 'interrupt' },
    ] as JobSpec[];
    expect(() => createJobCatalog(mixed)).toThrow(/Queue q mixes .*a: rerun, b: interrupt/);
  });

  it("BullMQ's own stall limit (a crash while the interruption was being recorded) reads as interrupted", () => {
    expect(jobErrorOf({ failedReason: BULLMQ_STALLED_REASON, stalledCounter: 2 })).toBe(
      'interrupted: the worker stopped while the job ran (2 times); it is not run again',
    );
    expect(jobErrorOf({ failedReason: 'Connection refused' })).toBe('Connection refused');
    // The reason is BullMQ's text: an upgrade that changes it must fail here.
    const script = path.join(path.dirname(createRequire(import.meta.url).resolve('bullmq')), 'commands', 'moveStalledJobsToWait-9.lua');
    expect(readFileSync(script, 'utf8')).toContain(`"${BULLMQ_STALLED_REASON}"`);
  });
});

describe('kill -9 of the worker during run_cmd', () => {
  it('runs the command once: the job ends failed/interrupted, the action log, chatter and cmd_output say so', async () => {
    const serverId = (await confirmedRootServer(t.app, t.as.operator, sshd)).id;

    const marker = path.join(scratch, 'marker');
    const cmd = `echo ran >> ${marker}; sleep 20`;
    worker = await startWorkerProcess();
    const queued = await act(serverId, 'run_cmd', { cmd });
    expect(queued.statusCode, queued.body).toBe(202);
    const jobId = queued.json().job_id as string;

    // The command has started on the server, and its row is in the action log before it ends.
    await vi.waitUntil(async () => (await readLines(marker)).length === 1, WAIT);
    const running = await t.ctx.db.actionLog.findMany({ where: { job_id: jobId } });
    expect(running).toEqual([expect.objectContaining({ action_type: 'ssh_command', status: 'running', input_text: cmd })]);

    await worker.kill9();
    worker = null;
    workers = await startWorkers(t.ctx);

    const job = await waitForJob(t.app, t.as.user, jobId, 60_000);
    expect(job).toMatchObject({ state: 'failed', name: 'root_server_run_cmd' });
    expect(job.error).toMatch(
      /^interrupted: the worker stopped while the job ran; it was not run again because it changes a remote system$/,
    );
    const server = (await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/root-servers/${serverId}` })).json();
    expect(server.cmd_output).toMatch(
      new RegExp(`^\\[interrupted\\] The worker stopped while the command ran \\(job ${jobId}\\); the command was not run again`),
    );

    // The queue went on past the stalled job (the old behaviour ran it again at this point):
    // a later command on the same queue completes, and the first one ran exactly once.
    const next = await act(serverId, 'run_cmd', { cmd: 'echo next' });
    expect((await waitForJob(t.app, t.as.user, next.json().job_id, 30_000)).state).toBe('completed');
    expect(await readLines(marker)).toEqual(['ran']);

    const logs = await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/action-logs?job_id=${jobId}` });
    expect(logs.json().items).toEqual([
      expect.objectContaining({
        action_type: 'ssh_command',
        status: 'failure',
        input_text: cmd,
        output_text: expect.stringMatching(/^interrupted: /),
      }),
    ]);
    const messages = (await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/root-servers/${serverId}/messages?limit=200` })).json()
      .items;
    expect(messages).toContainEqual(
      expect.objectContaining({
        subtype_xmlid: 'mail.mt_alert',
        body: expect.stringMatching(new RegExp(`^root_server_run_cmd \\(job ${jobId}\\) was interrupted.*not run again`)),
      }),
    );
  });
});

describe('kill -9 of the worker during key rotation', () => {
  it('is run again by the next worker, which finishes it', async () => {
    const servers = createRecordService(t.ctx, postgresqlServerModel);
    const ids: number[] = [];
    for (let i = 0; i < 3; i++) ids.push((await servers.create({ ip: `10.9.0.${i}`, password: `rot-secret-${i}` })).id as number);
    const rows = () => t.ctx.db.$queryRaw<{ id: number; password: string }[]>`SELECT id, password FROM postgresql_servers ORDER BY id`;
    const plaintexts = new Map(
      await Promise.all((await rows()).map(async (r) => [r.id, await t.ctx.secretBox.decrypt(r.password)] as const)),
    );

    // A lock on the last row holds the rotation there, halfway, while the worker is killed.
    const blocker = new pg.Client({ connectionString: t.ctx.config.DATABASE_URL });
    await blocker.connect();
    try {
      await blocker.query('BEGIN');
      await blocker.query('SELECT id FROM postgresql_servers WHERE id = $1 FOR UPDATE', [ids.at(-1)]);
      worker = await startWorkerProcess();
      const res = await request(t.app, t.as.admin, { method: 'POST', url: '/api/v1/settings/actions/rotate_encryption_key' });
      expect(res.statusCode).toBe(202);
      const jobId = res.json().job_id as string;
      // The rotation waits on the locked row.
      await vi.waitUntil(async () => {
        const [row] = await t.ctx.db.$queryRaw<{ n: number }[]>`
          SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'UPDATE "postgresql_servers"%'`;
        return row!.n === 1;
      }, WAIT);
      const halfway = await rows();
      expect(keyVersionOf(halfway[0]!.password)).not.toBe(keyVersionOf(halfway.at(-1)!.password));

      await worker.kill9();
      worker = null;
      await blocker.query('COMMIT');
      workers = await startWorkers(t.ctx);

      const job = await waitForJob(t.app, t.as.user, jobId, 60_000);
      expect(job).toMatchObject({ state: 'completed', error: null });
      // Taken back after the crash and run a second time (BullMQ's own counters).
      const bull = (await findJob(t.ctx, jobId))!;
      expect({ stalled: bull.stalledCounter, started: bull.attemptsStarted }).toEqual({ stalled: 1, started: 2 });

      const { key_version } = job.result as { key_version: number };
      for (const row of await rows()) {
        expect(keyVersionOf(row.password)).toBe(key_version);
        expect(await t.ctx.secretBox.decrypt(row.password)).toBe(plaintexts.get(row.id));
      }
      const active = await t.ctx.db.encryptionKey.findMany({ where: { state: 'active' } });
      expect(active.map((k) => k.version)).toEqual([key_version]);
      expect(await t.ctx.db.actionLog.findMany({ where: { job_id: jobId } })).toEqual([
        expect.objectContaining({ input_text: 'rotate_encryption_key', status: 'success' }),
      ]);
    } finally {
      await blocker.end();
    }
  });
});

describe('an interrupted deployment', () => {
  it('leaves the subscription failed, an action-log row saying interrupted (the job left none) and a chatter alert', async () => {
    const partner = await t.ctx.db.partner.create({ data: { name: 'Crash', email: `crash-${Date.now()}@svc.test` } });
    const sub = await t.ctx.db.subscription.create({
      data: { name: 'Crash', partner_id: partner.id, state: 'deploying', database_name: 'crash_db' },
    });
    const jobId = 'deployments-999';
    await recordInterruption(
      t.ctx,
      { name: 'deploy_subscription', id: jobId, payload: { subscription_id: sub.id, user_id: t.as.operator.userId } },
      subscriptionJobHandlers.interruptions.deploy_subscription!,
    );

    expect((await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: sub.id } })).state).toBe('failed');
    expect(await t.ctx.db.actionLog.findMany({ where: { job_id: jobId } })).toEqual([
      expect.objectContaining({
        model_name: 'svc.subscription',
        rec_id: sub.id,
        action_type: 'deployment',
        status: 'failure',
        user_id: t.as.operator.userId,
        output_text: expect.stringMatching(/^interrupted: /),
      }),
    ]);
    const messages = await t.ctx.db.message.findMany({ where: { model_name: 'svc.subscription', rec_id: sub.id } });
    expect(messages.map((m) => m.body)).toContainEqual(
      expect.stringMatching(/^deploy_subscription \(job deployments-999\) was interrupted/),
    );
  });
});
