// GET /metrics on real parts: the app and its workers (monitor runner included) on the real
// PostgreSQL and Redis, a root server on a real OpenSSH server, a real webhook call and a real job.
// Every scrape is read with a Prometheus text-format parser. PostgreSQL and Redis "going down"
// is a loopback relay in front of them that the test cuts.
import { describe, expect, it } from 'vitest';
import pino from 'pino';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../src/app.js';
import { createContext } from '../src/context.js';
import { startWorkers } from '../src/worker.js';
import { confirmedRootServer, createCaller, postAction, request, type Caller } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';
import { type Family, parseScrape, sampleOf, samplesOf } from './helpers/prometheus-text.js';
import { freePort, passwordLogin, useSshd, TEST_USERS } from './helpers/sshd.js';
import { startTcpProxy } from './helpers/tcp-proxy.js';

const sshd = useSshd();

const t = useTestApp({ workers: true });

const scrape = (app: FastifyInstance, caller: Caller | null) => request(app, caller, { method: 'GET', url: '/metrics' });

async function families(app: FastifyInstance = t.app, caller: Caller = t.as.user): Promise<Map<string, Family>> {
  const res = await scrape(app, caller);
  expect(res.statusCode, res.body).toBe(200);
  return parseScrape(res.body);
}

/** A confirmed root server on the test sshd with monitoring started (the workers' runner polls it). */
async function monitoredServer(name: string) {
  const { id } = await confirmedRootServer(t.app, t.as.operator, sshd, { name, monitor_update_interval: '5s', ...passwordLogin() });
  const started = await postAction(t.app, t.as.operator, 'root-servers', id, 'start_monitor');
  expect(started.statusCode, started.body).toBe(200);
  await expect.poll(() => t.ctx.db.monitorLog.count({ where: { root_server_id: id } }), { timeout: 30_000 }).toBeGreaterThan(0);
  return id;
}

let serverId: number;
let ruleId: number;

describe('GET /metrics', () => {
  it('needs a token: none or an unknown one is a 401', async () => {
    expect((await scrape(t.app, null)).statusCode).toBe(401);
    const unknown = await t.app.inject({ method: 'GET', url: '/metrics', headers: { authorization: 'Bearer svc_nothing' } });
    expect(unknown.statusCode).toBe(401);
    expect(unknown.json().error.code).toBe('unauthenticated');
  });

  it("answers any user's token in the text format, parsed by a Prometheus parser, with every listed series", async () => {
    serverId = await monitoredServer('web-metrics');
    const rule = await request(t.app, t.as.operator, {
      method: 'POST',
      url: '/api/v1/alert-rules',
      payload: { name: 'always', metric: 'cpu_percent', threshold: 0, root_server_ids: [serverId], email_to: ['ops@example.com'] },
    });
    expect(rule.statusCode, rule.body).toBe(201);
    ruleId = rule.json().id;
    await expect.poll(() => t.ctx.db.alert.count({ where: { rule_id: ruleId, state: 'firing' } }), { timeout: 20_000 }).toBe(1);
    const partner = await t.ctx.db.partner.create({ data: { name: 'Metrics Co', email: 'metrics@example.com' } });
    await t.ctx.db.subscription.create({ data: { name: 'SUBM1', partner_id: partner.id, state: 'running' } });
    const window = await request(t.app, t.as.operator, {
      method: 'POST',
      url: '/api/v1/maintenance-windows',
      payload: { root_server_ids: [serverId], starts_at: '2020-01-01T00:00:00Z', ends_at: '2020-01-02T00:00:00Z' },
    });
    expect(window.statusCode, window.body).toBe(201);

    const res = await scrape(t.app, t.as.user);
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('text/plain; version=0.0.4; charset=utf-8');
    const f = parseScrape(res.body);
    const types: Record<string, Family['type']> = {
      svc_http_requests_total: 'COUNTER',
      svc_http_request_duration_seconds: 'HISTOGRAM',
      svc_jobs: 'GAUGE',
      svc_jobs_finished_total: 'COUNTER',
      svc_job_duration_seconds: 'HISTOGRAM',
      svc_monitor_polls_total: 'COUNTER',
      svc_monitor_poll_lateness_seconds: 'HISTOGRAM',
      svc_monitor_leases_held: 'GAUGE',
      svc_monitor_standbys: 'GAUGE',
      svc_monitor_ssh_connections: 'GAUGE',
      svc_servers: 'GAUGE',
      svc_server_state: 'GAUGE',
      svc_server_cpu_usage_ratio: 'GAUGE',
      svc_server_memory_usage_ratio: 'GAUGE',
      svc_server_disk_usage_ratio: 'GAUGE',
      svc_server_load1: 'GAUGE',
      svc_alerts_firing: 'GAUGE',
      svc_alert_notices_total: 'COUNTER',
      svc_subscriptions: 'GAUGE',
      svc_servers_in_maintenance: 'GAUGE',
      svc_dependency_up: 'GAUGE',
      svc_scrape_source_up: 'GAUGE',
      process_cpu_user_seconds_total: 'COUNTER',
    };
    for (const [name, type] of Object.entries(types)) expect(f.get(name)?.type, name).toBe(type);

    const server = { id: String(serverId), name: 'web-metrics' };
    expect(samplesOf(f, 'svc_server_state', server)).toHaveLength(1);
    expect(samplesOf(f, 'svc_server_state', server)[0]!.labels!.state).toMatch(/^(online|warning)$/);
    for (const name of ['svc_server_cpu_usage_ratio', 'svc_server_memory_usage_ratio', 'svc_server_disk_usage_ratio']) {
      expect(samplesOf(f, name, server), name).toHaveLength(1);
      const value = sampleOf(f, name, server);
      expect(value, name).toBeGreaterThanOrEqual(0);
      expect(value, name).toBeLessThanOrEqual(1);
    }
    expect(sampleOf(f, 'svc_servers', { state: samplesOf(f, 'svc_server_state', server)[0]!.labels!.state! })).toBeGreaterThanOrEqual(1);
    expect(sampleOf(f, 'svc_monitor_leases_held')).toBeGreaterThanOrEqual(1);
    expect(sampleOf(f, 'svc_monitor_ssh_connections')).toBeGreaterThanOrEqual(1);
    expect(sampleOf(f, 'svc_monitor_polls_total', { outcome: 'ok' })).toBeGreaterThanOrEqual(1);
    expect(sampleOf(f, 'svc_alerts_firing', { metric: 'cpu_percent', silenced: 'false' })).toBe(1);
    expect(sampleOf(f, 'svc_subscriptions', { state: 'running', usage_state: 'ok' })).toBe(1);
    expect(sampleOf(f, 'svc_servers_in_maintenance')).toBe(0); // the window is over
    expect(sampleOf(f, 'svc_jobs', { queue: 'alerts', state: 'failed' })).toBe(0);
    expect(sampleOf(f, 'svc_dependency_up', { dependency: 'postgresql' })).toBe(1);
    expect(sampleOf(f, 'svc_dependency_up', { dependency: 'redis' })).toBe(1);
    for (const source of ['monitoring', 'alerts', 'jobs', 'subscriptions', 'maintenance']) {
      expect(sampleOf(f, 'svc_scrape_source_up', { source }), source).toBe(1);
    }
  });

  it('counters move with real requests, webhook calls, jobs and polls; route labels are templates', async () => {
    const before = await families();
    for (let i = 0; i < 3; i++)
      expect((await request(t.app, t.as.user, { method: 'GET', url: '/api/v1/root-servers' })).statusCode).toBe(200);
    expect((await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/root-servers/${serverId}` })).statusCode).toBe(200);
    const webhookToken = 'a'.repeat(64);
    const call = await t.app.inject({
      method: 'POST',
      url: `/svc/webhook/${webhookToken}`,
      headers: { 'content-type': 'application/json' },
      payload: '{}',
    });
    expect(call.statusCode).toBe(400);
    // A job: stop_monitor tells the features in the monitor_stopped job.
    expect(
      (await request(t.app, t.as.operator, { method: 'POST', url: `/api/v1/root-servers/${serverId}/actions/stop_monitor` })).statusCode,
    ).toBe(200);
    await expect.poll(() => t.ctx.db.alert.count({ where: { rule_id: ruleId, state: 'firing' } }), { timeout: 20_000 }).toBe(0);
    const polled = sampleOf(before, 'svc_monitor_polls_total', { outcome: 'ok' });
    // Polls of another monitored server meanwhile.
    const other = await monitoredServer('web-metrics-2');

    const after = await families();
    const delta = (name: string, labels: Record<string, string>) => sampleOf(after, name, labels) - sampleOf(before, name, labels);
    expect(delta('svc_http_requests_total', { method: 'GET', route: '/api/v1/root-servers', status: '200' })).toBe(3);
    expect(delta('svc_http_requests_total', { method: 'GET', route: '/api/v1/root-servers/:id', status: '200' })).toBe(1);
    expect(delta('svc_http_request_duration_seconds', { method: 'GET', route: '/api/v1/root-servers', status: '200' })).toBe(3);
    expect(delta('svc_http_requests_total', { method: 'POST', route: '/svc/webhook/:token', status: '400' })).toBe(1);
    expect(delta('svc_jobs_finished_total', { queue: 'monitor', name: 'monitor_stopped', outcome: 'completed' })).toBe(1);
    expect(delta('svc_job_duration_seconds', { queue: 'monitor', name: 'monitor_stopped' })).toBe(1);
    // A poll is counted once its row and its observers are done: a moment after the row is visible.
    const lateness = sampleOf(before, 'svc_monitor_poll_lateness_seconds');
    await expect
      .poll(async () => {
        const f = await families();
        return (
          sampleOf(f, 'svc_monitor_polls_total', { outcome: 'ok' }) > polled && sampleOf(f, 'svc_monitor_poll_lateness_seconds') > lateness
        );
      })
      .toBe(true);
    expect(delta('svc_alert_notices_total', { event: 'resolved' })).toBe(1);
    // The fleet's series are read at most every 5 s: a later scrape shows the stop and the new server.
    await expect
      .poll(
        async () => {
          const f = await families();
          return [
            sampleOf(f, 'svc_alerts_firing', { metric: 'cpu_percent', silenced: 'false' }),
            samplesOf(f, 'svc_server_state', { id: String(serverId) }).length,
            samplesOf(f, 'svc_server_state', { id: String(other) }).length,
            sampleOf(f, 'svc_servers', { state: 'no_monitor' }) >= 1,
          ];
        },
        { timeout: 20_000, interval: 1000 },
      )
      .toEqual([0, 0, 1, true]);
    // Route labels are templates: no raw path, so no token, in any label.
    const routes = new Set(samplesOf(after, 'svc_http_requests_total').map((m) => m.labels?.route ?? ''));
    expect([...routes].some((r) => r.includes(webhookToken) || /\/\d+/.test(r))).toBe(false);
    expect(routes).toContain('/metrics');
  });

  it('never carries a secret, an e-mail address or a webhook token', async () => {
    const partner = await t.ctx.db.partner.create({ data: { name: 'Hook Co', email: 'hooks@example.com' } });
    const hook = await request(t.app, t.as.admin, {
      method: 'POST',
      url: '/api/v1/webhooks',
      payload: { model_name: 'res.partner', rec_id: partner.id },
    });
    expect(hook.statusCode, hook.body).toBe(201);
    const token = hook.json().token as string;
    const fired = await t.app.inject({
      method: 'POST',
      url: `/svc/webhook/${token}`,
      headers: { 'content-type': 'application/json' },
      payload: '{"message":"hi"}',
    });
    expect(fired.statusCode, fired.body).toBe(200);
    const text = (await scrape(t.app, t.as.user)).body;
    expect(text).not.toContain(token);
    expect(text).not.toContain(TEST_USERS.password.password);
    expect(text).not.toContain(t.as.user.token);
    expect(text).not.toContain('@'); // no address of a user, partner or alert rule
  });
});

describe('when PostgreSQL or Redis is down', () => {
  it('the scrape still answers 200 with what the process knows, and says what is down', async () => {
    const pgUrl = new URL(t.ctx.config.DATABASE_URL);
    const redisUrl = new URL(t.ctx.config.REDIS_URL);
    const pg = await startTcpProxy({ host: pgUrl.hostname, port: Number(pgUrl.port || 5432) });
    const redis = await startTcpProxy({ host: redisUrl.hostname, port: Number(redisUrl.port || 6379) });
    pgUrl.host = `127.0.0.1:${pg.port}`;
    redisUrl.host = `127.0.0.1:${redis.port}`;
    const ctx = await createContext(
      { ...t.ctx.config, DATABASE_URL: pgUrl.toString(), REDIS_URL: redisUrl.toString() },
      pino({ level: 'silent' }),
    );
    const app = await buildApp(ctx);
    try {
      const known = await createCaller(ctx, 'user');
      const stranger = await createCaller(ctx, 'user');
      const up = await families(app, known);
      expect(sampleOf(up, 'svc_scrape_source_up', { source: 'jobs' })).toBe(1);

      redis.cut();
      const noRedis = await families(app, known);
      expect(sampleOf(noRedis, 'svc_dependency_up', { dependency: 'redis' })).toBe(0);
      expect(sampleOf(noRedis, 'svc_dependency_up', { dependency: 'postgresql' })).toBe(1);
      expect(sampleOf(noRedis, 'svc_scrape_source_up', { source: 'jobs' })).toBe(0);
      expect(samplesOf(noRedis, 'svc_jobs')).toHaveLength(0);
      expect(sampleOf(noRedis, 'svc_scrape_source_up', { source: 'monitoring' })).toBe(1);
      expect(samplesOf(noRedis, 'svc_servers').length).toBeGreaterThan(0);

      pg.cut();
      const nothing = await families(app, known);
      expect(sampleOf(nothing, 'svc_dependency_up', { dependency: 'postgresql' })).toBe(0);
      expect(sampleOf(nothing, 'svc_scrape_source_up', { source: 'monitoring' })).toBe(0);
      expect(samplesOf(nothing, 'svc_servers')).toHaveLength(0);
      // What the process knows itself is still there.
      expect(sampleOf(nothing, 'svc_http_requests_total', { method: 'GET', route: '/metrics', status: '200' })).toBeGreaterThanOrEqual(3);
      expect(nothing.get('process_cpu_user_seconds_total')).toBeDefined();
      // A token PostgreSQL never confirmed to this process cannot be checked now: 401, not a 5xx.
      const unchecked = await scrape(app, stranger);
      expect(unchecked.statusCode).toBe(401);
      expect(unchecked.json().error.message).toMatch(/PostgreSQL does not answer/);

      pg.restore();
      redis.restore();
      await expect
        .poll(async () => sampleOf(await families(app, known), 'svc_dependency_up', { dependency: 'redis' }), { timeout: 15_000 })
        .toBe(1);
    } finally {
      pg.restore();
      redis.restore();
      await app.close();
      await ctx.close();
      await pg.close();
      await redis.close();
    }
  });
});

describe('a worker-only process', () => {
  it('serves its own metrics on METRICS_PORT, for a token, without the fleet series', async () => {
    const port = await freePort();
    const ctx = await createContext(
      { ...t.ctx.config, SVC_ROLE: 'worker', METRICS_PORT: port, HOST: '127.0.0.1' },
      pino({ level: 'silent' }),
    );
    const workers = await startWorkers(ctx);
    try {
      const url = `http://127.0.0.1:${port}/metrics`;
      expect((await fetch(url)).status).toBe(401);
      const res = await fetch(url, { headers: t.as.user.headers });
      expect(res.status).toBe(200);
      const f = parseScrape(await res.text());
      for (const name of [
        'svc_monitor_leases_held',
        'svc_monitor_polls_total',
        'svc_jobs_finished_total',
        'svc_dependency_up',
        'process_cpu_user_seconds_total',
      ]) {
        expect(f.has(name), name).toBe(true);
      }
      // The fleet's series are read by the API processes only.
      expect(f.has('svc_server_state')).toBe(false);
      expect(f.has('svc_scrape_source_up')).toBe(false);
    } finally {
      await workers.close();
      await ctx.close();
    }
  });
});
