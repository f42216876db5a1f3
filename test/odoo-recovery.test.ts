// Odoo started again where systemd does not run it (issue 52, point 2), and a setup_odoo whose job
// Redis lost (point 3): the decisions, on the real sshd as the host (no Odoo on it: the real-Odoo
// run is test-odoo/odoo-reboot.test.ts). Monitoring's real poll sees a server back online after it
// was offline and, through the features' observers, queues odoo_start_again for a host whose Odoo
// should run — once, however often it is seen — and for none an operator stopped. odoo_status
// queues it for a service it finds stopped, and the job itself leaves alone a server stopped
// meanwhile and a host where stop_odoo removed the supervisor's flag.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Job } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { composeFeatures } from '../src/features.js';
import { LOST_WITH_REDIS } from '../src/jobs/job-interruption.js';
import { createMonitorPoller } from '../src/monitoring/monitor-poll.js';
import { odoo } from '../src/odoo/index.js';
import { confirmedRootServer, findJob, request } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';
import { useMonitoredSshd } from './helpers/monitoring.js';
import { TEST_USERS } from './helpers/sshd.js';

const host = useMonitoredSshd();
let base: string;
beforeAll(async () => {
  base = await mkdtemp(path.join(tmpdir(), 'svc-odoo-recovery-'));
});
afterAll(async () => {
  if (base) await rm(base, { recursive: true, force: true });
});
// No workers: the test reads the queued jobs and runs the one it means to.
const t = useTestApp({ env: () => ({ ODOO_BASE_PATH: base }) });
const HOUR = 3_600_000;

let versionId: number;
beforeAll(async () => {
  versionId = (
    await t.ctx.db.odooVersion.create({
      data: { name: `18.0-recovery-${Date.now()}`, source_url: 'file:///nonexistent.tar.gz', source_sha256: 'a'.repeat(64) },
    })
  ).id;
});

/** A monitored host (the sshd, root through sudo) svc set up Odoo on, in `odoo_state`, offline since its last polls. */
async function odooHost(odooState: 'running' | 'stopped' | 'failed' | 'installing') {
  const root = await confirmedRootServer(t.app, t.as.operator, host.sshd, {
    username: TEST_USERS.sudoNoPassword.name,
    password: TEST_USERS.sudoNoPassword.password,
    sudo_user: true,
    sudo_user_no_password: true,
  });
  await t.ctx.db.rootServer.update({
    where: { id: root.id },
    // A port nothing listens on: Odoo is not running there.
    data: { monitoring_enabled: true, server_state: 'offline', odoo_state: odooState, odoo_http_port: 19391, odoo_version_id: versionId },
  });
  return root.id;
}

/** The jobs of `name` queued (waiting or delayed) for the server. */
async function queued(name: string, serverId: number) {
  const jobs = await t.ctx.queues.queue('odoo').getJobs(['waiting', 'delayed', 'prioritized']);
  return jobs.filter((j) => j.name === name && j.data.root_server_id === serverId);
}

const poll = (id: number) =>
  createMonitorPoller(t.ctx, { pool: host.pool, observers: composeFeatures(t.ctx).monitorPollObservers }).poll(id);

describe('a host back online after it was offline', () => {
  it('gets odoo_start_again queued once when its Odoo should run; none when an operator stopped it', async () => {
    const [running, stopped] = [await odooHost('running'), await odooHost('stopped')];
    expect(await poll(running)).toMatchObject({ outcome: 'ok' });
    expect(await poll(stopped)).toMatchObject({ outcome: 'ok' });

    const started = await queued('odoo_start_again', running);
    expect(started.map((j) => j.data)).toEqual([{ root_server_id: running, reason: 'back_online', user_id: null }]);
    expect(await queued('odoo_start_again', stopped)).toEqual([]);

    // Seen again (offline, then back): still the one job.
    await t.ctx.db.rootServer.update({ where: { id: running }, data: { server_state: 'offline' } });
    await poll(running);
    expect((await queued('odoo_start_again', running)).map((j) => j.id)).toEqual(started.map((j) => j.id));
    // An online server polled again is no news.
    await poll(running);
    expect(await queued('odoo_start_again', running)).toHaveLength(1);
    await started[0]!.remove();
  });
});

describe('odoo_status', () => {
  it('queues odoo_start_again for a service it finds stopped while odoo_state is running, and for none stopped by stop_odoo', async () => {
    const [running, stopped] = [await odooHost('running'), await odooHost('stopped')];
    const status = (id: number) => request(t.app, t.as.operator, { method: 'POST', url: `/api/v1/root-servers/${id}/actions/odoo_status` });

    const found = await status(running);
    expect(found.statusCode, found.body).toBe(200);
    expect(found.json()).toMatchObject({ service: 'stopped', healthy: false, odoo_state: 'running', start_job_id: expect.any(String) });
    const job = await findJob(t.ctx, found.json().start_job_id);
    expect(job?.data).toEqual({ root_server_id: running, reason: 'status', user_id: null });
    // Asked again while it waits: the same job.
    expect((await status(running)).json().start_job_id).toBe(found.json().start_job_id);

    const left = await status(stopped);
    expect(left.json()).toMatchObject({ service: 'stopped', odoo_state: 'stopped', start_job_id: null });
    expect(await queued('odoo_start_again', stopped)).toEqual([]);
    await job!.remove();
  });
});

/** The odoo feature's handler of `name`, as a worker runs it (`job`: the id its action-log rows carry). */
async function handle(name: string, payload: Record<string, unknown>, jobId = `${name}-${Date.now()}`) {
  const handlers = odoo.jobs!.handlers(t.ctx, composeFeatures(t.ctx));
  const [queueName, id] = [jobId.slice(0, jobId.indexOf('-')), jobId.slice(jobId.indexOf('-') + 1)];
  return handlers[name]!(payload, { queueName, id } as unknown as Job);
}

describe('odoo_start_again', () => {
  it('leaves a server stopped meanwhile, and a host where stop_odoo removed the supervisor’s flag, as they are', async () => {
    // Stopped by the operator after the job was queued: nothing on the host is touched.
    const meanwhile = await odooHost('stopped');
    expect(await handle('odoo_start_again', { root_server_id: meanwhile, reason: 'status', user_id: null }, 'odoo-t1')).toEqual({
      started: false,
      odoo_state: 'stopped',
    });
    expect(await t.ctx.db.actionLog.count({ where: { job_id: 'odoo-t1' } })).toBe(0);

    // odoo_state still says running, but stop_odoo's step on the host ran (no `enabled` flag): not started.
    const flagless = await odooHost('running');
    expect(await handle('odoo_start_again', { root_server_id: flagless, reason: 'status', user_id: null }, 'odoo-t2')).toEqual({
      started: false,
      odoo_state: 'running',
      service: 'disabled',
    });
    expect((await t.ctx.db.rootServer.findUniqueOrThrow({ where: { id: flagless } })).odoo_state).toBe('running');
  });
});

describe('a setup_odoo whose job Redis lost', () => {
  /** An odoo_setup job as the API queues it (delayed: no worker takes it), recorded as setup_odoo records it. */
  async function settingUp(id: number) {
    const jobId = await t.ctx.queues.enqueue(
      composeFeatures(t.ctx).jobs.find('odoo_setup')!,
      { root_server_id: id, odoo_version_id: versionId, postgresql_server_id: 1, max_cron_threads: 1, dbfilter: '^%d$' },
      { delay: HOUR },
    );
    await t.ctx.db.rootServer.update({ where: { id }, data: { odoo_job_id: jobId } });
    return jobId;
  }

  it('leaves its server failed, not installing for ever, saying so in the chatter and the action log', async () => {
    const [lost, kept] = [await odooHost('installing'), await odooHost('installing')];
    const [lostJob, keptJob] = [await settingUp(lost), await settingUp(kept)];
    await (await findJob(t.ctx, lostJob))!.remove();

    expect(await handle('odoo_lost_setups', { user_id: null }, 'maintenance-t3')).toEqual({ failed: [lost] });

    const server = await t.ctx.db.rootServer.findUniqueOrThrow({ where: { id: lost } });
    expect(server.odoo_state).toBe('failed');
    expect(server.odoo_error).toContain(`(setup_odoo, job ${lostJob})`);
    expect(server.odoo_error).toContain('run setup_odoo again');
    expect(await t.ctx.db.actionLog.findMany({ where: { job_id: lostJob } })).toEqual([
      expect.objectContaining({ model_name: 'svc.root.server', rec_id: lost, status: 'failure', output_text: LOST_WITH_REDIS }),
    ]);
    const said = await t.ctx.db.message.findMany({ where: { model_name: 'svc.root.server', rec_id: lost } });
    expect(said.map((m) => m.body)).toContainEqual(
      expect.stringContaining(`odoo_setup (job ${lostJob}) was interrupted: Redis lost the job while it ran.`),
    );
    // A set-up whose job is there is left; a second sweep finds nothing more.
    expect((await t.ctx.db.rootServer.findUniqueOrThrow({ where: { id: kept } })).odoo_state).toBe('installing');
    expect(await handle('odoo_lost_setups', { user_id: null }, 'maintenance-t4')).toEqual({ failed: [] });
    await (await findJob(t.ctx, keptJob))!.remove();
  });
});
