// When alerts tell and when they keep quiet, on real parts: a real OpenSSH server on loopback,
// real PostgreSQL, Redis and BullMQ workers (alert_notify, monitor_stopped), a real SMTP server and
// a local ntfy-compatible server (test/helpers/alerts.ts). Polls are driven by calling the poller
// with the features' observers; repeats are judged on the polls' time, so events with a later `at`
// stand for polls minutes apart.
import { describe, expect, it } from 'vitest';
import type { MonitorPollEvent } from '../src/feature.js';
import { serversInMaintenance } from '../src/maintenance/maintenance-state.js';
import { request } from './helpers/api.js';
import {
  alertsOf as alertsOfApp,
  createRule as createRuleOn,
  expectEachRefused,
  monitoredServer as monitoredServerOn,
  notices as noticesOf,
  okPoll,
  pushes as pushesTo,
  useAlertsApp,
} from './helpers/alerts.js';
import { freePort, passwordLogin } from './helpers/sshd.js';

const t = useAlertsApp();
const poll = (id: number) => t.poll(id);
const observe = (events: MonitorPollEvent[]) => t.observe(events);
const monitoredServer = () => monitoredServerOn(t, 'quiet');
const createRule = (payload: Record<string, unknown>) => createRuleOn(t, payload);
/** A rule watching one server. */
const ruleOn = (serverId: number, payload: Record<string, unknown>) => createRule({ root_server_ids: [serverId], ...payload });
const alertsOf = (query: string) => alertsOfApp(t, query);
const notices = (serverId: number, prefix: '[ALERT]' | '[RESOLVED]') => noticesOf(t, serverId, prefix);
const pushes = (text: string) => pushesTo(t.ntfy, text);
const createWindow = (payload: Record<string, unknown>) =>
  request(t.app, t.as.operator, { method: 'POST', url: '/api/v1/maintenance-windows', payload });
const hours = (h: number) => new Date(Date.now() + h * 3600_000).toISOString();

describe('maintenance-windows: the API', () => {
  it('operators write, users read; bad input is a 400 naming the field, and nothing is stored', async () => {
    const server = await monitoredServer();
    const created = await createWindow({
      root_server_ids: [server.id, server.id],
      starts_at: hours(-1),
      ends_at: hours(1),
      reason: 'kernel',
    });
    expect(created.statusCode, created.body).toBe(201);
    expect(created.json()).toMatchObject({ root_server_ids: [server.id], reason: 'kernel' });
    const id = created.json().id as number;
    expect((await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/maintenance-windows/${id}` })).statusCode).toBe(200);
    const denied = await request(t.app, t.as.user, {
      method: 'POST',
      url: '/api/v1/maintenance-windows',
      payload: { root_server_ids: [server.id], starts_at: hours(0), ends_at: hours(1) },
    });
    expect(denied.statusCode).toBe(403);

    const before = await t.ctx.db.maintenanceWindow.count();
    await expectEachRefused(t, '/api/v1/maintenance-windows', [
      [{ root_server_ids: [server.id], starts_at: hours(2), ends_at: hours(1) }, 'ends_at'],
      [{ root_server_ids: [server.id], starts_at: hours(1), ends_at: hours(1) }, 'ends_at'],
      [{ root_server_ids: [server.id], starts_at: hours(0), ends_at: hours(31 * 24) }, 'ends_at'],
      [{ root_server_ids: [server.id, 999_999], starts_at: hours(0), ends_at: hours(1) }, 'root_server_ids'],
      [{ root_server_ids: [], starts_at: hours(0), ends_at: hours(1) }, 'root_server_ids'],
      [{ root_server_ids: [server.id], starts_at: 'tomorrow', ends_at: hours(1) }, 'starts_at'],
    ]);
    expect(await t.ctx.db.maintenanceWindow.count()).toBe(before);
    // A change is checked on the window as it will be: an end before the stored start is refused.
    const patched = await request(t.app, t.as.operator, {
      method: 'PATCH',
      url: `/api/v1/maintenance-windows/${id}`,
      payload: { ends_at: hours(-2) },
    });
    expect(patched.statusCode).toBe(400);
    expect(patched.json().error.details.fields[0].field).toBe('ends_at');

    // What usage enforcement asks: the servers inside a window at a time.
    expect(await serversInMaintenance(t.ctx.db, new Date())).toContain(server.id);
    expect(await serversInMaintenance(t.ctx.db, new Date(Date.now() + 2 * 3600_000))).not.toContain(server.id);
    expect((await request(t.app, t.as.operator, { method: 'DELETE', url: `/api/v1/maintenance-windows/${id}` })).statusCode).toBe(204);
    expect(await serversInMaintenance(t.ctx.db, new Date())).not.toContain(server.id);
  });
});

describe('a maintenance window', () => {
  it('records the alerts of its servers silenced and sends no notice; one still firing after it is told then', async () => {
    const server = await monitoredServer();
    const rule = await ruleOn(server.id, { name: 'busy', metric: 'cpu_percent', threshold: 0, email_to: ['ops@example.com'] });
    const window = await createWindow({ root_server_ids: [server.id], starts_at: hours(-1), ends_at: hours(1), reason: 'disk swap' });
    expect(window.statusCode, window.body).toBe(201);

    expect((await poll(server.id)).outcome).toBe('ok');
    await poll(server.id);
    const [alert] = await alertsOf(`rule_id=${rule.id}`);
    expect(alert).toMatchObject({
      state: 'firing',
      silenced: true,
      silenced_reason: `maintenance window ${window.json().id} (disk swap)`,
      last_notice_at: null,
    });
    expect(await notices(server.id, '[ALERT]')).toHaveLength(0);
    expect(await t.ctx.db.actionLog.count({ where: { model_name: 'svc.alert', rec_id: alert!.id as number } })).toBe(0);

    // The window ends early (deleted): the next poll tells the alert, once, saying it was held back.
    expect(
      (await request(t.app, t.as.operator, { method: 'DELETE', url: `/api/v1/maintenance-windows/${window.json().id}` })).statusCode,
    ).toBe(204);
    await poll(server.id);
    await poll(server.id);
    const told = await notices(server.id, '[ALERT]');
    expect(told).toHaveLength(1);
    expect(told[0]!.body).toContain(`held back until now (maintenance window ${window.json().id} (disk swap))`);
    await expect.poll(() => pushes(`${server.name}: cpu_percent`).length, { timeout: 15_000 }).toBe(1);
    await t.smtp.waitFor('ops@example.com');
    expect((await alertsOf(`rule_id=${rule.id}`))[0]).toMatchObject({
      state: 'firing',
      silenced: true,
      last_notice_at: expect.any(String),
    });
  });
});

describe('root cause', () => {
  it('an offline server sends one notice, not one per rule; only that alert tells its resolve', async () => {
    const server = await monitoredServer();
    await request(t.app, t.as.operator, {
      method: 'PATCH',
      url: `/api/v1/root-servers/${server.id}`,
      payload: { port: await freePort(), ...passwordLogin() },
    });
    await t.ctx.db.rootServer.update({ where: { id: server.id }, data: { monitoring_enabled: true } });
    const rules = [
      await ruleOn(server.id, { name: 'down (ops)', metric: 'server_offline', email_to: ['ops@example.com'] }),
      await ruleOn(server.id, { name: 'down (on call)', metric: 'server_offline', topic: 'oncall' }),
      await ruleOn(server.id, { name: 'down (team)', metric: 'server_offline', topic: 'team' }),
    ];
    for (let i = 0; i < 3; i++) expect((await poll(server.id)).outcome).toBe('failed');
    const firing = await alertsOf(`root_server_id=${server.id}&state=firing`);
    expect(firing).toHaveLength(3);
    expect(firing.filter((a) => a.silenced)).toHaveLength(2);
    for (const a of firing.filter((x) => x.silenced))
      expect(a).toMatchObject({ silenced_reason: 'server_offline is firing', last_notice_at: null });
    expect(await notices(server.id, '[ALERT]')).toHaveLength(1);
    // Further failed polls of the outage: still one.
    await poll(server.id);
    expect(await notices(server.id, '[ALERT]')).toHaveLength(1);
    const told = firing.find((a) => !a.silenced)!;
    await expect.poll(async () => (await alertsOf(`rule_id=${told.rule_id}`))[0]!.notified_at, { timeout: 15_000 }).not.toBeNull();
    expect(pushes(`${server.name}: server_offline`)).toHaveLength(1);

    // Back online: every alert resolves; only the told one says so.
    await request(t.app, t.as.operator, {
      method: 'PATCH',
      url: `/api/v1/root-servers/${server.id}`,
      payload: { port: t.sshd.port, ...passwordLogin() },
    });
    await t.ctx.db.rootServer.update({
      where: { id: server.id },
      data: { monitoring_enabled: true, monitor_failures: 0, last_monitor_at: null },
    });
    expect((await poll(server.id)).outcome).toBe('ok');
    for (const rule of rules) expect(await alertsOf(`rule_id=${rule.id}`)).toMatchObject([{ state: 'resolved' }]);
    expect(await notices(server.id, '[RESOLVED]')).toHaveLength(1);
  });
});

describe('repeat_minutes', () => {
  it('a firing alert is told again at the set interval; 0 never repeats', async () => {
    const server = await monitoredServer();
    const every10 = await ruleOn(server.id, { name: 'every 10', metric: 'load_1', threshold: 0, repeat_minutes: 10 });
    const never = await ruleOn(server.id, { name: 'once', metric: 'disk_percent', threshold: 0 });
    expect(every10).toMatchObject({ repeat_minutes: 10 });
    expect(never).toMatchObject({ repeat_minutes: 0 });
    const bad = await request(t.app, t.as.operator, {
      method: 'PATCH',
      url: `/api/v1/alert-rules/${never.id}`,
      payload: { repeat_minutes: -1 },
    });
    expect(bad.statusCode).toBe(400);

    const t0 = Date.now();
    const at = (minutes: number) =>
      okPoll(server.id, t0 + minutes * 60_000, { cpu_percent: 5, ram_percent: 5, disk_percent: 50, load_1: 0.5 });
    for (const minutes of [0, 5, 9.9, 10, 15, 19, 20.5, 25, 60 * 3]) await observe([at(minutes)]);
    // load_1: fired at 0, told again at 10, 20.5 and 180 (each at least 10 minutes after the last);
    // disk_percent: once.
    const loads = (await notices(server.id, '[ALERT]')).filter((m) => m.body.includes('load_1'));
    expect(loads.map((m) => /reminder (\d+)/.exec(m.body)?.[1] ?? 'fired')).toEqual(['fired', '1', '2', '3']);
    expect(loads[1]!.body).toContain('still firing after');
    expect((await notices(server.id, '[ALERT]')).filter((m) => m.body.includes('disk_percent'))).toHaveLength(1);
    expect((await alertsOf(`rule_id=${every10.id}`))[0]).toMatchObject({
      repeats: 3,
      last_notice_at: new Date(t0 + 180 * 60_000).toISOString(),
    });
    await expect.poll(() => pushes(`${server.name}: load_1`).length, { timeout: 15_000 }).toBe(4);

    // A repeat falls silent inside a maintenance window.
    const window = await createWindow({
      root_server_ids: [server.id],
      starts_at: new Date(t0).toISOString(),
      ends_at: new Date(t0 + 240 * 60_000).toISOString(),
    });
    expect(window.statusCode, window.body).toBe(201);
    await observe([at(200)]);
    expect((await notices(server.id, '[ALERT]')).filter((m) => m.body.includes('load_1'))).toHaveLength(4);
  });
});

describe('stop_monitor', () => {
  it("resolves the server's firing alerts with a notice saying why; started again, they count afresh", async () => {
    const server = await monitoredServer();
    const rule = await ruleOn(server.id, { name: 'busy', metric: 'cpu_percent', threshold: 0 });
    const quiet = await ruleOn(server.id, { name: 'quiet', metric: 'ram_percent', threshold: 0, notify_resolved: false });
    await poll(server.id);
    expect(await alertsOf(`root_server_id=${server.id}&state=firing`)).toHaveLength(2);

    const stopped = await request(t.app, t.as.operator, { method: 'POST', url: `/api/v1/root-servers/${server.id}/actions/stop_monitor` });
    expect(stopped.statusCode).toBe(200);
    await expect.poll(async () => (await alertsOf(`root_server_id=${server.id}&state=firing`)).length, { timeout: 20_000 }).toBe(0);
    const [busy] = await alertsOf(`rule_id=${rule.id}`);
    expect(busy).toMatchObject({
      state: 'resolved',
      resolved_value: null,
      resolved_reason: expect.stringMatching(/^monitoring stopped by operator-/),
    });
    const resolved = await notices(server.id, '[RESOLVED]');
    expect(resolved).toHaveLength(1); // the quiet rule asks for no resolve notice
    expect(resolved[0]!.body).toMatch(new RegExp(`^\\[RESOLVED\\] ${server.name}: cpu_percent, monitoring stopped by operator-`));
    await expect.poll(() => pushes(`[RESOLVED] ${server.name}`).length, { timeout: 15_000 }).toBe(1);
    expect((await alertsOf(`rule_id=${quiet.id}`))[0]).toMatchObject({ state: 'resolved' });

    // Started again: the rules fire anew (the working state went with the stop).
    await t.ctx.db.rootServer.update({ where: { id: server.id }, data: { monitoring_enabled: true } });
    await poll(server.id);
    expect(await alertsOf(`root_server_id=${server.id}&state=firing`)).toHaveLength(2);
    expect(await notices(server.id, '[ALERT]')).toHaveLength(4);
  });
});
