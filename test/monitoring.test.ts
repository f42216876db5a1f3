// Monitoring on real parts: a real OpenSSH server on loopback (test/helpers/sshd.ts) whose /proc is
// this machine's, real monitor runners with their leases on Redis (two worker contexts sharing one
// Redis and one PostgreSQL stand for two worker processes), real PostgreSQL for rows and chatter.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import pino from 'pino';
import { beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { createContext, type AppContext } from '../src/context.js';
import { startWorkers } from '../src/worker.js';
import type { MonitorPollEvent } from '../src/feature.js';
import { createMonitorPoller, execSampler, type Sampler } from '../src/monitoring/monitor-poll.js';
import { monitorSchedule, scheduleKey } from '../src/monitoring/monitor-service.js';
import { type HandledDueTime, type MonitorRunner, startMonitorRunner } from '../src/monitoring/monitor-runner.js';
import { SampleStream, streamSampler } from '../src/monitoring/monitor-stream.js';
import { connectRootServer } from '../src/servers/root-server-ssh.js';
import type { SshConnection } from '../src/core/ssh.js';
import { registerMonitorSchedules } from '../src/monitoring/monitor-jobs.js';
import { deleteOldMonitorLogs } from '../src/monitoring/monitor-log-service.js';
import { parseSamples, SAMPLE_COMMAND, serverStateOf } from '../src/monitoring/proc-metrics.js';
import type { Metrics } from '../src/servers/root-server-metrics.js';
import { leaseKey } from '../src/monitoring/monitor-leases.js';
import type { TestContext } from './helpers/context.js';
import { type Caller, confirmedRootServer, request, waitForJob } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';
import { insertMonitorLog, monitorByHand, notificationsOf, sampleMetrics, unmonitor, useMonitoredSshd } from './helpers/monitoring.js';
import { freePort, keyLogin, passwordLogin, TEST_USERS } from './helpers/sshd.js';
import { monitorJobs } from '../src/monitoring/monitor-job-specs.js';

const host = useMonitoredSshd();
const { pool } = host;

const t = useTestApp({ workers: true });
let ctx: TestContext;
let app: FastifyInstance;
let as: { user: Caller; operator: Caller; admin: Caller };
beforeAll(() => {
  ({ ctx, app, as } = t);
});

const act = (id: number, name: string) => request(app, as.operator, { method: 'POST', url: `/api/v1/root-servers/${id}/actions/${name}` });
const patch = (id: number, payload: object) => request(app, as.operator, { method: 'PATCH', url: `/api/v1/root-servers/${id}`, payload });
const getServer = async (id: number) => (await request(app, as.user, { method: 'GET', url: `/api/v1/root-servers/${id}` })).json();
const rowCount = (id: number) => ctx.db.monitorLog.count({ where: { root_server_id: id } });
const scheduler = (id: number) => monitorSchedule(ctx, id);

const confirmedServer = (login: Record<string, unknown>) =>
  confirmedRootServer(app, as.operator, host.sshd, { monitor_update_interval: '5s', ...login });
const messages = (id: number) => notificationsOf(ctx.db, id);

describe('start_monitor → polls → stop_monitor', () => {
  it('collects sane metrics, reuses one SSH connection, marks dead and hanging servers offline after 3 failures, and stops', async () => {
    const good = await confirmedServer(passwordLogin());
    const dead = await confirmedServer(keyLogin(host.sshd));
    const closedPort = await freePort();
    // The move sends the key again: a new address clears the stored credentials unless they are sent with it.
    expect((await patch(dead.id, { port: closedPort, ...keyLogin(host.sshd) })).json()).toMatchObject({
      port: closedPort,
      host_key: null,
      key_set: true,
    });
    // A server that accepts TCP but never answers: each poll of it waits for its timeout.
    const silent = createServer(() => {});
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const silentPort = (silent.address() as { port: number }).port;
    const hanging = await confirmedServer(keyLogin(host.sshd));
    await patch(hanging.id, { port: silentPort, ...keyLogin(host.sshd) });
    const loginsBefore = host.sshd.logins(TEST_USERS.password.name);

    expect((await act(good.id, 'start_monitor')).json()).toMatchObject({ monitoring_enabled: true, server_state: 'no_monitor' });
    expect((await act(dead.id, 'start_monitor')).statusCode).toBe(200);
    expect((await act(hanging.id, 'start_monitor')).statusCode).toBe(200);
    expect(await scheduler(good.id)).toMatchObject({ every: 5000 });

    // All are polled in the same intervals: the dead and the hanging one do not hold the good one back.
    await expect.poll(async () => (await getServer(dead.id)).server_state, { timeout: 30_000, interval: 500 }).toBe('offline');
    await expect.poll(async () => (await getServer(hanging.id)).server_state, { timeout: 30_000, interval: 500 }).toBe('offline');
    await act(hanging.id, 'stop_monitor');
    silent.close();
    expect(await rowCount(good.id)).toBeGreaterThanOrEqual(3);

    // Metrics: this machine's, since the sshd runs here.
    const rows = await ctx.db.monitorLog.findMany({ where: { root_server_id: good.id }, orderBy: { created_at: 'asc' } });
    const memTotal = Number(/^MemTotal:\s+(\d+)/m.exec(readFileSync('/proc/meminfo', 'utf8'))![1]) * 1024;
    for (const row of rows) {
      for (const p of [row.cpu_percent, row.ram_percent, row.disk_percent]) {
        expect(p).toBeGreaterThanOrEqual(0);
        expect(p).toBeLessThanOrEqual(100);
      }
      expect(Number(row.ram_total_bytes)).toBe(memTotal);
      expect(Number(row.ram_used_bytes)).toBeGreaterThan(0);
      expect(Number(row.disk_total_bytes)).toBeGreaterThan(Number(row.disk_used_bytes));
      expect(row.net_rx_bytes_per_s).toBeGreaterThanOrEqual(0);
      expect(row.load_1).toBeGreaterThanOrEqual(0);
    }
    // One SSH login for all those polls: the connection is reused.
    expect(host.sshd.logins(TEST_USERS.password.name) - loginsBefore).toBe(1);

    const representation = await getServer(good.id);
    const last = rows.at(-1)!;
    expect(representation.latest_metrics).toMatchObject({ ram_total_bytes: memTotal });
    expect(representation.latest_metrics!.cpu_percent).toBeCloseTo(last.cpu_percent, 0);
    expect(representation.server_state).toBe(serverStateOf(representation.latest_metrics as Metrics));
    expect(representation.monitor_failures).toBe(0);
    // On this shared machine the CPU may be busy enough for `warning`: either is a valid first state.
    // (online says nothing more; warning names the figures).
    expect((await messages(good.id))[0]).toMatch(/^Server state: no_monitor → (online\.$|warning\. CPU )/);

    // The good server never failed a poll while the others hung or were refused.
    expect((await messages(good.id)).every((m) => !m.includes('offline'))).toBe(true);
    expect(await messages(hanging.id)).toEqual([
      `Server state: no_monitor → offline. 3 failed polls in a row; last error: Timed out after 4 s connecting to 127.0.0.1:${silentPort} (no SSH answer)`,
    ]);

    const deadNow = await getServer(dead.id);
    expect(deadNow.monitor_failures).toBeGreaterThanOrEqual(3);
    expect(deadNow.latest_metrics).toBeNull();
    expect(await messages(dead.id)).toEqual([
      `Server state: no_monitor → offline. 3 failed polls in a row; last error: Connection refused by 127.0.0.1:${closedPort}: no SSH server listens on port ${closedPort}`,
    ]);

    // Stop: the schedule goes, the worker lets the server go (its lease released: nothing polls it
    // any more), no row is written after the stop, server_state → no_monitor.
    expect((await act(good.id, 'stop_monitor')).json()).toMatchObject({ monitoring_enabled: false, server_state: 'no_monitor' });
    await act(dead.id, 'stop_monitor');
    const [{ stopped_at }] = await ctx.db.$queryRaw<[{ stopped_at: Date }]>`SELECT now() AS stopped_at`;
    expect(await scheduler(good.id)).toBeUndefined();
    await expect.poll(() => ctx.redis.exists(leaseKey(ctx.queues.prefix, good.id)), { timeout: 10_000, interval: 100 }).toBe(0);
    expect(await ctx.db.monitorLog.count({ where: { root_server_id: good.id, created_at: { gt: stopped_at } } })).toBe(0);
    expect((await getServer(good.id)).server_state).toBe('no_monitor');
  });
});

describe('monitor-logs', () => {
  it('raw rows oldest first (or newest first), per-bucket averages, figures rounded', async () => {
    const server = await confirmedServer(keyLogin(host.sshd));
    const now = Date.now();
    for (const [minutesAgo, cpu] of [
      [50, 10.04],
      [49, 20],
      [20, 40],
      [19, 60],
      [18, 80],
    ] as const) {
      await insertMonitorLog(ctx.db, server.id, new Date(now - minutesAgo * 60_000), {
        cpu_percent: cpu,
        ...{ ram_used_bytes: 100, ram_total_bytes: 200, ram_percent: 50.04, disk_used_bytes: 300, disk_total_bytes: 600 },
        ...{ net_rx_bytes_per_s: 1.4, net_tx_bytes_per_s: 2, load_1: 0.123, load_5: 0.2, load_15: 0.3 },
      });
    }
    const url = `/api/v1/root-servers/${server.id}/monitor-logs`;
    const raw = (await request(app, as.user, { method: 'GET', url })).json();
    expect(raw.total).toBe(5);
    expect(raw.items.map((r: { cpu_percent: number }) => r.cpu_percent)).toEqual([10, 20, 40, 60, 80]);
    expect(raw.items[0]).toMatchObject({ root_server_id: server.id, ram_total_bytes: 200, load_15: 0.3 });
    // Percents to 0.1, loads to 0.01, bytes/s whole.
    expect(raw.items[0]).toMatchObject({ ram_percent: 50, load_1: 0.12, net_rx_bytes_per_s: 1 });
    const newest = (await request(app, as.user, { method: 'GET', url: `${url}?order=desc&limit=2` })).json();
    expect(newest.items.map((r: { cpu_percent: number }) => r.cpu_percent)).toEqual([80, 60]);
    expect((await request(app, as.user, { method: 'GET', url: `${url}?order=newest` })).statusCode).toBe(400);

    const paged = (await request(app, as.user, { method: 'GET', url: `${url}?limit=2&offset=1` })).json();
    expect(paged.items.map((r: { cpu_percent: number }) => r.cpu_percent)).toEqual([20, 40]);

    const from = new Date(now - 55 * 60_000).toISOString();
    const buckets = (await request(app, as.user, { method: 'GET', url: `${url}?bucket=15m&from=${from}` })).json();
    expect(buckets.items.reduce((n: number, b: { samples: number }) => n + b.samples, 0)).toBe(5);
    expect(buckets.total).toBe(buckets.items.length);
    const pastEnd = (await request(app, as.user, { method: 'GET', url: `${url}?bucket=15m&from=${from}&offset=50` })).json();
    expect(pastEnd).toMatchObject({ items: [], total: buckets.total });
    const second = (await request(app, as.user, { method: 'GET', url: `${url}?bucket=15m&from=${from}&offset=1` })).json();
    expect(second.total).toBe(buckets.total);
    const avg = (buckets.items as { cpu_percent: number; samples: number }[]).map((b) => [b.samples, b.cpu_percent]);
    // 50 and 49 minutes ago share a 15-minute bucket unless a boundary falls between them.
    expect(avg.flat().every((v) => Number.isFinite(v))).toBe(true);
    const newestBuckets = (await request(app, as.user, { method: 'GET', url: `${url}?bucket=15m&from=${from}&order=desc` })).json();
    expect(newestBuckets.items.map((b: { bucket_start: string }) => b.bucket_start)).toEqual(
      buckets.items.map((b: { bucket_start: string }) => b.bucket_start).reverse(),
    );
    expect(buckets.items.reduce((s: number, b: { cpu_percent: number; samples: number }) => s + b.cpu_percent * b.samples, 0)).toBeCloseTo(
      210,
    );

    const window = (await request(app, as.user, { method: 'GET', url: `${url}?from=${new Date(now - 30 * 60_000).toISOString()}` })).json();
    expect(window.total).toBe(3);
    const bad = await request(app, as.user, { method: 'GET', url: `${url}?bucket=5x` });
    expect(bad.statusCode).toBe(400);
    const reversed = await request(app, as.user, { method: 'GET', url: `${url}?from=${new Date(now).toISOString()}&to=${from}` });
    expect(reversed.json().error.message).toBe('from must be before to');
    expect((await request(app, as.user, { method: 'GET', url: '/api/v1/root-servers/999999/monitor-logs' })).statusCode).toBe(404);
  });
});

describe('failures, backoff and reconnection (the poll handler called directly)', () => {
  it('offline after exactly 3 failed polls, then retries with a growing delay', async () => {
    const server = await confirmedServer(keyLogin(host.sshd));
    await patch(server.id, { port: await freePort(), ...keyLogin(host.sshd) });
    // Monitoring on, without a schedule: this test drives the polls itself.
    await monitorByHand(ctx.db, [server.id]);
    const { poll } = createMonitorPoller(ctx, { pool });
    expect(await poll(server.id)).toMatchObject({ outcome: 'failed', failures: 1, server_state: 'online' });
    expect(await poll(server.id)).toMatchObject({ outcome: 'failed', failures: 2, server_state: 'online' });
    expect(await poll(server.id)).toMatchObject({ outcome: 'failed', failures: 3, server_state: 'offline' });
    expect(await poll(server.id)).toEqual({ outcome: 'skipped', reason: 'backoff' });
    expect(await messages(server.id)).toEqual([
      expect.stringMatching(/^Server state: online → offline\. 3 failed polls in a row; last error: Connection refused/),
    ]);
    // A poll for a server whose monitoring is off does nothing.
    await unmonitor(ctx.db, [server.id]);
    expect(await poll(server.id)).toEqual({ outcome: 'skipped', reason: 'not monitored' });
    expect((await getServer(server.id)).monitor_failures).toBe(3);
  });

  it('tells the observers (alerts) every recorded poll, good or failed; a failing observer does not fail the poll', async () => {
    const server = await confirmedServer(passwordLogin());
    await monitorByHand(ctx.db, [server.id]);
    const events: MonitorPollEvent[] = [];
    const failing = async () => {
      throw new Error('observer down');
    };
    const { poll } = createMonitorPoller(ctx, { pool, observers: [failing, async (e) => void events.push(...e)] });
    expect((await poll(server.id)).outcome).toBe('ok');
    await patch(server.id, { port: await freePort(), ...passwordLogin() });
    await ctx.db.rootServer.update({ where: { id: server.id }, data: { monitoring_enabled: true } });
    expect((await poll(server.id)).outcome).toBe('failed');
    await unmonitor(ctx.db, [server.id]);
    expect(await poll(server.id)).toEqual({ outcome: 'skipped', reason: 'not monitored' });

    expect(events).toHaveLength(2);
    expect(events[0]).toMatchObject({ root_server_id: server.id, outcome: 'ok', previous_state: 'online', failures: 0, error: null });
    expect(events[0]!.metrics).toMatchObject({ cpu_percent: expect.any(Number), disk_percent: expect.any(Number) });
    expect(events[1]).toMatchObject({ outcome: 'failed', metrics: null, failures: 1, error: expect.stringMatching(/^Connection refused/) });
  });

  it('a failure keeps the connection (the next poll opens a new channel on it); two in a row connect afresh', async () => {
    const server = await confirmedServer(passwordLogin());
    await monitorByHand(ctx.db, [server.id]);
    const poller = createMonitorPoller(ctx, { pool });
    const sampler = streamSampler(new Map(), new Set());
    const poll = () => poller.poll(server.id, { sampler });
    // The deadline follows the server's interval: 4 s at 5 s (while frozen, where the failure is
    // the point), 30 s at 1 m otherwise, so a good poll on a loaded machine waits for its sample
    // instead of racing the clock right after the server is thawed.
    const interval = (monitor_update_interval: '5s' | '1m') =>
      ctx.db.rootServer.update({ where: { id: server.id }, data: { monitor_update_interval } });
    const frozen = async (fn: () => Promise<void>) => {
      await interval('5s');
      await host.sshd.freezeConnections(true); // the server stops answering on its open connections
      try {
        await fn();
      } finally {
        await host.sshd.freezeConnections(false);
        await interval('1m');
      }
    };
    await interval('1m');
    const before = host.sshd.logins(TEST_USERS.password.name);
    expect((await poll()).outcome).toBe('ok');

    // One stalled sample (a moment on the server, or on this side): a failure, no new login.
    await frozen(async () => {
      expect(await poll()).toMatchObject({ outcome: 'failed', failures: 1, error: expect.stringMatching(/did not answer within 4 s/) });
    });
    expect(await poll()).toMatchObject({ outcome: 'ok' });
    // A streamed sample that did not come (the monitor runner's path) is counted the same way.
    expect(await poller.fail(server.id, 'The metrics command did not answer within 4 s')).toMatchObject({ outcome: 'failed', failures: 1 });
    expect(await poll()).toMatchObject({ outcome: 'ok' });
    expect(host.sshd.logins(TEST_USERS.password.name) - before).toBe(1);

    // Two in a row: the connection is given up, and the next poll logs in again.
    await frozen(async () => {
      expect(await poll()).toMatchObject({ outcome: 'failed', failures: 1 });
      expect(await poll()).toMatchObject({ outcome: 'failed', failures: 2 });
    });
    expect(await poll()).toMatchObject({ outcome: 'ok' });
    expect(host.sshd.logins(TEST_USERS.password.name) - before).toBe(2);
    await unmonitor(ctx.db, [server.id]);
  });

  it('writes nothing for a server that stopped being monitored while it was sampled (monitoring on but no longer confirmed)', async () => {
    const server = await confirmedServer(passwordLogin());
    await monitorByHand(ctx.db, [server.id]);
    // The server leaves `confirmed` between the load and the write (monitoring_enabled stays on).
    const leaving: Sampler = async (row, conn, prev, deadline) => {
      const samples = await execSampler(row, conn, prev, deadline);
      await ctx.db.rootServer.update({ where: { id: server.id }, data: { state: 'draft' } });
      return samples;
    };
    expect(await createMonitorPoller(ctx, { pool }).poll(server.id, { sampler: leaving })).toEqual({
      outcome: 'skipped',
      reason: 'monitoring stopped',
    });
    expect(await rowCount(server.id)).toBe(0);
    expect(await ctx.db.rootServer.findUniqueOrThrow({ where: { id: server.id } })).toMatchObject({
      server_state: 'online',
      last_monitor_at: null,
    });
    await unmonitor(ctx.db, [server.id]);
  });

  it('reconnects when the connection drops', async () => {
    const server = await confirmedServer(passwordLogin());
    await ctx.db.rootServer.update({ where: { id: server.id }, data: { monitoring_enabled: true } });
    const { poll } = createMonitorPoller(ctx, { pool });
    const before = host.sshd.logins(TEST_USERS.password.name);
    expect((await poll(server.id)).outcome).toBe('ok');
    expect((await poll(server.id)).outcome).toBe('ok');
    expect(host.sshd.logins(TEST_USERS.password.name) - before).toBe(1);

    await host.sshd.restart({ dropConnections: true });
    // The first poll after the drop may find the connection dead (a failure); the next reconnects.
    let result = await poll(server.id);
    if (result.outcome !== 'ok') result = await poll(server.id);
    expect(result.outcome).toBe('ok');
    expect(host.sshd.logins(TEST_USERS.password.name) - before).toBe(2);
    expect((await getServer(server.id)).monitor_failures).toBe(0);
    await unmonitor(ctx.db, [server.id]);
  });
});

describe('schedules', () => {
  it('changing the interval while monitoring reschedules; cancel stops monitoring', async () => {
    const server = await confirmedServer(keyLogin(host.sshd));
    await act(server.id, 'start_monitor');
    expect(await scheduler(server.id)).toMatchObject({ every: 5000 });
    expect((await patch(server.id, { monitor_update_interval: '30s' })).statusCode).toBe(200);
    expect(await scheduler(server.id)).toMatchObject({ every: 30_000 });
    const cancelled = (await act(server.id, 'cancel')).json();
    expect(cancelled).toMatchObject({ state: 'cancel', monitoring_enabled: false, server_state: 'no_monitor' });
    expect(await scheduler(server.id)).toBeUndefined();
  });

  it('start_monitor needs a confirmed server', async () => {
    const res = await request(app, as.operator, {
      method: 'POST',
      url: '/api/v1/root-servers',
      payload: { ip: host.sshd.host, ...keyLogin(host.sshd) },
    });
    const started = await act(res.json().id, 'start_monitor');
    expect(started.statusCode).toBe(409);
    expect(await scheduler(res.json().id)).toBeUndefined();
  });

  it('worker start restores lost schedules, removes stray ones and registers the daily retention', async () => {
    const server = await confirmedServer(keyLogin(host.sshd));
    const stray = await confirmedServer(keyLogin(host.sshd));
    await act(server.id, 'start_monitor');
    await ctx.redis.hdel(scheduleKey(ctx.queues.prefix), String(server.id)); // as if Redis lost it
    // As if a start_monitor transaction had rolled back after scheduling.
    await ctx.redis.hset(scheduleKey(ctx.queues.prefix), String(stray.id), '5000:0');
    await registerMonitorSchedules(ctx);
    expect(await scheduler(server.id)).toMatchObject({ every: 5000 });
    expect(await scheduler(stray.id)).toBeUndefined();
    expect(await ctx.queues.queue('maintenance').getJobScheduler('monitor-log-retention')).toMatchObject({
      pattern: '17 3 * * *',
      tz: 'UTC',
    });
    await act(server.id, 'stop_monitor');
  });
});

/**
 * Monitor runners in contexts of their own, as worker processes sharing one Redis and one
 * PostgreSQL; only they poll (the suite's worker is stopped until close()).
 */
async function runnerSet() {
  await t.workers?.close();
  const started: { c: AppContext; r: MonitorRunner; death: AbortController }[] = [];
  const recorded: ({ runner: string } & HandledDueTime)[] = [];
  return {
    recorded,
    async start(name: string) {
      const c = await createContext(ctx.config, pino({ level: 'silent' }));
      const death = new AbortController();
      const r = await startMonitorRunner(c, {
        syncMs: 200,
        leaseMs: 1500,
        dueTimeHandled: (d) => recorded.push({ runner: name, ...d }),
        signal: death.signal,
      });
      started.push({ c, r, death });
      return r;
    },
    /** The runner stops as a killed process would: its leases are left to expire, its connections drop. */
    kill(r: MonitorRunner) {
      started.find((s) => s.r === r)!.death.abort();
    },
    async close() {
      for (const { c, r } of started) {
        await r.close();
        await c.close();
      }
      t.workers = await startWorkers(ctx);
    },
  };
}

describe('two worker processes (monitor runners sharing Redis and PostgreSQL)', () => {
  it('split the servers, never record one due time twice, and take over the leases of a worker that died', async () => {
    const { start, kill, recorded, close } = await runnerSet();
    try {
      const a = await start('A');
      const b = await start('B');
      const servers: { id: number }[] = [];
      // Rendezvous hashing splits them; 12 servers all landing on one side has odds of 1 in 2,048.
      for (let i = 0; i < 12; i++) servers.push(await confirmedServer(keyLogin(host.sshd)));
      for (const s of servers) await act(s.id, 'start_monitor');
      const ids = servers.map((s) => s.id);
      const heldBy = (r: MonitorRunner) => r.held().filter((id) => ids.includes(id));
      // Both take part, and every server is held by exactly one of them. (A slow runner's share may
      // first be taken by the other, which hands it over at its next sync: wait for the split.)
      const split = () => ({
        total: heldBy(a).length + heldBy(b).length,
        bothTakePart: heldBy(a).length > 0 && heldBy(b).length > 0,
        sharedByBoth: heldBy(a).filter((id) => heldBy(b).includes(id)),
      });
      await expect.poll(split, { timeout: 10_000, interval: 100 }).toEqual({ total: ids.length, bothTakePart: true, sharedByBoth: [] });
      const okBy = (runner: string, id: number) => recorded.filter((r) => r.runner === runner && r.serverId === id && r.outcome === 'ok');
      await expect
        .poll(() => ids.every((id) => okBy('A', id).length + okBy('B', id).length >= 1), { timeout: 20_000, interval: 200 })
        .toBe(true);

      // A dies (as SIGKILL would leave it: leases in Redis until they expire): B takes its servers.
      const ofA = heldBy(a);
      kill(a);
      const killedAt = Date.now();
      await expect.poll(() => ofA.every((id) => b.held().includes(id)), { timeout: 15_000, interval: 100 }).toBe(true);
      await expect
        .poll(
          () =>
            ofA.every((id) => recorded.some((r) => r.runner === 'B' && r.serverId === id && r.outcome === 'ok' && r.recordedAt > killedAt)),
          {
            timeout: 20_000,
            interval: 200,
          },
        )
        .toBe(true);
      for (const s of servers) await act(s.id, 'stop_monitor');

      // No due time recorded twice, by either runner; one row per recorded due time.
      const ok = recorded.filter((r) => ids.includes(r.serverId) && r.outcome === 'ok');
      const slots = ok.map((r) => `${r.serverId}@${r.due}`);
      expect(new Set(slots).size).toBe(slots.length);
      for (const id of ids) {
        const dues = ok.filter((r) => r.serverId === id).map((r) => r.due);
        expect(await rowCount(id)).toBe(dues.length);
        // Due times of one server are on its 5 s grid.
        for (const due of dues) expect((due - dues[0]!) % 5000).toBe(0);
      }
    } finally {
      await close();
    }
  });
});

describe('warm standbys (the worker ranked second keeps a connection and an idle stream)', () => {
  it('a joining worker takes its share only once warm; a worker that dies is taken over without a new SSH connection', async () => {
    const { start, kill, recorded, close } = await runnerSet();
    let watch: NodeJS.Timeout | undefined;
    try {
      const a = await start('A');
      const servers: { id: number }[] = [];
      for (let i = 0; i < 8; i++) servers.push(await confirmedServer(keyLogin(host.sshd)));
      for (const s of servers) await act(s.id, 'start_monitor');
      const ids = servers.map((s) => s.id);
      const okBy = (runner: string, id: number, after = 0) =>
        recorded.some((r) => r.runner === runner && r.serverId === id && r.outcome === 'ok' && r.recordedAt > after);
      await expect.poll(() => ids.every((id) => okBy('A', id)), { timeout: 20_000, interval: 100 }).toBe(true);

      // B joins: each server it takes, it had warm first (watched every 20 ms; A waits for B's
      // warm mark, then B takes at its next sync, 200 ms later).
      const b = await start('B');
      const warmSeen = new Set<number>();
      const takenCold: number[] = [];
      watch = setInterval(() => {
        for (const id of b.standby()) warmSeen.add(id);
        for (const id of b.held()) if (ids.includes(id) && !warmSeen.has(id) && !takenCold.includes(id)) takenCold.push(id);
      }, 20);
      const ours = (list: number[]) => list.filter((id) => ids.includes(id)).sort((x, y) => x - y);
      const heldBy = (r: MonitorRunner) => ours(r.held());
      const standbyOf = (r: MonitorRunner) => ours(r.standby());
      // Rendezvous hashing gives B a share; 8 servers all staying with A has odds of 1 in 256.
      await expect
        .poll(() => heldBy(b).length > 0 && heldBy(a).length + heldBy(b).length === ids.length, { timeout: 20_000, interval: 100 })
        .toBe(true);
      clearInterval(watch);
      expect(takenCold).toEqual([]);
      // Each keeps a warm standby of the other's servers.
      await expect.poll(() => standbyOf(a), { timeout: 20_000, interval: 100 }).toEqual(heldBy(b));
      await expect.poll(() => standbyOf(b), { timeout: 20_000, interval: 100 }).toEqual(heldBy(a));
      await expect.poll(() => ids.every((id) => okBy('A', id) || okBy('B', id, 0)), { timeout: 20_000, interval: 100 }).toBe(true);

      // B dies: A takes its servers over on the connections it kept, and samples them.
      const ofB = heldBy(b);
      const loginsBefore = host.sshd.logins(TEST_USERS.key.name);
      kill(b);
      const killedAt = Date.now();
      await expect.poll(() => ofB.every((id) => okBy('A', id, killedAt)), { timeout: 20_000, interval: 100 }).toBe(true);
      expect(host.sshd.logins(TEST_USERS.key.name)).toBe(loginsBefore);
      for (const s of servers) await act(s.id, 'stop_monitor');

      const slots = recorded.filter((r) => ids.includes(r.serverId) && r.outcome === 'ok').map((r) => `${r.serverId}@${r.due}`);
      expect(new Set(slots).size).toBe(slots.length);
      for (const id of ids) expect(await rowCount(id)).toBe(slots.filter((x) => x.startsWith(`${id}@`)).length);
    } finally {
      clearInterval(watch);
      await close();
    }
  });
});

describe('streaming samples and the per-poll fallback', () => {
  /** A sample stream on its own connection to a new confirmed server; both closed after `fn`. */
  async function withStream(fn: (stream: SampleStream, conn: SshConnection) => Promise<void>) {
    const server = await confirmedServer(keyLogin(host.sshd));
    const row = await ctx.db.rootServer.findUniqueOrThrow({ where: { id: server.id } });
    const conn = await connectRootServer(ctx, row);
    try {
      const stream = await SampleStream.open(conn, 5000);
      await fn(stream, conn);
      stream.close();
    } finally {
      conn.close();
    }
  }

  it('a streamed sample reads the same /proc values as the per-poll command, and gives the same metrics and state', async () => {
    await withStream(async (stream, conn) => {
      const streamed = await stream.request(5000);
      const polled = parseSamples((await conn.exec(SAMPLE_COMMAND, { sudo: false })).stdout)[0]!;
      // Counters move between the two reads; what does not move must be equal.
      expect(streamed.memTotal).toBe(polled.memTotal);
      expect(streamed.diskTotal).toBe(polled.diskTotal);
      expect(Object.keys(streamed).sort()).toEqual(Object.keys(polled).sort());
      expect(streamed.cpuTotal).toBeLessThanOrEqual(polled.cpuTotal);
      expect(streamed.uptime).toBeLessThanOrEqual(polled.uptime);
      const again = await stream.request(5000); // the same channel answers again
      expect(again.uptime).toBeGreaterThanOrEqual(streamed.uptime);
    });
  });

  it('an answer that arrived while the event loop was stalled past the timeout is taken, not a timeout', async () => {
    await withStream(async (stream) => {
      const asked = stream.request(1000);
      // A stall (CPU starvation, a long GC): the answer comes into the socket meanwhile, and when the
      // loop runs again the expired timer runs before that input is read.
      const until = Date.now() + 2500;
      while (Date.now() < until) {
        /* stalled */
      }
      expect((await asked).memTotal).toBeGreaterThan(0);
      expect(stream.closed).toBe(false);
      expect((await stream.request(5000)).memTotal).toBeGreaterThan(0); // still in step
    });
  });

  it('poll() through the stream, the fallback and the per-poll command record alike; a shell that cannot run the loop falls back', async () => {
    const server = await confirmedServer(passwordLogin());
    await monitorByHand(ctx.db, [server.id]);
    const events: MonitorPollEvent[] = [];
    const poller = createMonitorPoller(ctx, { pool, observers: [async (e) => void events.push(...e)] });
    const streams = new Map<number, SampleStream>();
    const fallback = new Set<number>();
    const viaStream = streamSampler(streams, fallback);
    // A login shell that cannot run the loop (e.g. fish) ends at once with an error.
    const broken = streamSampler(new Map(), fallback, "echo 'Unsupported use of ||' >&2; exit 127");
    const results = [];
    for (const sampler of [viaStream, viaStream, execSampler, broken, broken] as Sampler[])
      results.push(await poller.poll(server.id, { sampler }));
    expect(streams.has(server.id)).toBe(true);
    expect(fallback.has(server.id)).toBe(true); // the broken one fell back to the per-poll command
    const rows = await ctx.db.monitorLog.findMany({ where: { root_server_id: server.id }, orderBy: { created_at: 'asc' } });
    expect(rows).toHaveLength(5);
    const memTotal = Number(/^MemTotal:\s+(\d+)/m.exec(readFileSync('/proc/meminfo', 'utf8'))![1]) * 1024;
    for (const [i, result] of results.entries()) {
      expect(result.outcome).toBe('ok');
      if (result.outcome !== 'ok') continue;
      expect(result.server_state).toBe(serverStateOf(result.metrics));
      expect(result.metrics.ram_total_bytes).toBe(memTotal);
      expect(Number(rows[i]!.ram_total_bytes)).toBe(memTotal);
      expect(Number(rows[i]!.disk_total_bytes)).toBe(results[0]!.outcome === 'ok' ? results[0]!.metrics.disk_total_bytes : 0);
      for (const p of [result.metrics.cpu_percent, result.metrics.ram_percent, result.metrics.disk_percent]) {
        expect(p).toBeGreaterThanOrEqual(0);
        expect(p).toBeLessThanOrEqual(100);
      }
    }
    // One event per recorded poll, whichever way the sample came.
    expect(events).toHaveLength(5);
    expect(events.every((e) => e.outcome === 'ok' && e.failures === 0 && e.error === null)).toBe(true);
    // One SSH login for all of them (the stream runs on the pooled connection).
    for (const s of streams.values()) s.close();
    await unmonitor(ctx.db, [server.id]);
  });

  it('batched streamed samples follow the same state rules and tell the observers once each', async () => {
    const server = await confirmedServer(keyLogin(host.sshd));
    await monitorByHand(ctx.db, [server.id]);
    const events: MonitorPollEvent[] = [];
    const poller = createMonitorPoller(ctx, { pool, observers: [async (e) => void events.push(...e)] });
    const base = sampleMetrics();
    const hot = { ...base, cpu_percent: 97.5 };
    const written = await poller.recordSamples([{ serverId: server.id, metrics: hot, signature: 'x', at: new Date() }]);
    const row = await ctx.db.rootServer.findUniqueOrThrow({ where: { id: server.id } });
    expect(row).toMatchObject({ server_state: 'warning', monitor_failures: 0 });
    // The SQL signature is the one connectionSignature() computes: no reconnect without a change.
    const { connectionSignature } = await import('../src/monitoring/monitor-poll.js');
    expect(written.get(server.id)).toEqual({ outcome: 'ok', signature: connectionSignature(row) });
    await poller.recordSamples([{ serverId: server.id, metrics: base, signature: 'x', at: new Date() }]);
    expect(await messages(server.id)).toEqual([
      'Server state: online → warning. CPU 97.5 %, RAM 50 %, disk 50 % (warning at 90 %).',
      'Server state: warning → online.',
    ]);
    expect(events.map((e) => [e.previous_state, e.server_state, e.outcome])).toEqual([
      ['online', 'warning', 'ok'],
      ['warning', 'online', 'ok'],
    ]);
    // Monitoring stopped: nothing is written, nobody is told.
    await unmonitor(ctx.db, [server.id]);
    expect((await poller.recordSamples([{ serverId: server.id, metrics: base, signature: 'x', at: new Date() }])).size).toBe(0);
    expect(events).toHaveLength(2);
    expect(await rowCount(server.id)).toBe(2);
  });
});

describe('retention', () => {
  it('deletes only rows older than the Keep Root Server Log Period, in batches', async () => {
    const server = await confirmedServer(keyLogin(host.sshd));
    const insert = (ageMs: number) => insertMonitorLog(ctx.db, server.id, new Date(Date.now() - ageMs));
    const day = 24 * 3600_000;
    for (let i = 0; i < 5; i++) await insert(3 * day + i * 60_000);
    for (let i = 0; i < 3; i++) await insert(day + i * 60_000);
    for (let i = 0; i < 2; i++) await insert(60_000);

    // The daily job with the default period (2 days).
    const jobId = await ctx.queues.enqueue(monitorJobs.monitor_log_retention, {});
    const job = await waitForJob(app, as.user, jobId);
    expect(job).toMatchObject({ state: 'completed', result: { deleted: 5, days: 2 }, progress: { deleted: 5 } });
    expect(await rowCount(server.id)).toBe(5);

    // A shorter period from the settings, in batches of 2: 3 rows go in 2 full batches and a last one.
    await request(app, as.admin, { method: 'PATCH', url: '/api/v1/settings', payload: { keep_root_server_log_period: 1 } });
    const batches: number[] = [];
    const result = await deleteOldMonitorLogs(ctx.db, 1, { batchSize: 2, afterBatch: (d) => batches.push(d) });
    expect(result.deleted).toBe(3);
    expect(batches).toEqual([2, 3]);
    expect(await rowCount(server.id)).toBe(2);
  });
});
