// Alerts on real parts: a real OpenSSH server on loopback whose /proc is this machine's, real
// PostgreSQL, Redis and BullMQ workers (the alert_notify job), a real SMTP server, and local
// ntfy-compatible HTTP servers (one that accepts, one that refuses), set up by test/helpers/alerts.ts.
// Polls are driven by calling the monitoring poller with the features' observers, or handed to
// the observers at the time they stand for, so every step is deterministic.
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { createContext, type AppContext } from '../src/context.js';
import { composeFeatures } from '../src/features.js';
import { createMonitorPoller } from '../src/monitoring/monitor-poll.js';
import { serverStateKey } from '../src/alerts/alert-state.js';
import { createSshPool } from '../src/core/ssh-pool.js';
import type { TestContext } from './helpers/context.js';
import { request, type Caller } from './helpers/api.js';
import {
  alertsOf as alertsOfApp,
  okPoll,
  createRule as createRuleOn,
  expectEachRefused,
  monitoredServer as monitoredServerOn,
  notices,
  notificationServer,
  pushes,
  useAlertsApp,
} from './helpers/alerts.js';
import { insertMonitorLog } from './helpers/monitoring.js';
import { freePort, passwordLogin } from './helpers/sshd.js';
import { sendJson, startRecordingServer, type RecordingServer } from './helpers/http-recorder.js';

/** A push server that refuses every publish. */
let refusing: RecordingServer;
beforeAll(async () => {
  refusing = await startRecordingServer((_req, res) => sendJson(res, 403, { code: 40301, http: 403, error: 'forbidden' }));
});
afterAll(async () => {
  await refusing?.close();
});

const kit = useAlertsApp({ OUTBOUND_TIMEOUT_MS: '2000' });
let ctx: TestContext;
let app: FastifyInstance;
let as: { user: Caller; operator: Caller; admin: Caller };
let refusingPushId: number;
beforeAll(async () => {
  ({ ctx, app, as } = kit);
  refusingPushId = await notificationServer(kit, { name: 'refusing', provider: 'selfhosted_push', url: refusing.url });
});

const monitoredServer = (extra: Record<string, unknown> = {}) => monitoredServerOn(kit, 'web', extra);
const createRule = (payload: Record<string, unknown>) => createRuleOn(kit, payload);
/** A rule watching one server. */
const ruleOn = (serverId: number, payload: Record<string, unknown>) => createRule({ root_server_ids: [serverId], ...payload });
const patchRule = (id: number, payload: object) =>
  request(app, as.operator, { method: 'PATCH', url: `/api/v1/alert-rules/${id}`, payload });
const alertsOf = (query: string) => alertsOfApp(kit, query);
const alertNotices = (serverId: number) => notices(kit, serverId, '[ALERT]');
const resolveNotices = (serverId: number) => notices(kit, serverId, '[RESOLVED]');
/** One poll of a server, told to the alerts. */
const poll = (id: number) => kit.poll(id);

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
    await expectEachRefused(kit, '/api/v1/alert-rules', [
      [{ name: 'x', metric: 'swap_percent', threshold: 1 }, 'metric'],
      [{ name: 'x', metric: 'ram_percent' }, 'threshold'],
      [{ name: 'x', metric: 'load_1', threshold: null }, 'threshold'],
      [{ name: 'x', metric: 'cpu_percent', threshold: 1, duration_seconds: -5 }, 'duration_seconds'],
      [{ name: 'x', metric: 'cpu_percent', threshold: 1, root_server_ids: [server.id, 999_999] }, 'root_server_ids'],
      [{ name: 'x', metric: 'cpu_percent', threshold: 1, notification_server_id: 999_999 }, 'notification_server_id'],
      [{ name: 'x', metric: 'cpu_percent', threshold: 1, email_to: ['ops@example.com', 'not-an-address'] }, 'email_to'],
      [{ name: 'x', metric: 'cpu_percent', threshold: 1, topic: 'has spaces' }, 'topic'],
    ]);
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
    const rule = await ruleOn(server.id, {
      name: 'always',
      metric: 'cpu_percent',
      threshold: 0,
      topic: 'ops-alerts',
      email_to: ['ops@example.com'],
    });

    expect((await poll(server.id)).outcome).toBe('ok');
    const alert = (await alertsOf(`rule_id=${rule.id}`))[0]!;
    expect(alert).toMatchObject({ rule_id: rule.id, root_server_id: server.id, state: 'firing', metric: 'cpu_percent', threshold: 0 });
    // The value that opened it is the poll's sample.
    const sample = await ctx.db.monitorLog.findFirstOrThrow({ where: { root_server_id: server.id }, orderBy: { created_at: 'desc' } });
    expect(alert.value).toBe(sample.cpu_percent);
    const notices = await alertNotices(server.id);
    expect(notices).toHaveLength(1);
    expect(notices[0]!.body).toMatch(new RegExp(`^\\[ALERT\\] ${server.name}: cpu_percent [0-9.]+ % >= 0 %`));

    // The push: the default notification server (the rule names none), the rule's topic, priority 4.
    await expect.poll(() => pushes(kit.ntfy, `${server.name}: cpu_percent`).length, { timeout: 15_000 }).toBe(1);
    const pushed = JSON.parse(pushes(kit.ntfy, `${server.name}: cpu_percent`)[0]!.body);
    expect(pushed).toMatchObject({ topic: 'ops-alerts', priority: 4, title: expect.stringContaining('[ALERT]') });
    const mail = await kit.smtp.waitFor('ops@example.com');
    expect(mail.raw).toContain(`${server.name}: cpu_percent`);
    await expect.poll(async () => (await alertsOf(`rule_id=${rule.id}`))[0]!.notified_at, { timeout: 10_000 }).not.toBeNull();
    // The push is in the default notification server's action log, the delivery in the alert's.
    expect(await ctx.db.actionLog.count({ where: { model_name: 'svc.ntfy.server', rec_id: kit.ntfyId, status: 'success' } })).toBe(1);
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
    const resolved = (await alertsOf(`rule_id=${rule.id}`))[0]!;
    expect(resolved).toMatchObject({ state: 'resolved', resolved_at: expect.any(String) });
    expect(resolved.resolved_value).toBeLessThan(101);
    const resolveNote = await resolveNotices(server.id);
    expect(resolveNote).toHaveLength(1);
    expect(resolveNote[0]!.body).toMatch(
      new RegExp(`^\\[RESOLVED\\] ${server.name}: cpu_percent [0-9.]+ % \\(threshold 101 %\\), lasted \\d+ s`),
    );
    await expect.poll(() => pushes(kit.ntfy, '[RESOLVED]').filter((c) => c.body.includes(server.name)).length, { timeout: 15_000 }).toBe(1);
    await kit.smtp.waitFor('ops@example.com', 2);
    expect(pushes(kit.ntfy, `${server.name}: cpu_percent`)).toHaveLength(2); // one fire, one resolve
    expect(await alertsOf(`rule_id=${rule.id}&state=firing`)).toHaveLength(0);
  });

  it('a 30 s rule does not fire on one sample; a 1 s rule fires once it has held 1 s; the count is rebuilt from the database', async () => {
    const server = await monitoredServer();
    const rule = await ruleOn(server.id, { name: 'sustained', metric: 'ram_percent', threshold: 0, duration_seconds: 30 });
    const short = await ruleOn(server.id, { name: 'short', metric: 'disk_percent', threshold: 0, duration_seconds: 1 });
    // Two polls 1.1 s apart, told at the time they stand for (rules are judged on the polls' time).
    const t0 = Date.now();
    const sampled = (ms: number) => okPoll(server.id, t0 + ms, { ram_percent: 50, disk_percent: 50 });
    await kit.observe([sampled(0)]);
    expect(await alertsOf(`rule_id=${rule.id}`)).toHaveLength(0);
    expect(await alertsOf(`rule_id=${short.id}`)).toHaveLength(0);
    await kit.observe([sampled(1100)]);
    expect(await alertsOf(`rule_id=${rule.id}`)).toHaveLength(0);
    expect(await alertsOf(`rule_id=${short.id}`)).toMatchObject([{ state: 'firing' }]);

    // Samples 40 s and 20 s old that meet the condition too, and the working state lost (as after a
    // Redis restart): rebuilt from the monitor log, the condition has held for 30 s and more.
    for (const age of [40, 20]) await insertMonitorLog(ctx.db, server.id, new Date(Date.now() - age * 1000));
    await ctx.redis.del(serverStateKey(ctx.queues.prefix, server.id));
    await poll(server.id);
    expect(await alertsOf(`rule_id=${rule.id}`)).toMatchObject([{ state: 'firing' }]);
    // The rebuilt state knows the short rule's alert is open: no second one.
    expect(await alertsOf(`rule_id=${short.id}`)).toHaveLength(1);
    expect(await alertNotices(server.id)).toHaveLength(2);
  });

  it('a failed poll, or monitoring started again, restarts a sustained count', async () => {
    const server = await monitoredServer();
    const rule = await ruleOn(server.id, { name: 'one second', metric: 'disk_percent', threshold: 0, duration_seconds: 1 });
    // Polls 1.1 s apart, told at the time they stand for.
    const t0 = Date.now();
    const sampled = (ms: number, previous_state = 'online') => ({ ...okPoll(server.id, t0 + ms, { disk_percent: 50 }), previous_state });
    const failed = (ms: number) => ({
      ...sampled(ms),
      outcome: 'failed' as const,
      metrics: null,
      failures: 1,
      error: 'Connection refused',
    });
    await kit.observe([sampled(0)]); // starts holding
    await kit.observe([failed(1100)]); // a failed poll in between
    await kit.observe([sampled(1100)]);
    expect(await alertsOf(`rule_id=${rule.id}`)).toHaveLength(0);
    // The first poll after monitoring was started again (previous state no_monitor) starts afresh too.
    await kit.observe([sampled(2200, 'no_monitor')]);
    expect(await alertsOf(`rule_id=${rule.id}`)).toHaveLength(0);
    await kit.observe([sampled(3300)]);
    expect(await alertsOf(`rule_id=${rule.id}`)).toMatchObject([{ state: 'firing' }]);
  });

  it('a closed port goes offline after 3 failed polls and server_offline fires; a refused push keeps the alert and sets notify_error', async () => {
    const server = await monitoredServer();
    await request(app, as.operator, {
      method: 'PATCH',
      url: `/api/v1/root-servers/${server.id}`,
      payload: { port: await freePort(), ...passwordLogin() },
    });
    await ctx.db.rootServer.update({ where: { id: server.id }, data: { monitoring_enabled: true } });
    const rule = await ruleOn(server.id, { name: 'down', metric: 'server_offline', notification_server_id: refusingPushId });
    expect(await poll(server.id)).toMatchObject({ outcome: 'failed', failures: 1 });
    expect(await poll(server.id)).toMatchObject({ outcome: 'failed', failures: 2 });
    expect(await alertsOf(`rule_id=${rule.id}`)).toHaveLength(0);
    expect(await poll(server.id)).toMatchObject({ outcome: 'failed', failures: 3, server_state: 'offline' });
    const alert = (await alertsOf(`rule_id=${rule.id}`))[0]!;
    expect(alert).toMatchObject({ state: 'firing', metric: 'server_offline', threshold: null, value: 3 });
    expect((await alertNotices(server.id))[0]!.body).toMatch(
      new RegExp(`^\\[ALERT\\] ${server.name}: server_offline \\(3 failed polls in a row\\)`),
    );

    await expect
      .poll(async () => (await alertsOf(`rule_id=${rule.id}`))[0]!.notify_error, { timeout: 15_000 })
      .toMatch(new RegExp(`^push via notification server ${refusingPushId}: .*refused`));
    expect(refusing.callsTo('/').length).toBeGreaterThanOrEqual(1);
    const logs = await ctx.db.actionLog.findMany({ where: { model_name: 'svc.alert', rec_id: alert.id } });
    expect(logs[0]).toMatchObject({ status: 'failure', input_text: expect.stringContaining('attempt 1 of 4') });
  });
});

describe('rule and server lifecycle', () => {
  it('deactivation resolves on the next poll; deleting a rule resolves silently; deleting a server resolves its alerts', async () => {
    const server = await monitoredServer();
    const a = await ruleOn(server.id, { name: 'a', metric: 'disk_percent', threshold: 0 });
    const b = await ruleOn(server.id, { name: 'b', metric: 'load_1', threshold: 0 });
    const c = await ruleOn(server.id, { name: 'c', metric: 'cpu_percent', threshold: 0 });
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
    const pool = createSshPool();
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
      await expect.poll(() => pushes(kit.ntfy, `${server.name}: cpu_percent`).length, { timeout: 15_000 }).toBe(rules.length);

      // Resolving races too: one resolve each, one resolve notice each.
      for (const rule of rules) await patchRule(rule.id, { threshold: 1000 });
      await Promise.all([...observers1, ...observers2].map((o) => o([event])));
      await Promise.all([...observers1, ...observers2].map((o) => o([event])));
      expect(await resolveNotices(server.id)).toHaveLength(rules.length);
      await expect.poll(() => pushes(kit.ntfy, `${server.name}: cpu_percent`).length, { timeout: 15_000 }).toBe(2 * rules.length);
    } finally {
      pool.close();
      await ctx2.close();
    }
  });
});
