// Daily backups on real parts: subscriptions deployed from a real template on the real PostgreSQL,
// the backup stand-in (real pg_dump) as their backup server, the real BullMQ workers running the
// backup jobs the schedule queues, a recording ntfy server as the default notification server.
// The schedule's own BullMQ scheduler is removed once seen installed, so each run here is one the
// test makes (runBackupSchedule), at the time it chooses.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTrialSubscription } from '../src/subscriptions/index.js';
import { subscriptionJobs } from '../src/subscriptions/subscription-job-specs.js';
import { openWindow, runBackupSchedule } from '../src/subscriptions/subscription-backup-schedule.js';
import { request, waitForJob } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';
import { startBackupApi, type BackupApi } from './helpers/backup-api.js';
import { sendJson, startRecordingServer, type RecordingServer } from './helpers/http-recorder.js';
import { act, messages, useLifecycle } from './helpers/lifecycle.js';
import { createTrialPackage } from './helpers/trial.js';

const t = useTestApp({ workers: true, env: { BACKUP_POLL_MS: '20' } });
const fx = useLifecycle(t);
let remote: BackupApi;
let backupServerId: number;
let ntfy: RecordingServer;

const HOUR = 3600_000;
const service = { userId: null, jobId: null };
const schedule = (now?: Date) => runBackupSchedule(t.ctx, service, now);
const settings = (payload: Record<string, unknown>, caller = t.as.admin) =>
  request(t.app, caller, { method: 'PATCH', url: '/api/v1/settings', payload });
/** The window open since the start of the current hour (UTC), for `hours`. */
const windowNow = (hours = 2) =>
  settings({ backup_schedule_enabled: true, backup_window_start_hour: new Date().getUTCHours(), backup_window_hours: hours });
const row = (id: number) => t.ctx.db.subscription.findUniqueOrThrow({ where: { id } });
const lifecycleSchedulers = async () => (await t.ctx.queues.queue('lifecycle').getJobSchedulers()).map((s) => s.key);

/** Running subscriptions of this test only: the others of the file are cancelled (the schedule passes them by). */
async function only(...subs: { id: number }[]) {
  const others = await t.ctx.db.subscription.findMany({ where: { state: 'running', id: { notIn: subs.map((s) => s.id) } } });
  for (const o of others) expect((await act(t, o.id, 'cancel')).statusCode).toBe(200);
}

async function finished(jobIds: string[]) {
  for (const id of jobIds) {
    const job = await waitForJob(t.app, t.as.user, id, 30_000);
    expect(job.state, job.error).toBe('completed');
  }
}

beforeAll(async () => {
  remote = await startBackupApi();
  const res = await request(t.app, t.as.operator, {
    method: 'POST',
    url: '/api/v1/backup-servers',
    payload: { url: remote.url, download_url: 'https://backups.example.com/dl', api_key: remote.apiKey },
  });
  expect(res.statusCode, res.body).toBe(201);
  backupServerId = res.json().id;
  ntfy = await startRecordingServer((_req, res) => sendJson(res, 200, { id: `m${ntfy.calls.length}`, event: 'message' }));
  const push = await request(t.app, t.as.operator, {
    method: 'POST',
    url: '/api/v1/notification-servers',
    payload: { name: 'ntfy', provider: 'selfhosted_push', url: ntfy.url, is_default: true },
  });
  expect(push.statusCode, push.body).toBe(201);
  // The workers installed the schedule; the runs of this file are the tests' own.
  expect(await lifecycleSchedulers()).toContain('backup-schedule');
  await t.ctx.queues.unschedule(subscriptionJobs.backup_schedule, 'backup-schedule');
});
afterAll(async () => {
  await remote?.close();
  await ntfy?.close();
});

describe('the window', () => {
  const at = (iso: string) => new Date(iso);
  it('opens at start_hour (UTC) for window_hours; a window over midnight belongs to the day it opened; 24 h is always open', () => {
    const w = (start: number, hours: number) => ({ backup_window_start_hour: start, backup_window_hours: hours });
    expect(openWindow(at('2026-12-01T03:00:00Z'), w(1, 6))).toEqual(at('2026-12-01T01:00:00Z'));
    expect(openWindow(at('2026-12-01T00:59:59Z'), w(1, 6))).toBeNull();
    expect(openWindow(at('2026-12-01T07:00:00Z'), w(1, 6))).toBeNull();
    expect(openWindow(at('2026-12-02T02:30:00Z'), w(22, 6))).toEqual(at('2026-12-01T22:00:00Z'));
    expect(openWindow(at('2026-12-01T21:59:00Z'), w(22, 6))).toBeNull();
    expect(openWindow(at('2026-12-01T00:30:00Z'), w(1, 24))).toEqual(at('2026-11-30T01:00:00Z'));
  });
});

describe('settings', () => {
  it('defaults, ranges (400 naming the field, nothing changed), administrators only, tracked', async () => {
    const before = (await request(t.app, t.as.user, { method: 'GET', url: '/api/v1/settings' })).json();
    // The test database turns the schedule off (test/helpers/context.ts); the rest are the defaults.
    expect(before).toMatchObject({ backup_window_start_hour: 1, backup_window_hours: 6, backup_concurrency: 2 });
    expect(before).not.toHaveProperty('backups_watched_since');
    for (const [field, value] of [
      ['backup_window_start_hour', 24],
      ['backup_window_start_hour', -1],
      ['backup_window_hours', 0],
      ['backup_window_hours', 25],
      ['backup_concurrency', 0],
      ['backup_concurrency', 51],
      ['backup_concurrency', 1.5],
      ['backup_schedule_enabled', 'yes'],
    ] as const) {
      const res = await settings({ backup_window_hours: 3, [field]: value });
      expect(res.statusCode, `${field}: ${value}`).toBe(400);
      expect(JSON.stringify(res.json().error.details.fields)).toContain(field);
    }
    expect((await settings({ backup_concurrency: 3 }, t.as.operator)).statusCode).toBe(403);
    expect((await request(t.app, t.as.user, { method: 'GET', url: '/api/v1/settings' })).json()).toEqual(before);

    const res = await settings({ backup_schedule_enabled: true, backup_concurrency: 5 });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ backup_schedule_enabled: true, backup_concurrency: 5 });
    const tracked = await t.ctx.db.trackingValue.findMany({ where: { message: { model_name: 'svc.settings' } } });
    expect(tracked.map((v) => v.field)).toEqual(expect.arrayContaining(['backup_schedule_enabled', 'backup_concurrency']));
    expect((await settings({ backup_schedule_enabled: false, backup_concurrency: 2 })).statusCode).toBe(200);
  });
});

describe('retention per package', () => {
  const pkgPayload = (extra: Record<string, unknown>) => ({ name: 'Retention', url_string: `keep-${Date.now().toString(36)}`, ...extra });

  it('trial packages: 7/4/3 by default, 0..366 each, not all 0 (400 naming the fields, nothing changed)', async () => {
    const created = await request(t.app, t.as.operator, { method: 'POST', url: '/api/v1/trial-packages', payload: pkgPayload({}) });
    expect(created.statusCode, created.body).toBe(201);
    const pkg = created.json();
    expect(pkg).toMatchObject({ backup_keep_daily: 7, backup_keep_weekly: 4, backup_keep_monthly: 3 });
    const url = `/api/v1/trial-packages/${pkg.id}`;
    for (const payload of [
      { backup_keep_daily: 367 },
      { backup_keep_weekly: -1 },
      { backup_keep_monthly: 2.5 },
      { backup_keep_daily: null },
      { backup_keep_daily: 0, backup_keep_weekly: 0, backup_keep_monthly: 0 },
    ]) {
      const res = await request(t.app, t.as.operator, { method: 'PATCH', url, payload });
      expect(res.statusCode, JSON.stringify(payload)).toBe(400);
      expect(JSON.stringify(res.json().error.details.fields)).toMatch(/backup_keep_/);
    }
    // All three 0 on a create, and on a PATCH judged with the stored values.
    const none = await request(t.app, t.as.operator, {
      method: 'POST',
      url: '/api/v1/trial-packages',
      payload: pkgPayload({ url_string: 'keep-none', backup_keep_daily: 0, backup_keep_weekly: 0, backup_keep_monthly: 0 }),
    });
    expect(none.statusCode).toBe(400);
    expect(none.json().error.message).toMatch(/cannot all be 0/);
    expect(
      (await request(t.app, t.as.operator, { method: 'PATCH', url, payload: { backup_keep_weekly: 0, backup_keep_monthly: 0 } }))
        .statusCode,
    ).toBe(200);
    const zero = await request(t.app, t.as.operator, { method: 'PATCH', url, payload: { backup_keep_daily: 0 } });
    expect(zero.statusCode).toBe(400);
    expect(zero.json().error.details.fields).toContainEqual({ field: 'body.backup_keep_daily', message: expect.any(String) });
    expect((await request(t.app, t.as.user, { method: 'GET', url })).json()).toMatchObject({
      backup_keep_daily: 7,
      backup_keep_weekly: 0,
      backup_keep_monthly: 0,
    });
    expect((await request(t.app, t.as.user, { method: 'PATCH', url, payload: { backup_keep_daily: 30 } })).statusCode).toBe(403);
    expect((await request(t.app, t.as.operator, { method: 'PATCH', url, payload: { backup_keep_daily: 366 } })).json()).toMatchObject({
      backup_keep_daily: 366,
    });
  });

  it('a subscription made from a package gets its values; its own are edited by the same rules', async () => {
    const pkg = await createTrialPackage(t.ctx, { backup_keep_daily: 14, backup_keep_weekly: 0, backup_keep_monthly: 12 });
    const partner = await fx.partner();
    const made = await t.ctx.db.$transaction((tx) =>
      createTrialSubscription(tx, { partnerId: partner.id, companyName: 'Keepers', pkg, databaseTemplateId: fx.templateId, author: null }),
    );
    const url = `/api/v1/subscriptions/${made.id}`;
    expect((await request(t.app, t.as.user, { method: 'GET', url })).json()).toMatchObject({
      backup_keep_daily: 14,
      backup_keep_weekly: 0,
      backup_keep_monthly: 12,
    });
    const bad = await request(t.app, t.as.operator, { method: 'PATCH', url, payload: { backup_keep_daily: 0, backup_keep_monthly: 0 } });
    expect(bad.statusCode).toBe(400);
    expect((await request(t.app, t.as.operator, { method: 'PATCH', url, payload: { backup_keep_monthly: 400 } })).statusCode).toBe(400);
    expect(await row(made.id)).toMatchObject({ backup_keep_daily: 14, backup_keep_weekly: 0, backup_keep_monthly: 12 });
    const ok = await request(t.app, t.as.operator, { method: 'PATCH', url, payload: { backup_keep_weekly: 8 } });
    expect(ok.json()).toMatchObject({ backup_keep_daily: 14, backup_keep_weekly: 8, backup_keep_monthly: 12 });

    // Created directly: the defaults, and all three 0 refused.
    const direct = await request(t.app, t.as.operator, {
      method: 'POST',
      url: '/api/v1/subscriptions',
      payload: { name: 'No keep', partner_id: partner.id, backup_keep_daily: 0, backup_keep_weekly: 0, backup_keep_monthly: 0 },
    });
    expect(direct.statusCode).toBe(400);
    const plain = await request(t.app, t.as.operator, {
      method: 'POST',
      url: '/api/v1/subscriptions',
      payload: { name: 'Keep', partner_id: partner.id },
    });
    expect(plain.json()).toMatchObject({ backup_keep_daily: 7, backup_keep_weekly: 4, backup_keep_monthly: 3 });
  });
});

// Each deploys a few databases and runs real backups: a loaded machine takes its time.
describe('the daily schedule', { timeout: 120_000 }, () => {
  it('queues the backup job of due subscriptions, oldest backup first, up to backup_concurrency; a done backup sets last_backup_at', async () => {
    const [a, b, c] = [await fx.deployed(), await fx.deployed(), await fx.deployed()];
    await only(a, b, c);
    // b was backed up yesterday, a long ago, c never: c, then a, then b.
    await t.ctx.db.subscription.update({ where: { id: a.id }, data: { last_backup_at: new Date(Date.now() - 72 * HOUR) } });
    await t.ctx.db.subscription.update({ where: { id: b.id }, data: { last_backup_at: new Date(Date.now() - 25 * HOUR) } });
    expect((await windowNow()).statusCode).toBe(200);
    expect((await settings({ backup_concurrency: 2 })).statusCode).toBe(200);
    remote.behaviour.hold = true;
    try {
      const first = await schedule();
      expect(first.window_opened_at).not.toBeNull();
      expect(first.queued.map((q) => q.subscription_id)).toEqual([c.id, a.id]);
      // A backup asked for by hand meanwhile waits for the scheduled one (never two at once).
      await expect.poll(async () => (await row(c.id)).operation, { timeout: 20_000 }).toBe('backup');
      const manual = await act(t, c.id, 'backup');
      expect(manual.statusCode).toBe(409);
      expect(manual.json().error.message).toContain(`with backup running (job ${first.queued[0]!.job_id})`);

      // Two running: nothing more.
      const second = await schedule();
      expect(second).toMatchObject({ in_flight: 2, queued: [] });
      remote.behaviour.hold = false;
      remote.release();
      await finished(first.queued.map((q) => q.job_id));
    } finally {
      remote.behaviour.hold = false;
      remote.release();
    }
    for (const s of [a, c]) {
      const done = await row(s.id);
      expect(done.last_backup_at!.getTime()).toBeGreaterThan(Date.now() - HOUR);
      expect(done.backup_state).toBe('ok');
    }
    const third = await schedule();
    expect(third.queued.map((q) => q.subscription_id)).toEqual([b.id]);
    await finished(third.queued.map((q) => q.job_id));
    // All backed up in this window: nothing is due until the next one.
    expect((await schedule()).queued).toEqual([]);
    expect(remote.backups.filter((x) => [a, b, c].some((s) => s.database_name === x.db_name)).map((x) => x.state)).toEqual([
      'done',
      'done',
      'done',
    ]);
  });

  it('outside the window, or with the schedule off, nothing is queued', async () => {
    const sub = await fx.deployed();
    await only(sub);
    const later = (new Date().getUTCHours() + 2) % 24;
    expect((await settings({ backup_schedule_enabled: true, backup_window_start_hour: later, backup_window_hours: 1 })).statusCode).toBe(
      200,
    );
    expect(await schedule()).toMatchObject({ window_opened_at: null, queued: [] });
    expect((await windowNow()).statusCode).toBe(200);
    expect((await settings({ backup_schedule_enabled: false })).statusCode).toBe(200);
    expect(await schedule()).toMatchObject({ window_opened_at: null, queued: [] });
    expect((await row(sub.id)).backup_attempted_at).toBeNull();
    // In the window: queued.
    expect((await windowNow()).statusCode).toBe(200);
    const run = await schedule();
    expect(run.queued.map((q) => q.subscription_id)).toEqual([sub.id]);
    await finished(run.queued.map((q) => q.job_id));
  });

  it('one backup at a time per Odoo host; a subscription busy with another operation is left for a later run', async () => {
    const hosts = await Promise.all(['host-a', 'host-b'].map((name) => t.ctx.db.rootServer.create({ data: { name, ip: '192.0.2.10' } })));
    const [a1, a2, b1, busy] = [await fx.deployed(), await fx.deployed(), await fx.deployed(), await fx.deployed()];
    await only(a1, a2, b1, busy);
    for (const [s, host] of [
      [a1, hosts[0]!],
      [a2, hosts[0]!],
      [b1, hosts[1]!],
    ] as const) {
      await t.ctx.db.subscription.update({ where: { id: s.id }, data: { root_server_id: host.id } });
    }
    await t.ctx.db.subscription.update({ where: { id: busy.id }, data: { operation: 'move', operation_job_id: 'moves-elsewhere' } });
    expect((await windowNow()).statusCode).toBe(200);
    expect((await settings({ backup_concurrency: 10 })).statusCode).toBe(200);
    remote.behaviour.hold = true;
    let jobs: string[] = [];
    try {
      const run = await schedule();
      expect(run.queued.map((q) => q.subscription_id).sort()).toEqual([a1.id, b1.id].sort());
      expect(run.waiting).toEqual([
        { subscription_id: a2.id, reason: `a backup is running on its Odoo host (root server ${hosts[0]!.id})` },
      ]);
      jobs = run.queued.map((q) => q.job_id);
      // While a1's backup runs, a2 still waits.
      expect((await schedule()).queued).toEqual([]);
      remote.behaviour.hold = false;
      remote.release();
      await finished(jobs);
    } finally {
      remote.behaviour.hold = false;
      remote.release();
    }
    const next = await schedule();
    expect(next.queued.map((q) => q.subscription_id)).toEqual([a2.id]);
    await finished(next.queued.map((q) => q.job_id));
    expect((await row(busy.id)).backup_attempted_at).toBeNull();
    await t.ctx.db.subscription.update({ where: { id: busy.id }, data: { operation: null, operation_job_id: null } });
    const freed = await schedule();
    expect(freed.queued.map((q) => q.subscription_id)).toEqual([busy.id]);
    await finished(freed.queued.map((q) => q.job_id));
    expect((await settings({ backup_concurrency: 2 })).statusCode).toBe(200);
  });

  it('a scheduled backup that failed is queued again an hour later, not at every run', async () => {
    const sub = await fx.deployed();
    await only(sub);
    expect((await windowNow(3)).statusCode).toBe(200);
    remote.behaviour.failWith = 'disk full on the backup server';
    try {
      const run = await schedule();
      expect(run.queued.map((q) => q.subscription_id)).toEqual([sub.id]);
      const job = await waitForJob(t.app, t.as.user, run.queued[0]!.job_id, 30_000);
      expect(job.state).toBe('failed');
    } finally {
      remote.behaviour.failWith = null;
    }
    expect(await schedule()).toMatchObject({ queued: [] });
    expect((await row(sub.id)).last_backup_at).toBeNull();
    const retry = await schedule(new Date(Date.now() + HOUR + 60_000));
    expect(retry.queued.map((q) => q.subscription_id)).toEqual([sub.id]);
    await finished(retry.queued.map((q) => q.job_id));
    expect((await row(sub.id)).last_backup_at).not.toBeNull();
  });
});

describe('the 26 h alert', { timeout: 120_000 }, () => {
  const alertsOf = async (id: number, prefix: string) => (await messages(t, id)).filter((m) => m.body.startsWith(prefix));
  const pushesOf = (db: string, prefix: string) => ntfy.calls.filter((c) => c.body.includes(db) && c.body.includes(prefix));
  const age = (id: number, hours: number, lastBackupHours: number | null) =>
    t.ctx.db.subscription.update({
      where: { id },
      data: {
        database_created_at: new Date(Date.now() - hours * HOUR),
        last_backup_at: lastBackupHours === null ? null : new Date(Date.now() - lastBackupHours * HOUR),
      },
    });

  beforeAll(async () => {
    // The count starts no earlier than the release that brought the alert: long ago here.
    await t.ctx.db.settings.update({ where: { id: 1 }, data: { backups_watched_since: new Date(Date.now() - 30 * 24 * HOUR) } });
    expect((await settings({ backup_schedule_enabled: false })).statusCode).toBe(200);
  });

  it('fires once for a running subscription without a completed backup for 26 h, told in its chatter and by push; the next backup resolves it', async () => {
    const sub = await fx.deployed();
    const young = await fx.deployed();
    await only(sub, young);
    await age(sub.id, 100, 27);
    await age(young.id, 25, null);
    const first = await schedule();
    expect(first.alerts.fired).toEqual([sub.id]);
    expect((await schedule()).alerts.fired).toEqual([]);
    const alerts = await alertsOf(sub.id, '[ALERT]');
    expect(alerts).toHaveLength(1);
    expect(alerts[0]).toMatchObject({ subtype_xmlid: 'mail.mt_alert' });
    expect(alerts[0]!.body).toMatch(/no completed backup for 26 h\nIts last completed backup was at .* \(1 d 3 h ago\)/);
    await expect.poll(() => pushesOf(sub.database_name, '[ALERT]').length).toBe(1);
    expect((await row(sub.id)).backup_overdue_since).not.toBeNull();
    expect(await alertsOf(young.id, '[ALERT]')).toEqual([]);

    // A backup that fails resolves nothing.
    remote.behaviour.failWith = 'cloud account refused';
    try {
      const failed = await waitForJob(t.app, t.as.user, (await act(t, sub.id, 'backup')).json().job_id, 30_000);
      expect(failed.state).toBe('failed');
    } finally {
      remote.behaviour.failWith = null;
    }
    expect((await row(sub.id)).backup_overdue_since).not.toBeNull();
    const done = await waitForJob(t.app, t.as.user, (await act(t, sub.id, 'backup')).json().job_id, 30_000);
    expect(done.state, done.error).toBe('completed');
    expect((await row(sub.id)).backup_overdue_since).toBeNull();
    const resolved = await alertsOf(sub.id, '[RESOLVED]');
    expect(resolved).toHaveLength(1);
    expect(resolved[0]!.body).toMatch(/backed up again\nA backup of .* completed at .*; the alert had fired for/);
    await expect.poll(() => pushesOf(sub.database_name, '[RESOLVED]').length).toBe(1);
    expect((await schedule()).alerts).toMatchObject({ fired: [], resolved: [] });
    expect(await alertsOf(sub.id, '[ALERT]')).toHaveLength(1);
  });

  it('a done backup that compute_backup_state reads resolves it; one older than 26 h does not', async () => {
    const sub = await fx.deployed({ backup_server_id: backupServerId });
    await only(sub);
    const first = await waitForJob(t.app, t.as.user, (await act(t, sub.id, 'backup')).json().job_id, 30_000);
    expect(first.state, first.error).toBe('completed');
    // As if that backup were two days old, and the alert fired.
    const listed = remote.backups.find((b) => b.db_name === sub.database_name)!;
    listed.created_at = new Date(Date.now() - 48 * HOUR).toISOString();
    await age(sub.id, 100, 30);
    const known = (await row(sub.id)).last_backup_at!.toISOString();
    expect((await schedule()).alerts.fired).toEqual([sub.id]);
    const computed = await act(t, sub.id, 'compute_backup_state');
    expect(computed.statusCode, computed.body).toBe(200);
    // Older than what svc knows: last_backup_at does not go back, the alert stays.
    expect(computed.json()).toMatchObject({ backup_state: 'ok', last_backup_at: known });
    expect((await row(sub.id)).backup_overdue_since).not.toBeNull();
    // Made an hour ago, as the server now says: newer, so it counts.
    listed.created_at = new Date(Date.now() - HOUR).toISOString();
    const again = await act(t, sub.id, 'compute_backup_state');
    expect(again.json()).toMatchObject({ backup_state: 'ok', last_backup_at: listed.created_at });
    expect((await row(sub.id)).backup_overdue_since).toBeNull();
    expect(await alertsOf(sub.id, '[RESOLVED]')).toHaveLength(1);
  });

  it('resolves when the subscription stops running; none for a suspended one', async () => {
    const sub = await fx.deployed();
    await only(sub);
    await age(sub.id, 100, null);
    expect((await schedule()).alerts.fired).toEqual([sub.id]);
    expect((await act(t, sub.id, 'suspend')).statusCode).toBe(200);
    expect((await schedule()).alerts).toMatchObject({ fired: [], resolved: [sub.id] });
    expect((await alertsOf(sub.id, '[RESOLVED]'))[0]!.body).toMatch(/no longer running\nThe subscription is suspended/);
    expect((await schedule()).alerts).toMatchObject({ fired: [], resolved: [] });
  });

  it('with several backup servers and none chosen: the subscription waits, and its alert says why', async () => {
    const sub = await fx.deployed();
    await only(sub);
    await age(sub.id, 100, null);
    const second = await request(t.app, t.as.operator, {
      method: 'POST',
      url: '/api/v1/backup-servers',
      payload: { url: remote.url, download_url: 'https://backups.example.com/dl', api_key: remote.apiKey },
    });
    expect(second.statusCode, second.body).toBe(201);
    try {
      expect((await windowNow()).statusCode).toBe(200);
      const run = await schedule();
      expect(run.queued).toEqual([]);
      expect(run.waiting).toEqual([
        { subscription_id: sub.id, reason: expect.stringMatching(/there are several: set its backup_server_id/) },
      ]);
      expect(run.alerts.fired).toEqual([sub.id]);
      const [alert] = await alertsOf(sub.id, '[ALERT]');
      expect(alert!.body).toMatch(/It is not backed up: .*set its backup_server_id\./);
    } finally {
      expect(
        (await request(t.app, t.as.operator, { method: 'DELETE', url: `/api/v1/backup-servers/${second.json().id}` })).statusCode,
      ).toBe(204);
      expect((await settings({ backup_schedule_enabled: false })).statusCode).toBe(200);
    }
  });

  it('without any backup server: one alert for the installation, on the settings, resolved when one is added', async () => {
    const sub = await fx.deployed();
    await only(sub);
    await age(sub.id, 100, null);
    // Kept aside as they are (the raw rows) and put back after.
    await t.ctx.db.$executeRawUnsafe('CREATE TABLE backup_servers_aside AS SELECT * FROM backup_servers');
    await t.ctx.db.backupServer.deleteMany({});
    const settingsAlerts = (prefix: string) =>
      t.ctx.db.message.findMany({ where: { model_name: 'svc.settings', rec_id: 1, body: { startsWith: prefix } } });
    const alertSince = async () =>
      (await request(t.app, t.as.user, { method: 'GET', url: '/api/v1/settings' })).json().no_backup_server_alert_at;
    try {
      const run = await schedule();
      expect(run.alerts).toMatchObject({ fired: [], no_backup_server: 'fired' });
      expect((await schedule()).alerts.no_backup_server).toBeNull();
      expect(await settingsAlerts('[ALERT] No backup server: 1 running subscription is backed up by nothing')).toHaveLength(1);
      expect(await alertSince()).toEqual(expect.any(String));
      await expect.poll(() => ntfy.calls.filter((c) => c.body.includes('No backup server')).length).toBe(1);
      expect(await alertsOf(sub.id, '[ALERT]')).toEqual([]);
    } finally {
      await t.ctx.db.$executeRawUnsafe('INSERT INTO backup_servers SELECT * FROM backup_servers_aside');
      await t.ctx.db.$executeRawUnsafe('DROP TABLE backup_servers_aside');
    }
    const back = await schedule();
    expect(back.alerts).toMatchObject({ fired: [sub.id], no_backup_server: 'resolved' });
    expect(await settingsAlerts('[RESOLVED] No backup server')).toHaveLength(1);
    expect(await alertSince()).toBeNull();
  });
});
