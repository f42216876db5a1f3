// The subscription actions of the customer lifecycle on real parts: databases deployed
// from a real template on the real PostgreSQL (suspension really refuses connections, drops really
// remove the database), svc's own backup server (restic on a local repository) for the backups,
// restores and drops that work, a stand-in for the answers it never gives on demand (a backup held
// running or listed late, an answer without the backup's id, a refusal, a failure), the real BullMQ
// workers.
import pg from 'pg';
import { describe, expect, it, vi } from 'vitest';
import { composeFeatures } from '../src/features.js';
import { recordInterruption } from '../src/jobs/job-interruption.js';
import { subscriptionJobHandlers } from '../src/subscriptions/subscription-jobs.js';
import { request, waitForJob } from './helpers/api.js';
import { useTestApp, withConfig } from './helpers/app.js';
import { freePort } from './helpers/sshd.js';
import { act, canConnect, connect, databaseRow, get, messages, stateHistory, useBackupStandIn, useLifecycle } from './helpers/lifecycle.js';
import { tenantUrl } from './helpers/odoo-template.js';
import { adminQuery } from './helpers/pg.js';

const t = useTestApp({
  workers: true,
  // BACKUP_WAIT_MS keeps its default: a backup may take its time on a loaded machine, and only the
  // test of that deadline shortens it.
  env: { SUBSCRIPTION_URL: 'https://{database_name}.odoo.example.com', BACKUP_POLL_MS: '20' },
});
const fx = useLifecycle(t, { backups: 'real' });
const standIn = useBackupStandIn(t);

const DAY = 86_400_000;
const iso = (ms: number) => new Date(ms).toISOString();
const job = async (res: { statusCode: number; body: string; json(): { job_id: string } }) => {
  expect(res.statusCode, res.body).toBe(202);
  return waitForJob(t.app, t.as.user, res.json().job_id, 120_000);
};
const literal = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const actionLog = (id: number) =>
  t.ctx.db.actionLog.findMany({ where: { model_name: 'svc.subscription', rec_id: id }, orderBy: { id: 'asc' } });

describe('the resource', () => {
  it('answers url from SUBSCRIPTION_URL and the new fields; null url without a database', async () => {
    const sub = await fx.deployed({ is_trial: true });
    expect(sub).toMatchObject({
      state: 'running',
      url: `https://${sub.database_name}.odoo.example.com`,
      suspended_at: null,
      suspend_reason: null,
      trial_reminder_sent_at: null,
      database_dropped_at: null,
      operation: null,
    });
    const partner = await fx.partner();
    const draft = await request(t.app, t.as.operator, {
      method: 'POST',
      url: '/api/v1/subscriptions',
      payload: { name: 'No db', partner_id: partner.id },
    });
    expect(draft.json().url).toBeNull();
    const list = await request(t.app, t.as.user, { method: 'GET', url: '/api/v1/subscriptions?state=running' });
    expect(list.json().items.find((s: { id: number }) => s.id === sub.id).url).toBe(sub.url);
  });

  it('PATCH moves trial_end_date and grace_end_date (operators); a new trial end clears trial_reminder_sent_at; grace before trial end is 400', async () => {
    const sub = await fx.deployed({
      is_trial: true,
      trial_end_date: iso(Date.now() + 10 * DAY),
      grace_end_date: iso(Date.now() + 15 * DAY),
    });
    await t.ctx.db.subscription.update({ where: { id: sub.id }, data: { trial_reminder_sent_at: new Date() } });
    const patch = (payload: object, caller = t.as.operator) =>
      request(t.app, caller, { method: 'PATCH', url: `/api/v1/subscriptions/${sub.id}`, payload });

    expect((await patch({ trial_end_date: iso(Date.now()) }, t.as.user)).statusCode).toBe(403);
    // Only the grace end: the reminder stays.
    let res = await patch({ grace_end_date: iso(Date.now() + 20 * DAY) });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().trial_reminder_sent_at).not.toBeNull();
    const newEnd = iso(Date.now() + 3 * DAY);
    res = await patch({ trial_end_date: newEnd });
    expect(res.json()).toMatchObject({ trial_end_date: newEnd, trial_reminder_sent_at: null });

    const grace = (await get(t, sub.id)).grace_end_date;
    res = await patch({ grace_end_date: iso(Date.now() + DAY) });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe('validation_error');
    expect((await get(t, sub.id)).grace_end_date).toBe(grace);
    const tracked = (await messages(t, sub.id)).flatMap((m) => m.tracking_values).map((v) => v.field);
    expect(tracked).toEqual(expect.arrayContaining(['trial_end_date', 'grace_end_date']));
  });
});

describe('suspend and reactivate', () => {
  it('really closes the database (open sessions ended, new connections refused) and opens it again', async () => {
    const sub = await fx.deployed();
    const session = await connect(sub.database_name);
    const ended = new Promise<Error>((resolve) => session.on('error', resolve));

    const res = await act(t, sub.id, 'suspend');
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ state: 'suspended', suspend_reason: 'manual', suspended_at: expect.any(String) });
    expect((await ended).message).toMatch(/terminat/);
    expect(await canConnect(sub.database_name)).toMatch(/is not currently accepting connections/);
    expect(await databaseRow(sub.database_name)).toEqual({ datallowconn: false, datconnlimit: 0 });

    // From the wrong state: 409 naming the state.
    const again = await act(t, sub.id, 'suspend');
    expect(again.statusCode).toBe(409);
    expect(again.json().error.message).toMatch(/is suspended; suspend needs running/);

    const back = await act(t, sub.id, 'reactivate');
    expect(back.statusCode, back.body).toBe(200);
    expect(back.json()).toMatchObject({ state: 'running', suspend_reason: null, suspended_at: null });
    expect(await canConnect(sub.database_name)).toBe(true);
    expect(await databaseRow(sub.database_name)).toEqual({ datallowconn: true, datconnlimit: -1 });
    expect((await act(t, sub.id, 'reactivate')).json().error.message).toMatch(/is running; reactivate needs suspended/);

    expect(await stateHistory(t, sub.id)).toEqual(['draft', 'confirmed', 'deploying', 'running', 'suspended', 'running']);
    const rows = (await actionLog(sub.id)).filter((r) => r.action_type === 'database');
    expect(rows.map((r) => [r.status, r.user_id])).toEqual([
      ['success', t.as.operator.userId],
      ['success', t.as.operator.userId],
    ]);
    expect(rows[0]!.input_text).toContain(`ALTER DATABASE "${sub.database_name}" WITH ALLOW_CONNECTIONS false CONNECTION LIMIT 0`);
    expect(rows[0]!.output_text).toMatch(/1 open session\(s\) ended/);
    expect((await act(t, sub.id, 'suspend', undefined, t.as.user)).statusCode).toBe(403);
  });

  it('five concurrent suspends: one moves it, the others answer 409', async () => {
    const sub = await fx.deployed();
    const results = await Promise.all(Array.from({ length: 5 }, () => act(t, sub.id, 'suspend')));
    expect(results.map((r) => r.statusCode).sort()).toEqual([200, 409, 409, 409, 409]);
    expect((await stateHistory(t, sub.id)).filter((s) => s === 'suspended')).toHaveLength(1);
  });

  it('PostgreSQL unreachable: 400 saying so, state unchanged, a failed action-log row', async () => {
    const sub = await fx.deployed();
    const dead = await t.ctx.db.postgresqlServer.create({ data: { name: 'dead', ip: '127.0.0.1', port: await freePort() } });
    // As if its server had become unreachable: the subscription's database lives there.
    await t.ctx.db.subscription.update({ where: { id: sub.id }, data: { postgresql_server_id: dead.id } });

    const res = await act(t, sub.id, 'suspend');
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatchObject({
      code: 'user_error',
      message: expect.stringMatching(/^Could not connect to PostgreSQL at postgres@127\.0\.0\.1:\d+: .*ECONNREFUSED/),
    });
    expect((await get(t, sub.id)).state).toBe('running');
    expect((await actionLog(sub.id)).at(-1)).toMatchObject({ action_type: 'database', status: 'failure' });
    expect(await canConnect(sub.database_name)).toBe(true);
  });

  it('a running trial whose end has passed cannot simply be reactivated (400: extend_trial or convert_to_paid)', async () => {
    const sub = await fx.deployed({ is_trial: true, trial_end_date: iso(Date.now() + DAY) });
    expect((await act(t, sub.id, 'suspend')).statusCode).toBe(200);
    await t.ctx.db.subscription.update({ where: { id: sub.id }, data: { trial_end_date: new Date(Date.now() - DAY) } });
    const res = await act(t, sub.id, 'reactivate');
    expect(res.statusCode).toBe(400);
    expect(res.json().error.message).toMatch(/use extend_trial or convert_to_paid/);
    expect((await get(t, sub.id)).state).toBe('suspended');
  });
});

describe('the action log', () => {
  it('names the operation each database change belongs to: searching for suspend, reactivate or drop_database finds its row', async () => {
    const sub = await fx.deployed();
    expect((await act(t, sub.id, 'suspend')).statusCode).toBe(200);
    expect((await act(t, sub.id, 'reactivate')).statusCode).toBe(200);
    expect((await act(t, sub.id, 'suspend')).statusCode).toBe(200);
    expect((await job(await act(t, sub.id, 'drop_database', { skip_backup: true }, t.as.admin))).state).toBe('completed');
    const search = async (q: string) => {
      const res = await request(t.app, t.as.user, {
        method: 'GET',
        url: `/api/v1/action-logs?model_name=svc.subscription&rec_id=${sub.id}&q=${encodeURIComponent(q)}`,
      });
      expect(res.statusCode, res.body).toBe(200);
      return (res.json().items as { input_text: string }[]).map((r) => r.input_text);
    };
    const db = `"${sub.database_name}"`;
    const closing = `suspend: ALTER DATABASE ${db} WITH ALLOW_CONNECTIONS false CONNECTION LIMIT 0;\nSELECT count(pg_terminate_backend(pid))`;
    expect(await search('suspend')).toEqual([expect.stringContaining(closing), expect.stringContaining(closing)]);
    expect(await search('reactivate')).toEqual([
      expect.stringMatching(new RegExp(`^reactivate: ALTER DATABASE ${db} WITH ALLOW_CONNECTIONS true CONNECTION LIMIT -1 -- on `)),
    ]);
    expect(await search('drop_database')).toEqual([
      expect.stringMatching(new RegExp(`^drop_database: DROP DATABASE ${db} WITH \\(FORCE\\) -- on `)),
    ]);
  });
});

describe('extend_trial and convert_to_paid', () => {
  it('extend_trial: 1..365 days, trials only, from the later of now and the current end; grace moves by the same amount', async () => {
    const end = Date.now() + 5 * DAY;
    const sub = await fx.deployed({ is_trial: true, trial_end_date: iso(end), grace_end_date: iso(end + 7 * DAY) });
    for (const days of [0, 366, 1.5, '3', null]) {
      const res = await act(t, sub.id, 'extend_trial', { days });
      expect(res.statusCode, String(days)).toBe(400);
    }
    expect((await act(t, sub.id, 'extend_trial', {})).statusCode).toBe(400);
    const res = await act(t, sub.id, 'extend_trial', { days: 10 });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ state: 'running', trial_end_date: iso(end + 10 * DAY), grace_end_date: iso(end + 17 * DAY) });
    expect((await messages(t, sub.id)).at(-1)!.body).toMatch(/^Trial extended by 10 day\(s\)/);

    const paid = await fx.deployed();
    const refused = await act(t, paid.id, 'extend_trial', { days: 10 });
    expect(refused.statusCode).toBe(400);
    expect(refused.json().error.message).toMatch(/is not a trial/);
  });

  it('extend_trial of an expired trial: from now, reactivated (connections accepted again)', async () => {
    const sub = await fx.deployed({ is_trial: true, trial_end_date: iso(Date.now() + DAY) });
    await act(t, sub.id, 'suspend');
    // As the expiry leaves it.
    await t.ctx.db.subscription.update({
      where: { id: sub.id },
      data: { suspend_reason: 'trial_expired', trial_end_date: new Date(Date.now() - 3 * DAY), grace_end_date: new Date(Date.now() + DAY) },
    });
    expect(await canConnect(sub.database_name)).toMatch(/not currently accepting/);
    const before = Date.now();
    const res = await act(t, sub.id, 'extend_trial', { days: 7 });
    expect(res.statusCode, res.body).toBe(200);
    const out = res.json();
    expect(out).toMatchObject({ state: 'running', suspend_reason: null, trial_reminder_sent_at: null });
    expect(Date.parse(out.trial_end_date)).toBeGreaterThanOrEqual(before + 7 * DAY);
    expect(Date.parse(out.grace_end_date) - Date.parse(out.trial_end_date)).toBe(4 * DAY);
    expect(await canConnect(sub.database_name)).toBe(true);
  });

  it('convert_to_paid lifts a trial_expired suspension; already paid is 400; cancelled is 409', async () => {
    const sub = await fx.deployed({ is_trial: true, trial_end_date: iso(Date.now() + DAY) });
    await act(t, sub.id, 'suspend');
    await t.ctx.db.subscription.update({
      where: { id: sub.id },
      data: { suspend_reason: 'trial_expired', trial_end_date: new Date(Date.now() - DAY) },
    });
    const res = await act(t, sub.id, 'convert_to_paid');
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ is_trial: false, state: 'running' });
    expect(await canConnect(sub.database_name)).toBe(true);
    expect((await act(t, sub.id, 'convert_to_paid')).statusCode).toBe(400);
    const tracked = (await messages(t, sub.id)).flatMap((m) => m.tracking_values);
    expect(tracked).toContainEqual({ field: 'is_trial', old_value: true, new_value: false });

    const other = await fx.deployed({ is_trial: true });
    expect((await act(t, other.id, 'cancel')).statusCode).toBe(200);
    const cancelled = await act(t, other.id, 'convert_to_paid');
    expect(cancelled.statusCode).toBe(409);
    expect(cancelled.json().error.message).toMatch(/is cancelled/);
    expect((await act(t, other.id, 'extend_trial', { days: 3 })).statusCode).toBe(409);
  });
});

describe('backup', () => {
  it('POSTs the backup, waits until the server lists it done, sets backup_state; chatter and action log', async () => {
    const sub = await fx.deployed({ backup_server_id: fx.backupServerId });
    const done = await job(await act(t, sub.id, 'backup'));
    expect(done.state, done.error).toBe('completed');
    const [made] = await fx.backups.backups(sub.database_name);
    expect(made).toMatchObject({ state: 'done' });
    expect(done.result).toMatchObject({
      subscription_id: sub.id,
      backup_server_id: fx.backupServerId,
      backup: { id: made!.id, state: 'done' },
    });
    // The backup server took the request (key accepted) as one of this subscription's database.
    expect(await t.ctx.db.tenantBackup.findUniqueOrThrow({ where: { id: made!.id } })).toMatchObject({
      db_name: sub.database_name,
      subscription_id: sub.id,
    });
    const current = await get(t, sub.id);
    expect(current).toMatchObject({ backup_state: 'ok', operation: null, state: 'running' });
    // The chatter names the backup and its signed download link, which downloads it.
    const link = `${literal(fx.backups.url)}/download/${made!.id}\\?expires=\\d+&signature=[\\w-]+`;
    const body = (await messages(t, sub.id)).at(-1)!.body;
    expect(body).toMatch(new RegExp(`^Backup ${made!.id} of ${sub.database_name} done on backup server ${fx.backupServerId}: ${link}\\.$`));
    const download = await fetch(body.slice(body.indexOf(': ') + 2, -1));
    expect(download.status).toBe(200);
    expect(download.headers.get('content-type')).toBe('application/zip');
    await download.arrayBuffer();
    const rows = await actionLog(sub.id);
    expect(rows.filter((r) => r.action_type === 'database').at(-1)).toMatchObject({ status: 'success', job_id: done.id });
    expect(rows.filter((r) => r.action_type === 'api_call').map((r) => r.input_text.split('\n')[0])).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^POST .*\/svc\/database\/backup$/),
        expect.stringMatching(/^GET .*\/api\/backups\?db_name=/),
      ]),
    );
    expect(JSON.stringify(rows)).not.toContain(fx.backups.apiKey);
  }, 120_000);

  it('without an id in the answer, the backup is the one listed after the request (not an older one)', async () => {
    const sub = await fx.deployed({ backup_server_id: standIn.id });
    expect((await job(await act(t, sub.id, 'backup'))).state).toBe('completed');
    standIn.remote.behaviour.answerWithId = false;
    standIn.remote.behaviour.unlisted = true;
    try {
      const posts = standIn.remote.callsTo('/svc/database/backup').length;
      const res = await act(t, sub.id, 'backup');
      // Two polls after the request have listed the old, done backup: it must not count.
      await vi.waitUntil(
        async () => {
          const post = standIn.remote.callsTo('/svc/database/backup')[posts];
          const after = post ? standIn.remote.calls.slice(standIn.remote.calls.indexOf(post)) : [];
          if (after.filter((c) => c.path === '/api/backups').length >= 2) return true;
          return Boolean((await t.ctx.queues.find(res.json().job_id, ['backups']))!.finishedOn); // wrongly took the old one
        },
        { timeout: 20_000, interval: 20 },
      );
      expect((await t.ctx.queues.find(res.json().job_id, ['backups']))!.finishedOn).toBeUndefined();
      standIn.remote.release();
      const done = await job(res);
      const ended = await standIn.remote.settled(sub.database_name, 2);
      expect(done.result.backup.id).toBe(ended[1]!.id);
    } finally {
      standIn.remote.behaviour.answerWithId = true;
      standIn.remote.behaviour.unlisted = false;
      standIn.remote.release();
    }
  });

  it('a suspended database is opened to superusers for the backup and closed again', async () => {
    const sub = await fx.deployed({ backup_server_id: fx.backupServerId });
    await act(t, sub.id, 'suspend');
    const done = await job(await act(t, sub.id, 'backup'));
    expect(done.state, JSON.stringify(await fx.backups.backups(sub.database_name))).toBe('completed');
    expect((await fx.backups.backups(sub.database_name)).map((b) => b.state)).toEqual(['done']);
    expect(await databaseRow(sub.database_name)).toEqual({ datallowconn: false, datconnlimit: 0 });
    expect(await canConnect(sub.database_name)).toMatch(/not currently accepting/);
    const bodies = (await messages(t, sub.id)).map((m) => m.body);
    expect(bodies.filter((b) => /opened to superusers|closed to connections again/.test(b))).toHaveLength(2);
  }, 120_000);

  it("a suspended database's backup reads none of the tenant's tables in the administrator's session (its code could RESET ROLE there)", async () => {
    const sub = await fx.deployed({ backup_server_id: fx.backupServerId });
    // The tenant, as its own role: an Odoo-shaped database whose module list is a view running its code.
    const tenant = new pg.Client({ connectionString: tenantUrl(sub.database_name) });
    await tenant.connect();
    try {
      await tenant.query('CREATE TABLE public.ir_attachment (id serial, store_fname text)');
      await tenant.query(`CREATE FUNCTION public.svc_escalate() RETURNS text LANGUAGE plpgsql AS $$
        BEGIN RESET ROLE; EXECUTE 'CREATE ROLE svc_escalated_by_backup SUPERUSER'; RETURN '1'; END $$`);
      await tenant.query(
        "CREATE VIEW public.ir_module_module AS SELECT 'base'::text AS name, public.svc_escalate() AS latest_version, 'installed'::text AS state",
      );
    } finally {
      await tenant.end();
    }
    await act(t, sub.id, 'suspend');
    try {
      const done = await job(await act(t, sub.id, 'backup'));
      expect(done.state, done.error).toBe('completed');
      expect(await adminQuery("SELECT 1 FROM pg_roles WHERE rolname = 'svc_escalated_by_backup'")).toEqual([]);
    } finally {
      await adminQuery('DROP ROLE IF EXISTS svc_escalated_by_backup');
    }
  }, 120_000);

  it('the backup server answering an error: job failed with the remote error, subscription unchanged, chatter and action log say why', async () => {
    const sub = await fx.deployed({ backup_server_id: standIn.id });
    standIn.remote.behaviour.refuseWith = 503;
    try {
      const failed = await job(await act(t, sub.id, 'backup'));
      expect(failed.state).toBe('failed');
      expect(failed.error).toMatch(/POST .*\/svc\/database\/backup answered HTTP 503: .*the backup service is out of order/);
    } finally {
      standIn.remote.behaviour.refuseWith = null;
    }
    expect(await get(t, sub.id)).toMatchObject({ backup_state: 'none', operation: null, state: 'running' });
    expect((await messages(t, sub.id)).at(-1)).toMatchObject({
      subtype_xmlid: 'mail.mt_alert',
      body: expect.stringMatching(/^Backup failed: .*HTTP 503/),
    });
    expect(
      (await actionLog(sub.id))
        .filter((r) => r.status === 'failure')
        .map((r) => r.action_type)
        .sort(),
    ).toEqual(['api_call', 'database']);
  });

  it('the backup server unreachable, and a backup that does not end in time: clear failures', async () => {
    const sub = await fx.deployed();
    const closed = await request(t.app, t.as.operator, {
      method: 'POST',
      url: '/api/v1/backup-servers',
      payload: { url: `http://127.0.0.1:${await freePort()}`, download_url: 'https://d.example.com', api_key: 'k' },
    });
    await request(t.app, t.as.operator, {
      method: 'PATCH',
      url: `/api/v1/subscriptions/${sub.id}`,
      payload: { backup_server_id: closed.json().id },
    });
    const refused = await job(await act(t, sub.id, 'backup'));
    expect(refused.error).toMatch(/\/api\/backups\?db_name=.*: connection refused$/);
    expect(await get(t, sub.id)).toMatchObject({ backup_state: 'none', operation: null });

    await request(t.app, t.as.operator, {
      method: 'PATCH',
      url: `/api/v1/subscriptions/${sub.id}`,
      payload: { backup_server_id: standIn.id },
    });
    standIn.remote.behaviour.hold = true;
    try {
      const late = await withConfig(t, { BACKUP_WAIT_MS: 1000 }, async () => job(await act(t, sub.id, 'backup')));
      expect(late.state).toBe('failed');
      expect(late.error).toMatch(/was not reported done within 1000 ms \(last state: running\)/);
      expect(await get(t, sub.id)).toMatchObject({ backup_state: 'running', operation: null });
    } finally {
      standIn.remote.behaviour.hold = false;
      standIn.remote.release();
    }
  });

  it('a backup the server reports failed: backup_state failed, job failed with the cause the server gives', async () => {
    const sub = await fx.deployed({ backup_server_id: standIn.id });
    standIn.remote.behaviour.failWith = 'No space left on device';
    const failed = await job(await act(t, sub.id, 'backup')).finally(() => {
      standIn.remote.behaviour.failWith = null;
    });
    expect(failed.error).toMatch(/reports backup \d+ of .* as failed: .*No space left on device/);
    expect((await get(t, sub.id)).backup_state).toBe('failed');
  });
});

describe('restore', () => {
  it('administrators only; restores the latest completed backup (or the one named); an unknown id is 400', async () => {
    const sub = await fx.deployed({ backup_server_id: fx.backupServerId });
    expect((await job(await act(t, sub.id, 'backup'))).state).toBe('completed');
    const db = await connect(sub.database_name);
    await db.query(`UPDATE res_company SET name = 'broken by the customer'`);
    await db.end();

    expect((await act(t, sub.id, 'restore', {})).statusCode).toBe(403);
    const unknown = await act(t, sub.id, 'restore', { backup_id: 999999 }, t.as.admin);
    expect(unknown.statusCode).toBe(400);
    expect(unknown.json().error.message).toMatch(
      new RegExp(`Backup 999999 is not a backup of ${sub.database_name} .* lists: \\d+ \\(done\\)`),
    );

    const restored = await job(await act(t, sub.id, 'restore', undefined, t.as.admin));
    expect(restored.state, restored.error).toBe('completed');
    const [backup] = await fx.backups.backups(sub.database_name);
    expect(restored.result).toMatchObject({ backup_id: backup!.id });
    // The backup server was asked to restore that backup into this database, and did.
    expect(await t.ctx.db.backupRestore.findMany({ where: { db_name: sub.database_name } })).toEqual([
      expect.objectContaining({ backup_id: backup!.id, target_db_name: sub.database_name, state: 'done' }),
    ]);
    const check = await connect(sub.database_name);
    // The company is named after the customer at deployment (the partner has no company name).
    expect((await check.query('SELECT name FROM res_company')).rows).toEqual([{ name: 'Jane Customer' }]);
    await check.end();
    expect((await messages(t, sub.id)).at(-1)!.body).toMatch(new RegExp(`restored from backup ${backup!.id}`));

    await act(t, sub.id, 'suspend');
    const suspended = await act(t, sub.id, 'restore', {}, t.as.admin);
    expect(suspended.statusCode).toBe(409);
    expect(suspended.json().error.message).toMatch(/is suspended; restore needs running/);
  }, 120_000);
});

describe('drop_database', () => {
  it('administrators only, from suspended or cancelled: final backup, DROP DATABASE, cancelled; each step in the chatter', async () => {
    const sub = await fx.deployed({ backup_server_id: fx.backupServerId });
    const running = await act(t, sub.id, 'drop_database', {}, t.as.admin);
    expect(running.statusCode).toBe(409);
    expect(running.json().error.message).toMatch(/is running; drop_database needs suspended or cancelled/);
    await act(t, sub.id, 'suspend');
    expect((await act(t, sub.id, 'drop_database', {})).statusCode).toBe(403);

    const done = await job(await act(t, sub.id, 'drop_database', {}, t.as.admin));
    expect(done.state, done.error).toBe('completed');
    expect(await databaseRow(sub.database_name)).toBeNull();
    const backups = await fx.backups.backups(sub.database_name);
    expect(backups.map((b) => b.state)).toEqual(['done']);
    expect(await get(t, sub.id)).toMatchObject({
      state: 'cancelled',
      database_dropped_at: expect.any(String),
      url: null,
      operation: null,
      backup_state: 'ok',
    });
    const steps = (await messages(t, sub.id)).map((m) => m.body).filter((b) => b !== '');
    const from = steps.findIndex((b) => b.startsWith('drop_database of'));
    expect(steps.slice(from).map((b) => b.replace(/ .*/, ''))).toEqual([
      'drop_database',
      'Database',
      'Database',
      'Final',
      'Dropping',
      'Database',
    ]);
    expect(steps.at(-1)).toBe(`Database ${sub.database_name} dropped; subscription cancelled.`);
    const drop = (await actionLog(sub.id)).find((r) => r.input_text.startsWith('drop_database: DROP DATABASE'));
    expect(drop).toMatchObject({ status: 'success', user_id: t.as.admin.userId });

    const again = await act(t, sub.id, 'drop_database', {}, t.as.admin);
    expect(again.statusCode).toBe(409);
    expect(again.json().error.message).toMatch(/was dropped/);
    expect((await act(t, sub.id, 'backup')).statusCode).toBe(409);
  }, 120_000);

  it('never drops without a backup that ended done: a failed backup leaves the database and the state as they were', async () => {
    const sub = await fx.deployed({ backup_server_id: standIn.id });
    await act(t, sub.id, 'cancel');
    standIn.remote.behaviour.refuseWith = 500;
    try {
      const failed = await job(await act(t, sub.id, 'drop_database', undefined, t.as.admin));
      expect(failed.state).toBe('failed');
      expect(failed.error).toMatch(/HTTP 500/);
    } finally {
      standIn.remote.behaviour.refuseWith = null;
    }
    expect(await databaseRow(sub.database_name)).not.toBeNull();
    expect(await get(t, sub.id)).toMatchObject({ state: 'cancelled', database_dropped_at: null, operation: null });
    expect((await messages(t, sub.id)).at(-1)!.body).toMatch(
      /^drop_database failed: .*Nothing was dropped; the subscription is unchanged\.$/,
    );
    expect((await actionLog(sub.id)).some((r) => r.input_text.includes('DROP DATABASE'))).toBe(false);
  });

  it('skip_backup drops without asking the backup server', async () => {
    const sub = await fx.deployed({ backup_server_id: fx.backupServerId });
    await act(t, sub.id, 'suspend');
    const done = await job(await act(t, sub.id, 'drop_database', { skip_backup: true }, t.as.admin));
    expect(done.state, done.error).toBe('completed');
    // svc logs every call it makes to a backup server: there was none, and the server holds no backup of it.
    expect((await actionLog(sub.id)).filter((r) => r.action_type === 'api_call')).toEqual([]);
    expect(await fx.backups.backups(sub.database_name)).toEqual([]);
    expect(await databaseRow(sub.database_name)).toBeNull();
    expect((await messages(t, sub.id)).map((m) => m.body)).toContainEqual(
      expect.stringMatching(/without a backup \(skip_backup by administrator-/),
    );
  });

  it('while a backup holds the subscription, state changes and other operations answer 409 naming it', async () => {
    const sub = await fx.deployed({ backup_server_id: standIn.id });
    standIn.remote.behaviour.hold = true;
    try {
      const res = await act(t, sub.id, 'backup');
      const jobId = res.json().job_id;
      await vi.waitUntil(async () => (await get(t, sub.id)).operation === 'backup', { timeout: 20_000, interval: 20 });
      const suspend = await act(t, sub.id, 'suspend');
      expect(suspend.statusCode).toBe(409);
      expect(suspend.json().error.message).toBe(
        `Subscription ${sub.id} is running with backup running (job ${jobId}); suspend must wait until it ends`,
      );
      expect((await act(t, sub.id, 'cancel')).statusCode).toBe(409);
      // The job claims the subscription before it asks for the backup: release() once the backup
      // server holds it, or the request arriving later waits for the next release.
      await vi.waitUntil(() => standIn.remote.backups.some((b) => b.db_name === sub.database_name && b.state === 'running'), {
        timeout: 10_000,
      });
      standIn.remote.release();
      expect((await job(res)).state).toBe('completed');
      expect((await act(t, sub.id, 'suspend')).statusCode).toBe(200);
    } finally {
      standIn.remote.behaviour.hold = false;
      standIn.remote.release();
    }
  });
});

describe('an interrupted drop_database (worker died)', () => {
  const interruption = subscriptionJobHandlers.interruptions.drop_subscription_database!;
  const record = (jobId: string, subId: number) =>
    recordInterruption(
      t.ctx,
      { name: 'drop_subscription_database', id: jobId, payload: { subscription_id: subId, skip_backup: false, user_id: null } },
      interruption,
    );

  it('after DROP DATABASE: PostgreSQL says it is gone, so the subscription is cancelled with the date', async () => {
    const sub = await fx.deployed();
    await act(t, sub.id, 'suspend');
    // As the job leaves it when the worker dies right after the DROP.
    await t.ctx.db.subscription.update({ where: { id: sub.id }, data: { operation: 'drop_database', operation_job_id: 'backups-990' } });
    await adminQuery(`DROP DATABASE "${sub.database_name}" WITH (FORCE)`);
    await record('backups-990', sub.id);
    expect(await get(t, sub.id)).toMatchObject({ state: 'cancelled', database_dropped_at: expect.any(String), operation: null });
    expect((await messages(t, sub.id)).at(-1)!.body).toMatch(/no longer exists: the drop happened; subscription cancelled/);
  });

  it('before DROP DATABASE (during the backup): the database is still there, the subscription unchanged and closed again', async () => {
    const sub = await fx.deployed();
    await act(t, sub.id, 'suspend');
    await t.ctx.db.subscription.update({ where: { id: sub.id }, data: { operation: 'drop_database', operation_job_id: 'backups-991' } });
    await adminQuery(`ALTER DATABASE "${sub.database_name}" WITH ALLOW_CONNECTIONS true`); // opened for the backup
    await record('backups-991', sub.id);
    expect(await get(t, sub.id)).toMatchObject({ state: 'suspended', database_dropped_at: null, operation: null });
    expect(await databaseRow(sub.database_name)).toEqual({ datallowconn: false, datconnlimit: 0 });
    const last = (await messages(t, sub.id)).at(-1)!;
    expect(last.body).toMatch(/still exists: nothing was dropped; the subscription is unchanged\. .*closed to connections/);
    const rows = await t.ctx.db.actionLog.findMany({ where: { job_id: 'backups-991' } });
    expect(rows.map((r) => r.output_text)).toContainEqual(expect.stringMatching(/^interrupted: /));
  });

  it('the job catalog: backups, restores and drops are never run again after a crash', () => {
    const catalog = composeFeatures(t.ctx).jobs;
    expect(catalog.afterCrashOf('backups')).toBe('interrupt');
    expect(catalog.afterCrashOf('lifecycle')).toBe('rerun');
  });
});

describe('the database a subscription acts on (an operator cannot point the operations at another database)', () => {
  it('while its database exists, database_name and database_template_id cannot change, suspended included', async () => {
    const sub = await fx.deployed();
    const patch = (payload: object) => request(t.app, t.as.operator, { method: 'PATCH', url: `/api/v1/subscriptions/${sub.id}`, payload });
    for (const state of ['running', 'suspended']) {
      if (state === 'suspended') expect((await act(t, sub.id, 'suspend')).statusCode).toBe(200);
      for (const [field, value] of [
        ['database_name', 'somebody_else'],
        ['database_template_id', fx.templateId + 1000],
      ] as const) {
        const res = await patch({ [field]: value });
        expect(res.statusCode, `${state} ${field}`).toBe(409);
        expect(res.json().error.details.fields).toEqual([{ field, message: 'the database exists' }]);
      }
    }
    expect((await get(t, sub.id)).database_name).toBe(sub.database_name);
  });

  it('a subscription whose deployment never created its database_name does nothing to that database', async () => {
    const victim = `${t.ctx.dbName}_victim`;
    await adminQuery(`CREATE DATABASE "${victim}"`);
    const partner = await fx.partner();
    const created = await request(t.app, t.as.operator, {
      method: 'POST',
      url: '/api/v1/subscriptions',
      payload: {
        name: 'Pointing elsewhere',
        partner_id: partner.id,
        database_template_id: fx.templateId,
        database_name: victim,
        backup_server_id: fx.backupServerId,
      },
    });
    expect(created.statusCode, created.body).toBe(201);
    const id = created.json().id as number;
    expect((await act(t, id, 'cancel')).statusCode).toBe(200);

    const backup = await act(t, id, 'backup');
    expect(backup.statusCode).toBe(400);
    expect(backup.json().error.message).toBe(`Subscription ${id} has no database of its own: no deployment of it created ${victim}`);
    expect((await act(t, id, 'drop_database', { skip_backup: true }, t.as.admin)).statusCode).toBe(400);
    expect(await databaseRow(victim)).toEqual({ datallowconn: true, datconnlimit: -1 });
    // Nothing was asked of the backup server: svc logged no call, and the server holds no backup of it.
    expect((await actionLog(id)).filter((r) => r.action_type === 'api_call')).toEqual([]);
    expect(await fx.backups.backups(victim)).toEqual([]);
  });

  it('a database_name another subscription has is a 409 naming the field and that subscription', async () => {
    const taken = await fx.deployed();
    const partner = await fx.partner();
    const draft = await request(t.app, t.as.operator, {
      method: 'POST',
      url: '/api/v1/subscriptions',
      payload: { name: 'Draft', partner_id: partner.id, database_template_id: fx.templateId },
    });
    const res = await request(t.app, t.as.operator, {
      method: 'PATCH',
      url: `/api/v1/subscriptions/${draft.json().id}`,
      payload: { database_name: taken.database_name },
    });
    expect(res.statusCode).toBe(409);
    expect(res.json().error.details).toMatchObject({ fields: [{ field: 'database_name' }], existing_id: taken.id });
  });

  it("the template's PostgreSQL server cannot change while databases made from it live there", async () => {
    await fx.deployed();
    const other = await t.ctx.db.postgresqlServer.create({ data: { name: 'elsewhere', ip: '127.0.0.1', port: 5433 } });
    const res = await request(t.app, t.as.operator, {
      method: 'PATCH',
      url: `/api/v1/database-templates/${fx.templateId}`,
      payload: { postgresql_server_id: other.id },
    });
    expect(res.statusCode).toBe(409);
    expect(res.json().error.details.fields).toEqual([
      { field: 'postgresql_server_id', message: 'subscription databases live on the current server' },
    ]);
    const renamed = await request(t.app, t.as.operator, {
      method: 'PATCH',
      url: `/api/v1/database-templates/${fx.templateId}`,
      payload: { name: 'renamed' },
    });
    expect(renamed.statusCode).toBe(200);
  });
});
