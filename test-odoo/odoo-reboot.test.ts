// Odoo comes back after a reboot where systemd does not run it (issue 52, point 2), with a real Odoo
// on this machine for every source of ODOO_SOURCE. The tests' host has no systemd: setup_odoo runs
// Odoo as a supervised process group, which nothing starts at boot. A reboot is played by killing
// that whole group (the pid file and the `enabled` flag stay, as on disk), with the pid file then
// naming a live process of somebody else's (the kernel reuses pids after a boot): odoo_status finds
// the service stopped and its job starts it again, healthy, with svc's routing, never touching that
// process; monitoring seeing the host back online does the same. After stop_odoo neither starts it.
// Ports: 19300 for the first source, 19350 for the second (gevent 3 above).
import { type ChildProcess, spawn } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { afterAll, describe, expect, test, vi } from 'vitest';
import { createSshPool } from '../src/core/ssh-pool.js';
import { composeFeatures } from '../src/features.js';
import { createMonitorPoller } from '../src/monitoring/monitor-poll.js';
import { request, waitForJob } from '../test/helpers/api.js';
import { odooGet, odooSources, packagesOf, serverWideModulesOf, useOdooFixture } from './odoo-fixture.js';

const sources = odooSources();
const f = useOdooFixture();
const pool = createSshPool();
afterAll(() => pool.close());

/** Kills the supervisor's whole process group, as a reboot does, and waits until nothing answers on the port. */
async function reboot(base: string, port: number) {
  const pid = Number((await readFile(`${base}/run/odoo-${port}/pid`, 'utf8')).trim());
  process.kill(-pid, 'SIGKILL');
  await vi.waitFor(
    async () => {
      const answered = await odooGet(port, '/web/health').then(
        () => true,
        () => false,
      );
      if (answered) throw new Error(`Odoo still answers on ${port}`);
    },
    { timeout: 60_000, interval: 200 },
  );
}

/** A live process of somebody else's, in a process group of its own, whose pid the pid file then names. */
async function reusedPid(base: string, port: number): Promise<ChildProcess> {
  const other = spawn('sleep', ['3600'], { detached: true, stdio: 'ignore' });
  other.unref();
  await writeFile(`${base}/run/odoo-${port}/pid`, `${other.pid}\n`);
  return other;
}

const alive = (p: ChildProcess) => {
  try {
    process.kill(p.pid!, 0);
    return true;
  } catch {
    return false;
  }
};

describe.each(sources.map((s, i) => ({ ...s, port: 19300 + 50 * i })))('Odoo $name after a reboot', (src) => {
  let host: number;
  const status = async () => {
    const res = await request(f.t.app, f.t.as.operator, { method: 'POST', url: `/api/v1/root-servers/${host}/actions/odoo_status` });
    expect(res.statusCode, res.body).toBe(200);
    return res.json();
  };
  const notices = async () =>
    (await f.t.ctx.db.message.findMany({ where: { model_name: 'svc.root.server', rec_id: host }, orderBy: { id: 'asc' } })).map(
      (m) => m.body,
    );

  test('setup_odoo runs it supervised', async () => {
    const version = await f.newVersion({
      name: src.name,
      source_url: `file://${src.file}`,
      source_sha256: src.sha256,
      os_packages: packagesOf(src.series),
      server_wide_modules: serverWideModulesOf(src.series),
    });
    host = await f.newHost();
    const job = await f.runJob(host, 'setup_odoo', {
      odoo_version_id: version.id,
      postgresql_server_id: f.pgServerId,
      http_port: src.port,
      workers: 1,
      max_cron_threads: 0,
    });
    expect(job.state, JSON.stringify(job)).toBe('completed');
    expect((await odooGet(src.port, '/web/health')).status).toBe(200);
  });

  test('odoo_status finds it stopped after a reboot and its job starts it again, healthy, with the routing', async () => {
    await reboot(f.base, src.port);
    const other = await reusedPid(f.base, src.port);
    try {
      const found = await status();
      expect(found).toMatchObject({ odoo_state: 'running', service: 'stopped', healthy: false, start_job_id: expect.any(String) });
      const job = await waitForJob(f.t.app, f.t.as.operator, found.start_job_id, 5 * 60_000);
      expect(job.state, JSON.stringify(job)).toBe('completed');
      expect(job.result).toMatchObject({ started: true, odoo_state: 'running', http_port: src.port });
      expect((await odooGet(src.port, '/web/health')).status).toBe(200);
      expect(await status()).toMatchObject({
        odoo_state: 'running',
        service: 'running',
        healthy: true,
        routing_loaded: true,
        start_job_id: null,
      });
      expect(await notices()).toContainEqual(
        expect.stringContaining(`Odoo on port ${src.port} was not running (odoo_status found it stopped): started again`),
      );
      // The process the stale pid file named was never taken for Odoo's, nor signalled.
      expect(alive(other)).toBe(true);
    } finally {
      other.kill('SIGKILL');
    }
  });

  test('monitoring seeing the host back online starts it again', async () => {
    await reboot(f.base, src.port);
    // The host was offline (three failed polls); the next good poll sees it back.
    await f.t.ctx.db.rootServer.update({ where: { id: host }, data: { monitoring_enabled: true, server_state: 'offline' } });
    const poller = createMonitorPoller(f.t.ctx, { pool, observers: composeFeatures(f.t.ctx).monitorPollObservers });
    expect(await poller.poll(host)).toMatchObject({ outcome: 'ok' });
    await vi.waitFor(
      async () => {
        const said = await notices();
        if (!said.some((b) => b.includes('(the server came back online after it was offline): started again'))) throw new Error('not yet');
      },
      { timeout: 5 * 60_000, interval: 500 },
    );
    expect((await odooGet(src.port, '/web/health')).status).toBe(200);
    expect((await f.server(host)).odoo_state).toBe('running');
  });

  test('after stop_odoo neither odoo_status nor the host back online starts it', async () => {
    const stopped = await f.runJob(host, 'stop_odoo');
    expect(stopped.state, JSON.stringify(stopped)).toBe('completed');
    expect(await status()).toMatchObject({ odoo_state: 'stopped', service: 'stopped', start_job_id: null });
    await f.t.ctx.db.rootServer.update({ where: { id: host }, data: { server_state: 'offline' } });
    const before = (await notices()).length;
    const poller = createMonitorPoller(f.t.ctx, { pool, observers: composeFeatures(f.t.ctx).monitorPollObservers });
    expect(await poller.poll(host)).toMatchObject({ outcome: 'ok' });
    const queued = await f.t.ctx.queues.queue('odoo').getJobs(['waiting', 'delayed', 'active', 'prioritized']);
    expect(queued.filter((j) => j.name === 'odoo_start_again' && j.data.root_server_id === host)).toEqual([]);
    await expect(odooGet(src.port, '/web/health')).rejects.toThrow();
    expect((await notices()).slice(before).filter((b) => b.includes('started again'))).toEqual([]);
    await f.t.ctx.db.rootServer.update({ where: { id: host }, data: { monitoring_enabled: false } });
  });
});
