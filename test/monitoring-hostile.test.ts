// Monitored hosts that send bad data: one remote party's bad answers stay its own. Servers on a real
// OpenSSH server (test/helpers/sshd.ts) are monitored beside hosts that lie (ssh2's own server,
// test/helpers/fake-ssh-host.ts): values no column can hold, output without line ends. The lying
// host's polls fail and count toward offline; the others' rows are written. Real PostgreSQL, Redis
// and monitor runner.
import type { ServerChannel } from 'ssh2';
import { describe, expect, it } from 'vitest';
import type { MonitorPollEvent } from '../src/feature.js';
import { createMonitorPoller, execSampler, type Sampler } from '../src/monitoring/monitor-poll.js';
import { startMonitorRunner } from '../src/monitoring/monitor-runner.js';
import { createMonitorService } from '../src/monitoring/monitor-service.js';
import { streamSampler } from '../src/monitoring/monitor-stream.js';
import { confirmedRootServer, request } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';
import { monitorByHand, notificationsOf, sampleMetrics, useMonitoredSshd } from './helpers/monitoring.js';
import { procSections, startFakeSshHost, writeFlood, type FakeMonitoredHost, type FakeSshHost } from './helpers/fake-ssh-host.js';
import { passwordLogin } from './helpers/sshd.js';

const host = useMonitoredSshd();
const { pool } = host;

const t = useTestApp();

const INTERVAL = { monitor_update_interval: '5s' };
const rowCount = (id: number) => t.ctx.db.monitorLog.count({ where: { root_server_id: id } });
const serverRow = (id: number) => t.ctx.db.rootServer.findUniqueOrThrow({ where: { id } });
const chatter = (id: number) => notificationsOf(t.ctx.db, id);

const goodServer = async () => (await confirmedRootServer(t.app, t.as.operator, host.sshd, { ...passwordLogin(), ...INTERVAL })).id;

/** A root server on a lying host; confirmed directly (confirming would run commands it does not answer). */
async function fakeServer(host: FakeSshHost) {
  const res = await request(t.app, t.as.operator, {
    method: 'POST',
    url: '/api/v1/root-servers',
    payload: { ip: host.host, port: host.port, username: 'monitor', password: 'any-password', ...INTERVAL },
  });
  expect(res.statusCode, res.body).toBe(201);
  await t.ctx.db.rootServer.update({ where: { id: res.json().id }, data: { state: 'confirmed' } });
  return res.json().id as number;
}

const monitoringOn = (ids: number[]) => monitorByHand(t.ctx.db, ids);

const stopMonitoring = async (ids: number[]) => {
  for (const id of ids) await request(t.app, t.as.operator, { method: 'POST', url: `/api/v1/root-servers/${id}/actions/stop_monitor` });
};

/** Fake hosts started by a test, closed after it. */
async function withFakeHosts(answers: FakeMonitoredHost[], fn: (hosts: FakeSshHost[]) => Promise<void>) {
  const hosts: FakeSshHost[] = [];
  try {
    for (const a of answers) hosts.push(await startFakeSshHost(a));
    await fn(hosts);
  } finally {
    for (const h of hosts) await h.close();
  }
}

describe('a host sending values no column can hold', () => {
  it('fails its own polls (offline after 3, the reason in its chatter); the servers sharing its batch writes get their rows', async () => {
    const lies = [
      { meminfo: 'MemTotal: 0.3 kB\nMemAvailable: 0 kB', error: 'Unreadable MemTotal: 0.3' }, // 307.2 bytes into a bigint
      { meminfo: 'MemTotal: 99999999999999999 kB\nMemAvailable: 0 kB', error: 'MemTotal out of range: 99999999999999999' },
      {
        df: 'Filesystem 1024-blocks Used Available Capacity Mounted on\n/dev/vda 1e308 400 500 45% /',
        error: 'Unreadable df column: 1e308',
      },
    ];
    await withFakeHosts(
      lies.map(({ error: _, ...over }) => ({ sample: () => procSections(over) })),
      async (hosts) => {
        const good = [await goodServer(), await goodServer(), await goodServer()];
        const bad: number[] = [];
        for (const h of hosts) bad.push(await fakeServer(h));
        const ids = [...good, ...bad];
        // One phase for all: every due time's samples share one batch write.
        const phase = Date.now() % 5000;
        const monitor = createMonitorService(t.ctx);
        await t.ctx.db.rootServer.updateMany({ where: { id: { in: ids } }, data: { monitoring_enabled: true } });
        for (const id of ids) await monitor.schedule({ id, ...INTERVAL }, phase);

        const runner = await startMonitorRunner(t.ctx, { syncMs: 200, leaseMs: 1500 });
        try {
          for (const id of bad) {
            await expect.poll(async () => (await serverRow(id)).server_state, { timeout: 45_000, interval: 250 }).toBe('offline');
          }
          for (const id of good) await expect.poll(() => rowCount(id), { timeout: 15_000, interval: 250 }).toBeGreaterThanOrEqual(3);
        } finally {
          await runner.close();
          await stopMonitoring(ids);
        }

        for (const [i, id] of bad.entries()) {
          expect(await rowCount(id)).toBe(0);
          expect(await chatter(id)).toEqual([`Server state: no_monitor → offline. 3 failed polls in a row; last error: ${lies[i]!.error}`]);
        }
        for (const id of good) expect((await chatter(id)).some((m) => m.includes('offline'))).toBe(false);
      },
    );
  }, 90_000);
});

describe('a batch write the database refuses', () => {
  const base = sampleMetrics();

  it('is written again row by row: the refused row is its server’s failed poll, the others are recorded', async () => {
    const [a, b, c] = [await goodServer(), await goodServer(), await goodServer()];
    await monitoringOn([a, b, c]);
    const events: MonitorPollEvent[] = [];
    const poller = createMonitorPoller(t.ctx, { pool, observers: [async (e) => void events.push(...e)] });
    // Not an integer: the parser never gives one; only the database's bigint column refuses it.
    const refused = { ...base, ram_used_bytes: 204.79999999999998 };
    const at = new Date();
    const written = await poller.recordSamples([
      { serverId: a, metrics: base, signature: 'x', at },
      { serverId: b, metrics: refused, signature: 'x', at },
      { serverId: c, metrics: base, signature: 'x', at },
    ]);
    expect(written.get(a)).toMatchObject({ outcome: 'ok', signature: expect.stringMatching(/^[0-9a-f]{32}$/) });
    expect(written.get(c)).toMatchObject({ outcome: 'ok' });
    expect(written.get(b)).toEqual({ outcome: 'failed', error: expect.stringMatching(/^The sample could not be recorded: .*bigint/) });
    expect([await rowCount(a), await rowCount(b), await rowCount(c)]).toEqual([1, 0, 1]);
    expect(await serverRow(b)).toMatchObject({ monitor_failures: 1, server_state: 'online' });
    expect(events.map((e) => [e.root_server_id, e.outcome])).toEqual(
      expect.arrayContaining([
        [a, 'ok'],
        [b, 'failed'],
        [c, 'ok'],
      ]),
    );
    expect(events).toHaveLength(3);
    await stopMonitoring([a, b, c]);
  });

  it('in a single-server poll, a refused row is that server’s failed poll too', async () => {
    const id = await goodServer();
    await monitoringOn([id]);
    const poller = createMonitorPoller(t.ctx, { pool });
    // A sampler standing for a parser that let a fraction of a kB through.
    const sampler: Sampler = async (server, conn, prev, deadline) =>
      (await execSampler(server, conn, prev, deadline)).map((s) => ({ ...s, memTotal: 307.2, memAvailable: 0 }));
    expect(await poller.poll(id, { sampler })).toEqual({
      outcome: 'failed',
      server_state: 'online',
      failures: 1,
      error: expect.stringMatching(/^The sample could not be recorded: .*bigint/),
    });
    expect(await rowCount(id)).toBe(0);
    expect(await poller.poll(id)).toMatchObject({ outcome: 'ok' });
    expect(await rowCount(id)).toBe(1);
    await stopMonitoring([id]);
  });
});

describe('a host sending output without line ends', () => {
  const MiB = 1024 * 1024;

  it('before "@@ready": the stream fails at the bound, as that server’s failed poll (no fallback to the per-poll command)', async () => {
    await withFakeHosts([{ ready: (channel) => writeFlood(channel, 2 * MiB), sample: () => procSections() }], async ([host]) => {
      const id = await fakeServer(host!);
      await monitoringOn([id]);
      const poller = createMonitorPoller(t.ctx, { pool });
      const fallback = new Set<number>();
      const sampler = streamSampler(new Map(), fallback);
      const error = 'The monitoring loop sent more than 256 KiB without a line end before "@@ready"';
      expect(await poller.poll(id, { sampler })).toEqual({ outcome: 'failed', server_state: 'online', failures: 1, error });
      expect(await poller.poll(id, { sampler })).toMatchObject({ outcome: 'failed', failures: 2, error });
      expect(await poller.poll(id, { sampler })).toMatchObject({ outcome: 'failed', failures: 3, server_state: 'offline', error });
      expect(fallback.has(id)).toBe(false);
      expect(host!.streams()).toBe(3);
      await stopMonitoring([id]);
    });
  });

  it('after "@@ready": a sample without its end fails at the bound; stderr is never kept', async () => {
    const flood = { sample: () => 'x'.repeat(2 * MiB) };
    const noisy = {
      ready: (channel: ServerChannel) => {
        writeFlood(channel.stderr, 2 * MiB); // the service drops stderr as it comes
        channel.write('@@ready\n');
      },
      sample: () => procSections(),
    };
    await withFakeHosts([flood, noisy], async ([floodHost, noisyHost]) => {
      const [floods, talks] = [await fakeServer(floodHost!), await fakeServer(noisyHost!)];
      await monitoringOn([floods, talks]);
      const poller = createMonitorPoller(t.ctx, { pool });
      const sampler = streamSampler(new Map(), new Set());
      expect(await poller.poll(floods, { sampler })).toMatchObject({
        outcome: 'failed',
        failures: 1,
        error: 'The monitoring stream sent more than 256 KiB without ending a sample ("@@end")',
      });
      expect(await poller.poll(talks, { sampler })).toMatchObject({ outcome: 'ok' });
      await stopMonitoring([floods, talks]);
    });
  });
});
