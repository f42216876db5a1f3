// Alerts (DESIGN §10) on real parts: a real OpenSSH server on loopback whose /proc is this
// machine's, real PostgreSQL, Redis and BullMQ workers (the alert_notify job), a real SMTP server,
// and local ntfy-compatible HTTP servers (one that accepts, one that refuses). Polls are driven
// by calling the monitoring poller with the features' observers, so every step is deterministic.
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { createContext, type AppContext } from '../src/context.js';
import { composeFeatures } from '../src/features.js';
import { createMonitorPoller, type MonitorPoller } from '../src/monitoring/monitor-poll.js';
import { createSshPool } from '../src/core/ssh-pool.js';
import { serverStateKey } from '../src/alerts/alert-state.js';
import type { TestContext } from './helpers/context.js';
import { request, type Caller } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';
import { freePort, startSshd, TEST_USERS, type Sshd } from './helpers/sshd.js';
import { sendJson, startRecordingServer, type RecordedRequest, type RecordingServer } from './helpers/http-recorder.js';
import { startSmtpServer, type TestSmtpServer } from './helpers/smtp.js';

let ctx: TestContext;
let app: FastifyInstance;
let as: { user: Caller; operator: Caller; admin: Caller };
let sshd: Sshd;
/** The connections of the pollers the tests create. */
const pool = createSshPool();
let ntfy: RecordingServer;
let refusing: RecordingServer;
let smtp: TestSmtpServer;
let poll: MonitorPoller['poll'];
let defaultPushId: number;
let refusingPushId: number;

beforeAll(async () => {
  sshd = await startSshd();
  smtp = await startSmtpServer();
  ntfy = await startRecordingServer((req: RecordedRequest, res) => {
    if (req.method === 'POST' && req.path === '/') return sendJson(res, 200, { id: `m${ntfy.calls.length}`, event: 'message' });
    return sendJson(res, 404, { error: 'page not found' });
  });
  refusing = await startRecordingServer((_req, res) => sendJson(res, 403, { code: 40301, http: 403, error: 'forbidden' }));
});
afterAll(async () => {
  pool.close();
  await sshd?.stop();
  await ntfy?.close();
  await refusing?.close();
  await smtp?.close();
});

const t = useTestApp({ workers: true, env: () => ({ SMTP_URL: smtp.url, OUTBOUND_TIMEOUT_MS: '2000' }) });

beforeAll(async () => {
  ({ ctx, app, as } = t);
  poll = createMonitorPoller(ctx, { pool, observers: composeFeatures(ctx).monitorPollObservers }).poll;
  const mk = async (payload: object) => {
    const res = await request(app, as.operator, { method: 'POST', url: '/api/v1/notification-servers', payload });
    expect(res.statusCode, res.body).toBe(201);
    return res.json().id as number;
  };
  defaultPushId = await mk({ name: 'ntfy', provider: 'selfhosted_push', url: ntfy.url, is_default: true });
  refusingPushId = await mk({ name: 'refusing', provider: 'selfhosted_push', url: refusing.url });
});

const passwordLogin = { username: TEST_USERS.password.name, password: TEST_USERS.password.password };
let serverSeq = 0;

/** A confirmed root server with monitoring on but no schedule: the test drives its polls. */
async function monitoredServer(extra: Record<string, unknown> = {}) {
  const res = await request(app, as.operator, {
    method: 'POST',
    url: '/api/v1/root-servers',
    payload: { name: `web-${++serverSeq}`, ip: sshd.host, port: sshd.port, monitor_update_interval: '5s', ...passwordLogin, ...extra },
  });
  expect(res.statusCode, res.body).toBe(201);
  const confirmed = await request(app, as.operator, { method: 'POST', url: `/api/v1/root-servers/${res.json().id}/actions/confirm` });
  expect(confirmed.statusCode, confirmed.body).toBe(200);
  await ctx.db.rootServer.update({ where: { id: res.json().id }, data: { monitoring_enabled: true, server_state: 'online' } });
  return res.json() as { id: number; name: string };
}

async function createRule(payload: Record<string, unknown>) {
  const res = await request(app, as.operator, { method: 'POST', url: '/api/v1/alert-rules', payload });
  expect(res.statusCode, res.body).toBe(201);
  return res.json() as { id: number } & Record<string, unknown>;
}
const patchRule = (id: number, payload: object) =>
  request(app, as.operator, { method: 'PATCH', url: `/api/v1/alert-rules/${id}`, payload });
const alertsOf = async (query: string) => (await request(app, as.user, { method: 'GET', url: `/api/v1/alerts?${query}` })).json().items;
const alertNotices = (serverId: number) =>
  ctx.db.message.findMany({
    where: { model_name: 'svc.root.server', rec_id: serverId, subtype_xmlid: 'mail.mt_alert', body: { contains: 'ALERT' } },
    orderBy: { id: 'asc' },
  });
const resolveNotices = (serverId: number) =>
  ctx.db.message.findMany({
    where: { model_name: 'svc.root.server', rec_id: serverId, subtype_xmlid: 'mail.mt_alert', body: { startsWith: '[RESOLVED]' } },
    orderBy: { id: 'asc' },
  });
const publishes = (server: RecordingServer, text: string) =>
  server.callsTo('/').filter((c) => c.method === 'POST' && (JSON.parse(c.body) as { title: string }).title.includes(text));

describe('alert-rules: the API', () => {
  it('operators write, users read; bad input is a 400 naming the field, and nothing is stored', async () => {
    const server = await monitoredServer();
    const rule = await createRule({ name: 'busy', metric: 'cpu_percent', threshold: 90, root_server_ids: [server.id, server.id] });
    expect(rule).toMatchObject({
      metric: 'cpu_percent',
      threshold: 90,
      duration_seconds: 0,
      root_server_ids: [server.id],
      notification_server_id: null,
      topic: 'svc-alerts',
      email_to: [],
      notify_resolved: true,
      active: true,
    });
    expect((await request(app, as.user, { method: 'GET', url: `/api/v1/alert-rules/${rule.id}` })).statusCode).toBe(200);
    const denied = await request(app, as.user, {
      method: 'POST',
      url: '/api/v1/alert-rules',
      payload: { name: 'x', metric: 'load_1', threshold: 1 },
    });
    expect(denied.statusCode).toBe(403);

    const before = await ctx.db.alertRule.count();
    const bad: [Record<string, unknown>, string][] = [
      [{ name: 'x', metric: 'swap_percent', threshold: 1 }, 'metric'],
      [{ name: 'x', metric: 'ram_percent' }, 'threshold'],
      [{ name: 'x', metric: 'load_1', threshold: null }, 'threshold'],
      [{ name: 'x', metric: 'cpu_percent', threshold: 1, duration_seconds: -5 }, 'duration_seconds'],
      [{ name: 'x', metric: 'cpu_percent', threshold: 1, root_server_ids: [server.id, 999_999] }, 'root_server_ids'],
      [{ name: 'x', metric: 'cpu_percent', threshold: 1, notification_server_id: 999_999 }, 'notification_server_id'],
      [{ name: 'x', metric: 'cpu_percent', threshold: 1, email_to: ['ops@example.com', 'not-an-address'] }, 'email_to'],
      [{ name: 'x', metric: 'cpu_percent', threshold: 1, topic: 'has spaces' }, 'topic'],
    ];
    for (const [payload, field] of bad) {
      const res = await request(app, as.operator, { method: 'POST', url: '/api/v1/alert-rules', payload });
      expect(res.statusCode, JSON.stringify(payload)).toBe(400);
      const fields = (res.json().error.details.fields as { field: string }[]).map((f) => f.field.replace(/^body\./, '').split('.')[0]);
      expect(fields, res.body).toContain(field);
    }
    expect(await ctx.db.alertRule.count()).toBe(before);

    // A change is checked on the rule as it will be: clearing the threshold of a cpu rule is refused.
    const cleared = await patchRule(rule.id, { threshold: null });
    expect(cleared.statusCode).toBe(400);
    expect(cleared.json().error.details.fields[0].field).toBe('threshold');
    // server_offline needs no threshold (one given is not kept).
    const offline = await createRule({ name: 'down', metric: 'server_offline', threshold: 5, duration_seconds: 60 });
    expect(offline).toMatchObject({ threshold: null, duration_seconds: 60 });
    expect((await request(app, as.operator, { method: 'DELETE', url: `/api/v1/alert-rules/${offline.id}` })).statusCode).toBe(204);
    expect((await request(app, as.operator, { method: 'DELETE', url: `/api/v1/alert-rules/${rule.id}` })).statusCode).toBe(204);
  });
});

describe('evaluation after every poll', () => {
  it('cpu_percent >= 0 fires on the next poll and notifies once (chatter, ntfy, mail); a threshold above 100 resolves it with a resolve notice', async () => {
    const server = await monitoredServer();
    const rule = await createRule({
      name: 'always',
      metric: 'cpu_percent',
      threshold: 0,
      root_server_ids: [server.id],
      topic: 'ops-alerts',
      email_to: ['ops@example.com'],
    });

    expect((await poll(server.id)).outcome).toBe('ok');
    const [alert] = await alertsOf(`rule_id=${rule.id}`);
    expect(alert).toMatchObject({ rule_id: rule.id, root_server_id: server.id, state: 'firing', metric: 'cpu_percent', threshold: 0 });
    expect(alert.value).toBeGreaterThanOrEqual(0);
    const notices = await alertNotices(server.id);
    expect(notices).toHaveLength(1);
    expect(notices[0]!.body).toMatch(new RegExp(`^\\[ALERT\\] ${server.name}: cpu_percent [0-9.]+ % >= 0 %`));

    // The push: the default notification server (the rule names none), the rule's topic, priority 4.
    await expect.poll(() => publishes(ntfy, `${server.name}: cpu_percent`).length, { timeout: 15_000 }).toBe(1);
    const pushed = JSON.parse(publishes(ntfy, `${server.name}: cpu_percent`)[0]!.body);
    expect(pushed).toMatchObject({ topic: 'ops-alerts', priority: 4, title: expect.stringContaining('[ALERT]') });
    const mail = await smtp.waitFor('ops@example.com');
    expect(mail.raw).toContain(`${server.name}: cpu_percent`);
    await expect.poll(async () => (await alertsOf(`rule_id=${rule.id}`))[0].notified_at, { timeout: 10_000 }).not.toBeNull();
    // The push is in the default notification server's action log, the delivery in the alert's.
    expect(await ctx.db.actionLog.count({ where: { model_name: 'svc.ntfy.server', rec_id: defaultPushId, status: 'success' } })).toBe(1);
    expect(await ctx.db.actionLog.findMany({ where: { model_name: 'svc.alert', rec_id: alert.id } })).toMatchObject([
      { status: 'success', output_text: expect.stringContaining('sent: mail to ops@example.com') },
    ]);

    // Still firing on the next polls: no second alert, no second notice.
    await poll(server.id);
    await poll(server.id);
    expect(await alertsOf(`rule_id=${rule.id}`)).toHaveLength(1);
    expect(await alertNotices(server.id)).toHaveLength(1);

    // The change takes effect on the next poll: resolved, with a resolve notice saying how long it lasted.
    expect((await patchRule(rule.id, { threshold: 101 })).statusCode).toBe(200);
    await poll(server.id);
    const [resolved] = await alertsOf(`rule_id=${rule.id}`);
    expect(resolved).toMatchObject({ state: 'resolved', resolved_at: expect.any(String) });
    expect(resolved.resolved_value).toBeLessThan(101);
    const resolveNote = await resolveNotices(server.id);
    expect(resolveNote).toHaveLength(1);
    expect(resolveNote[0]!.body).toMatch(
      new RegExp(`^\\[RESOLVED\\] ${server.name}: cpu_percent [0-9.]+ % \\(threshold 101 %\\), lasted \\d+ s`),
    );
    await expect.poll(() => publishes(ntfy, '[RESOLVED]').filter((c) => c.body.includes(server.name)).length, { timeout: 15_000 }).toBe(1);
    await smtp.waitFor('ops@example.com', 2);
    expect(publishes(ntfy, `${server.name}: cpu_percent`)).toHaveLength(2); // one fire, one resolve
    expect(await alertsOf(`rule_id=${rule.id}&state=firing`)).toHaveLength(0);
  });

  it('a 30 s rule does not fire on one sample; a 1 s rule fires once it has held 1 s; the count is rebuilt from the database', async () => {
    const server = await monitoredServer();
    const rule = await createRule({
      name: 'sustained',
      metric: 'ram_percent',
      threshold: 0,
      duration_seconds: 30,
      root_server_ids: [server.id],
    });
    const short = await createRule({
      name: 'short',
      metric: 'disk_percent',
      threshold: 0,
      duration_seconds: 1,
      root_server_ids: [server.id],
    });
    await poll(server.id);
    expect(await alertsOf(`rule_id=${rule.id}`)).toHaveLength(0);
    expect(await alertsOf(`rule_id=${short.id}`)).toHaveLength(0);
    await new Promise((r) => setTimeout(r, 1100));
    await poll(server.id);
    expect(await alertsOf(`rule_id=${rule.id}`)).toHaveLength(0);
    expect(await alertsOf(`rule_id=${short.id}`)).toMatchObject([{ state: 'firing' }]);

    // Samples 40 s and 20 s old that meet the condition too, and the working state lost (as after a
    // Redis restart): rebuilt from the monitor log, the condition has held for 30 s and more.
    for (const age of [40, 20]) {
      await ctx.db.$executeRaw`INSERT INTO root_server_monitor_logs (root_server_id, created_at, cpu_percent, ram_used_bytes,
        ram_total_bytes, ram_percent, disk_used_bytes, disk_total_bytes, disk_percent, net_rx_bytes_per_s, net_tx_bytes_per_s,
        load_1, load_5, load_15) VALUES (${server.id}, now() - make_interval(secs => ${age}), 1, 1, 2, 50, 1, 2, 50, 0, 0, 0, 0, 0)`;
    }
    await ctx.redis.del(serverStateKey(ctx.queues.prefix, server.id));
    await poll(server.id);
    expect(await alertsOf(`rule_id=${rule.id}`)).toMatchObject([{ state: 'firing' }]);
    // The rebuilt state knows the short rule's alert is open: no second one.
    expect(await alertsOf(`rule_id=${short.id}`)).toHaveLength(1);
    expect(await alertNotices(server.id)).toHaveLength(2);
  });

  it('a failed poll, or monitoring started again, restarts a sustained count', async () => {
    const server = await monitoredServer();
    const rule = await createRule({
      name: 'one second',
      metric: 'disk_percent',
      threshold: 0,
      duration_seconds: 1,
      root_server_ids: [server.id],
    });
    const [observe] = composeFeatures(ctx).monitorPollObservers;
    const event = (over: object) => ({
      root_server_id: server.id,
      outcome: 'failed' as const,
      previous_state: 'online',
      server_state: 'online',
      metrics: null,
      failures: 1,
      error: 'Connection refused',
      at: new Date(),
      ...over,
    });
    const second = () => new Promise((r) => setTimeout(r, 1100));
    await poll(server.id); // starts holding
    await second();
    await observe!([event({})]); // a failed poll in between
    await poll(server.id);
    expect(await alertsOf(`rule_id=${rule.id}`)).toHaveLength(0);
    await second();
    // The first poll after monitoring was started again (previous state no_monitor) starts afresh too.
    await observe!([event({ outcome: 'ok', previous_state: 'no_monitor', metrics: { disk_percent: 50 }, failures: 0, error: null })]);
    expect(await alertsOf(`rule_id=${rule.id}`)).toHaveLength(0);
    await second();
    await poll(server.id);
    expect(await alertsOf(`rule_id=${rule.id}`)).toMatchObject([{ state: 'firing' }]);
  });

  it('a closed port goes offline after 3 failed polls and server_offline fires; a refused push keeps the alert and sets notify_error', async () => {
    const server = await monitoredServer();
    await request(app, as.operator, {
      method: 'PATCH',
      url: `/api/v1/root-servers/${server.id}`,
      payload: { port: await freePort(), ...passwordLogin },
    });
    await ctx.db.rootServer.update({ where: { id: server.id }, data: { monitoring_enabled: true } });
    const rule = await createRule({
      name: 'down',
      metric: 'server_offline',
      root_server_ids: [server.id],
      notification_server_id: refusingPushId,
    });
    expect(await poll(server.id)).toMatchObject({ outcome: 'failed', failures: 1 });
    expect(await poll(server.id)).toMatchObject({ outcome: 'failed', failures: 2 });
    expect(await alertsOf(`rule_id=${rule.id}`)).toHaveLength(0);
    expect(await poll(server.id)).toMatchObject({ outcome: 'failed', failures: 3, server_state: 'offline' });
    const [alert] = await alertsOf(`rule_id=${rule.id}`);
    expect(alert).toMatchObject({ state: 'firing', metric: 'server_offline', threshold: null, value: 3 });
    expect((await alertNotices(server.id))[0]!.body).toMatch(
      new RegExp(`^\\[ALERT\\] ${server.name}: server_offline \\(3 failed polls in a row\\)`),
    );

    await expect
      .poll(async () => (await alertsOf(`rule_id=${rule.id}`))[0].notify_error, { timeout: 15_000 })
      .toMatch(new RegExp(`^push via notification server ${refusingPushId}: .*refused`));
    expect(refusing.callsTo('/').length).toBeGreaterThanOrEqual(1);
    const logs = await ctx.db.actionLog.findMany({ where: { model_name: 'svc.alert', rec_id: alert.id } });
    expect(logs[0]).toMatchObject({ status: 'failure', input_text: expect.stringContaining('attempt 1 of 4') });
  });
});

describe('rule and server lifecycle', () => {
  it('deactivation resolves on the next poll; deleting a rule resolves silently; deleting a server resolves its alerts', async () => {
    const server = await monitoredServer();
    const a = await createRule({ name: 'a', metric: 'disk_percent', threshold: 0, root_server_ids: [server.id] });
    const b = await createRule({ name: 'b', metric: 'load_1', threshold: 0, root_server_ids: [server.id] });
    const c = await createRule({ name: 'c', metric: 'cpu_percent', threshold: 0, root_server_ids: [server.id] });
    await poll(server.id);
    expect(await alertsOf(`root_server_id=${server.id}&state=firing`)).toHaveLength(3);

    expect((await patchRule(a.id, { active: false })).statusCode).toBe(200);
    await poll(server.id);
    expect(await alertsOf(`rule_id=${a.id}`)).toMatchObject([{ state: 'resolved', resolved_value: null }]);
    expect((await resolveNotices(server.id)).map((m) => m.body)).toEqual([expect.stringContaining('no longer watched')]);

    expect((await request(app, as.operator, { method: 'DELETE', url: `/api/v1/alert-rules/${b.id}` })).statusCode).toBe(204);
    expect(await alertsOf(`rule_id=${b.id}`)).toMatchObject([{ state: 'resolved' }]);
    expect(await resolveNotices(server.id)).toHaveLength(1); // silently

    expect((await request(app, as.operator, { method: 'DELETE', url: `/api/v1/root-servers/${server.id}` })).statusCode).toBe(204);
    expect(await alertsOf(`rule_id=${c.id}`)).toMatchObject([{ state: 'resolved', root_server_id: server.id }]);
  });
});

describe('two workers', () => {
  it('racing on the same server and the same poll event: one alert, one notice', async () => {
    const ctx2: AppContext = await createContext(ctx.config, pino({ level: 'silent' }));
    try {
      const observers1 = composeFeatures(ctx).monitorPollObservers;
      const observers2 = composeFeatures(ctx2).monitorPollObservers;
      const poll2 = createMonitorPoller(ctx2, { pool, observers: observers2 }).poll;
      const server = await monitoredServer();
      const rules = [];
      for (let i = 0; i < 4; i++)
        rules.push(await createRule({ name: `race-${i}`, metric: 'cpu_percent', threshold: 0, root_server_ids: [server.id] }));

      // Two pollers of two processes polling the same server at once.
      await Promise.all([poll(server.id), poll2(server.id)]);
      // And the same event handed to both processes' observers at once, several times.
      const event = {
        root_server_id: server.id,
        outcome: 'ok' as const,
        previous_state: 'online',
        server_state: 'online',
        metrics: { cpu_percent: 50, ram_percent: 10, disk_percent: 10, load_1: 0.1 },
        failures: 0,
        error: null,
        at: new Date(),
      };
      for (let i = 0; i < 5; i++) await Promise.all([...observers1, ...observers2].map((o) => o([event])));

      for (const rule of rules) expect(await alertsOf(`rule_id=${rule.id}`)).toHaveLength(1);
      expect(await alertNotices(server.id)).toHaveLength(rules.length);
      await expect.poll(() => publishes(ntfy, `${server.name}: cpu_percent`).length, { timeout: 15_000 }).toBe(rules.length);

      // Resolving races too: one resolve each, one resolve notice each.
      for (const rule of rules) await patchRule(rule.id, { threshold: 1000 });
      await Promise.all([...observers1, ...observers2].map((o) => o([event])));
      await Promise.all([...observers1, ...observers2].map((o) => o([event])));
      expect(await resolveNotices(server.id)).toHaveLength(rules.length);
      await expect.poll(() => publishes(ntfy, `${server.name}: cpu_percent`).length, { timeout: 15_000 }).toBe(2 * rules.length);
    } finally {
      await ctx2.close();
    }
  });
});
