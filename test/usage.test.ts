// Usage and package limits on real parts: tenant databases deployed from an Odoo-shaped template on
// the real PostgreSQL (real pg_database_size, real res_users rows), their filestores on a real sshd
// host (real du), the customer's notices by real SMTP, enforcement with a moved clock.
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { createUsageRound } from '../src/usage/usage-round.js';
import { request, waitForJob } from './helpers/api.js';
import { useOdooHost } from './helpers/odoo-host.js';
import { get, messages } from './helpers/lifecycle.js';
import { queryIn } from './helpers/odoo-template.js';
import { adminQuery } from './helpers/pg.js';
import { freePort } from './helpers/sshd.js';

const f = useOdooHost({ 'ab/logo': Buffer.alloc(40_000, 1) });
const { t } = f;
const DAY = 86_400_000;

const round = () => createUsageRound(t.ctx).collect({ userId: null, jobId: null });
const settings = (payload: object) => request(t.app, t.as.admin, { method: 'PATCH', url: '/api/v1/settings', payload });
const patch = (id: number, payload: object) =>
  request(t.app, t.as.operator, { method: 'PATCH', url: `/api/v1/subscriptions/${id}`, payload });
const mailsTo = (email: string, subject: string) =>
  f.smtp.messages.filter((m) => m.to.includes(email) && m.raw.includes(`Subject: ${subject}`)).length;

/**
 * Internal users beside the administrator: `active` active ones, one inactive, one portal (share) user,
 * each in its group as Odoo makes them (Internal User is group 1, Portal group 2 in the template).
 */
async function addUsers(db: string, active: number, prefix = 'u') {
  await queryIn(
    db,
    `WITH added AS (
       INSERT INTO res_users (login, active, share, partner_id, company_id)
       SELECT '${prefix}' || g || '@example.com', true, false, 1, 1 FROM generate_series(1, $1) g
       UNION ALL SELECT '${prefix}-inactive@example.com', false, false, 1, 1
       UNION ALL SELECT '${prefix}-portal@example.com', true, true, 1, 1
       RETURNING id, share)
     INSERT INTO res_groups_users_rel (gid, uid) SELECT CASE WHEN share THEN 2 ELSE 1 END, id FROM added`,
    [active],
  );
}

async function partnerOf(sub: { [field: string]: unknown }) {
  return (await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/partners/${sub.partner_id}` })).json() as { email: string };
}

describe('a usage round', () => {
  it('measures what psql and du report: database size, active users, limited records, filestore; a day point', async () => {
    const sub = await f.fx.deployed({ user_limit: 50, storage_limit_gb: 5, model_limits: { 'res.partner': 1000, 'crm.lead': 10 } });
    await addUsers(sub.database_name, 3);
    await queryIn(sub.database_name, "INSERT INTO res_partner (name) SELECT 'Partner ' || g FROM generate_series(1, 5) g");
    const job = await waitForJob(
      t.app,
      t.as.user,
      (await request(t.app, t.as.operator, { method: 'POST', url: '/api/v1/settings/actions/collect_usage' })).json().job_id,
    );
    expect(job.state, job.error).toBe('completed');
    expect(job.result.measured).toBeGreaterThanOrEqual(1);

    const [{ size }] = (await adminQuery<{ size: string }>('SELECT pg_database_size($1)::text AS size', [sub.database_name])) as [
      { size: string },
    ];
    const du = Number(execFileSync('du', ['-sbl', f.filestore(sub.database_name)], { encoding: 'utf8' }).split('\t')[0]);
    const [{ n }] = (await queryIn<{ n: string }>(sub.database_name, 'SELECT count(*)::text AS n FROM res_partner')) as [{ n: string }];
    const after = await get(t, sub.id);
    expect(after.usage).toMatchObject({
      db_size_bytes: Number(size),
      filestore_bytes: du,
      active_users: 4, // the administrator and the three; not __system__, the inactive or the portal user
      record_counts: { 'res.partner': Number(n) },
      missing: { 'model:crm.lead': 'no table crm_lead' },
    });
    expect(du).toBeGreaterThan(40_000);
    expect(after.usage_state).toBe('ok');
    // What svc's addon in the instance compares with svc.storage_limit_gb before it stores a file.
    const [param] = await queryIn<{ value: string }>(
      sub.database_name,
      "SELECT value FROM ir_config_parameter WHERE key = 'svc.storage_used_bytes'",
    );
    expect(param).toEqual({ value: String(Number(size) + du) });

    const history = await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/subscriptions/${sub.id}/usage` });
    expect(history.statusCode, history.body).toBe(200);
    expect(history.json().items).toEqual([
      {
        date: new Date().toISOString().slice(0, 10),
        db_size_bytes: Number(size),
        filestore_bytes: du,
        active_users: 4,
        record_counts: { 'res.partner': Number(n) },
      },
    ]);
    for (const from of ['2026-13-01', '2026-02-31']) {
      const bad = await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/subscriptions/${sub.id}/usage?from=${from}` });
      expect(bad.statusCode, from).toBe(400);
    }
    const filtered = await request(t.app, t.as.user, { method: 'GET', url: '/api/v1/subscriptions?usage_state=ok' });
    expect(filtered.json().items.map((s: { id: number }) => s.id)).toContain(sub.id);

    // Fewer users and records later that day: the usage says so, the day keeps its highest values.
    await queryIn(sub.database_name, "UPDATE res_users SET active = false WHERE login = 'u1@example.com'");
    await queryIn(sub.database_name, 'DELETE FROM res_partner WHERE id > 3 AND id NOT IN (SELECT partner_id FROM res_users)');
    await round();
    const [{ n: fewer }] = (await queryIn<{ n: string }>(sub.database_name, 'SELECT count(*)::text AS n FROM res_partner')) as [
      { n: string },
    ];
    expect(Number(fewer)).toBeLessThan(Number(n));
    expect((await get(t, sub.id)).usage).toMatchObject({ active_users: 3, record_counts: { 'res.partner': Number(fewer) } });
    const again = await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/subscriptions/${sub.id}/usage` });
    expect(again.json().items).toEqual([
      expect.objectContaining({ active_users: 4, record_counts: { 'res.partner': Math.max(Number(n), Number(fewer)) } }),
    ]);
  });

  it('tells a rise to warning and to exceeded once each, and again only after usage fell below 80 %', async () => {
    const sub = await f.fx.deployed({ user_limit: 5 });
    const { email } = await partnerOf(sub);
    await addUsers(sub.database_name, 3, 'w'); // 4 of 5: 80 %
    await round();
    expect((await get(t, sub.id)).usage_state).toBe('warning');
    await round();
    await expect.poll(() => mailsTo(email, 'Your subscription is near its limits'), { timeout: 15_000 }).toBe(1);

    await queryIn(
      sub.database_name,
      `WITH added AS (INSERT INTO res_users (login, active, share, partner_id, company_id)
         VALUES ('w-more@example.com', true, false, 1, 1) RETURNING id)
       INSERT INTO res_groups_users_rel (gid, uid) SELECT 1, id FROM added`,
    );
    await round(); // 5 of 5
    await round();
    expect((await get(t, sub.id)).usage_state).toBe('exceeded');
    await expect.poll(() => mailsTo(email, 'Your subscription is over its limits'), { timeout: 15_000 }).toBe(1);
    const chatter = (await messages(t, sub.id)).map((m) => m.body);
    expect(chatter).toContain('Your subscription is over its limits: 5 active users of 5 allowed.');

    await queryIn(sub.database_name, `UPDATE res_users SET active = false WHERE login LIKE 'w%'`);
    await round(); // 1 of 5
    expect((await get(t, sub.id)).usage_state).toBe('ok');
    await queryIn(sub.database_name, `UPDATE res_users SET active = true WHERE login LIKE 'w_@%' OR login = 'w-more@example.com'`);
    await round();
    await expect.poll(() => mailsTo(email, 'Your subscription is over its limits'), { timeout: 15_000 }).toBe(2);
    // A limit lowered below the usage is noticed at the next round.
    const lowered = await f.fx.deployed({ user_limit: 10 });
    const lowEmail = (await partnerOf(lowered)).email;
    await round();
    expect((await patch(lowered.id, { user_limit: 1 })).statusCode).toBe(200);
    await round();
    await expect.poll(() => mailsTo(lowEmail, 'Your subscription is over its limits'), { timeout: 15_000 }).toBe(1);
  });

  it('with enforce_limits: suspends after the grace period, not while an alert fires on the Odoo host or during its maintenance window; the lifecycle lifts it when the limits allow', async () => {
    const sub = await f.fx.deployed({ user_limit: 1 });
    const { email } = await partnerOf(sub);
    await addUsers(sub.database_name, 1, 'e'); // 2 of 1
    expect((await settings({ enforce_limits: true, limit_grace_days: 7 })).statusCode).toBe(200);
    try {
      await round();
      expect(await get(t, sub.id)).toMatchObject({ state: 'running', usage_state: 'exceeded' });

      // The grace period has passed (moved clock): but an alert fires on its Odoo host.
      await t.ctx.db.subscription.update({ where: { id: sub.id }, data: { usage_exceeded_since: new Date(Date.now() - 8 * DAY) } });
      const alert = await t.ctx.db.alert.create({
        data: { rule_id: 999, root_server_id: f.rootServerId, metric: 'cpu_percent', threshold: 90, value: 99 },
      });
      const held = await round();
      expect(held.held_back).toContainEqual({ subscription_id: sub.id, why: expect.stringContaining('an alert fires on its Odoo host') });
      expect((await get(t, sub.id)).state).toBe('running');
      await t.ctx.db.alert.update({ where: { id: alert.id }, data: { state: 'resolved', resolved_at: new Date() } });

      // Nor during a maintenance window on its Odoo host.
      const window = await request(t.app, t.as.operator, {
        method: 'POST',
        url: '/api/v1/maintenance-windows',
        payload: {
          root_server_ids: [f.rootServerId],
          starts_at: new Date(Date.now() - 60_000).toISOString(),
          ends_at: new Date(Date.now() + 3_600_000).toISOString(),
          reason: 'kernel update',
        },
      });
      expect(window.statusCode, window.body).toBe(201);
      const waiting = await round();
      expect(waiting.held_back).toContainEqual({ subscription_id: sub.id, why: expect.stringContaining('maintenance window') });
      await request(t.app, t.as.operator, { method: 'DELETE', url: `/api/v1/maintenance-windows/${window.json().id}` });

      const enforced = await round();
      expect(enforced.suspended).toContain(sub.id);
      expect(await get(t, sub.id)).toMatchObject({ state: 'suspended', suspend_reason: 'over_limit' });
      await expect.poll(() => mailsTo(email, 'Your subscription is suspended: over its limits'), { timeout: 15_000 }).toBe(1);

      // An operator raises the limit: the lifecycle run lifts the suspension.
      expect((await patch(sub.id, { user_limit: 10 })).statusCode).toBe(200);
      const lifecycle = await request(t.app, t.as.operator, { method: 'POST', url: '/api/v1/settings/actions/run_trial_lifecycle' });
      const done = await waitForJob(t.app, t.as.user, lifecycle.json().job_id);
      expect(done.result.reactivated).toContain(sub.id);
      expect((await get(t, sub.id)).state).toBe('running');
    } finally {
      await settings({ enforce_limits: false });
    }
  });

  it('a measure that cannot be taken is missing with its reason, the round goes on, and no limit is enforced on it', async () => {
    const closed = await f.fx.deployed({ user_limit: 1 });
    const fine = await f.fx.deployed({ user_limit: 50 });
    await addUsers(closed.database_name, 5, 'c');
    await round();
    const exceeded = await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: closed.id } });
    expect(exceeded.usage_state).toBe('exceeded');
    // Closed behind the service's back: its users cannot be counted any more.
    await adminQuery(`ALTER DATABASE "${closed.database_name}" WITH ALLOW_CONNECTIONS false`);
    await settings({ enforce_limits: true, limit_grace_days: 0 });
    try {
      const result = await round();
      expect(result.missing[closed.id]).toMatchObject({ active_users: expect.stringContaining('not currently accepting connections') });
      expect((await get(t, closed.id)).usage).toMatchObject({ active_users: null, db_size_bytes: expect.any(Number) });
      // A round that could not count the users proves no fall: the state and its grace period stay.
      expect(await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: closed.id } })).toMatchObject({
        state: 'running',
        usage_state: 'exceeded',
        usage_exceeded_since: exceeded.usage_exceeded_since,
      });
      expect(result.suspended).not.toContain(closed.id);
      // Nor does the lifecycle lift an over_limit suspension on that usage.
      await t.ctx.db.subscription.update({ where: { id: closed.id }, data: { state: 'suspended', suspend_reason: 'over_limit' } });
      const lifecycle = await request(t.app, t.as.operator, { method: 'POST', url: '/api/v1/settings/actions/run_trial_lifecycle' });
      const done = await waitForJob(t.app, t.as.user, lifecycle.json().job_id);
      expect(done.result.reactivated).not.toContain(closed.id);
      expect((await get(t, closed.id)).state).toBe('suspended');
      await t.ctx.db.subscription.update({ where: { id: closed.id }, data: { state: 'running', suspend_reason: null } });
      expect((await get(t, fine.id)).usage).toMatchObject({ active_users: 1 });
    } finally {
      await settings({ enforce_limits: false });
      await adminQuery(`ALTER DATABASE "${closed.database_name}" WITH ALLOW_CONNECTIONS true`);
    }

    // An Odoo host that cannot be reached: the filestore is missing, storage not judged.
    const port = await freePort();
    await t.ctx.db.rootServer.update({ where: { id: f.rootServerId }, data: { port } });
    try {
      const result = await round();
      expect(result.missing[fine.id]).toMatchObject({
        filestore: expect.stringContaining(`root server ${f.rootServerId}) could not be reached`),
      });
      expect((await get(t, fine.id)).usage).toMatchObject({ filestore_bytes: null });
    } finally {
      await t.ctx.db.rootServer.update({ where: { id: f.rootServerId }, data: { port: f.sshd.port } });
    }
  });

  it('two rounds at once: one runs, the other says so; each rise is told once', async () => {
    const sub = await f.fx.deployed({ user_limit: 2 });
    const { email } = await partnerOf(sub);
    await addUsers(sub.database_name, 1, 'r'); // 2 of 2
    const [a, b] = await Promise.all([round(), round()]);
    expect([a.skipped, b.skipped].filter(Boolean)).toEqual(['another worker is running a usage round']);
    await Promise.all([round(), round()]);
    await expect.poll(() => mailsTo(email, 'Your subscription is over its limits'), { timeout: 15_000 }).toBe(1);
    const notices = (await messages(t, sub.id)).filter(
      (m) => m.message_type === 'notification' && m.body.startsWith('Your subscription is over its limits'),
    );
    expect(notices).toHaveLength(1);
  });

  it('a trial suspended over its limits becomes an expired trial when its end passes (its mail and drop follow)', async () => {
    const sub = await f.fx.deployed({ is_trial: true, trial_end_date: new Date(Date.now() + 10 * DAY).toISOString(), user_limit: 1 });
    await addUsers(sub.database_name, 1, 'x'); // 2 of 1
    await settings({ enforce_limits: true, limit_grace_days: 0 });
    try {
      expect((await round()).suspended).toContain(sub.id);
    } finally {
      await settings({ enforce_limits: false });
    }
    expect(await get(t, sub.id)).toMatchObject({ state: 'suspended', suspend_reason: 'over_limit' });

    await t.ctx.db.subscription.update({ where: { id: sub.id }, data: { trial_end_date: new Date(Date.now() - DAY) } });
    const lifecycle = await request(t.app, t.as.operator, { method: 'POST', url: '/api/v1/settings/actions/run_trial_lifecycle' });
    const done = await waitForJob(t.app, t.as.user, lifecycle.json().job_id);
    expect(done.result.suspended).toContain(sub.id);
    expect(await get(t, sub.id)).toMatchObject({ state: 'suspended', suspend_reason: 'trial_expired' });
  });

  it('counts internal users by their groups as Odoo does, not by the share column a tenant can write', async () => {
    const sub = await f.fx.deployed({ user_limit: 50 });
    await addUsers(sub.database_name, 2, 'g'); // the administrator and two
    const count = async () => {
      await round();
      return ((await get(t, sub.id)).usage as { active_users: number }).active_users;
    };
    expect(await count()).toBe(3);
    // share written true in SQL on internal users (the administrator among them): still internal.
    await queryIn(sub.database_name, `UPDATE res_users SET share = true WHERE login LIKE 'g_@%' OR id = 2`);
    expect(await count()).toBe(3);
    // A user in no group, then in a group made to imply Internal User (transitively): internal.
    await queryIn(
      sub.database_name,
      `INSERT INTO res_groups (id, name) VALUES (10, 'Sales'), (11, 'Sales manager');
       INSERT INTO res_users (login, active, share, partner_id, company_id) VALUES ('g-loose@example.com', true, true, 1, 1);`,
    );
    expect(await count()).toBe(3);
    await queryIn(
      sub.database_name,
      `INSERT INTO res_groups_users_rel (gid, uid) SELECT 11, id FROM res_users WHERE login = 'g-loose@example.com';
       INSERT INTO res_groups_implied_rel (gid, hid) VALUES (11, 10)`,
    );
    expect(await count()).toBe(3);
    await queryIn(sub.database_name, 'INSERT INTO res_groups_implied_rel (gid, hid) VALUES (10, 1)');
    expect(await count()).toBe(4);
  });

  it("reports a schema besides Odoo's in a tenant database: in the round's result, the usage, and one chatter alert", async () => {
    const sub = await f.fx.deployed({ user_limit: 50 });
    const clean = await round();
    expect(clean.other_schemas[sub.id]).toBeUndefined();
    // What a tenant's SQL makes (a code server action): a schema named after its role, shadowing Odoo's table.
    await queryIn(
      sub.database_name,
      `CREATE SCHEMA shadow_role;
       CREATE VIEW shadow_role.ir_config_parameter AS SELECT * FROM public.ir_config_parameter WHERE left(key, 4) <> 'svc.';
       CREATE TEMP TABLE scratch (x int);`,
    );
    const found = await round();
    expect(found.other_schemas[sub.id]).toEqual(['shadow_role']);
    expect(await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: sub.id } })).toMatchObject({
      usage: expect.objectContaining({ other_schemas: ['shadow_role'], active_users: 1 }),
    });
    const alerts = () =>
      messages(t, sub.id).then((all) => all.filter((m) => m.body.includes('"shadow_role" besides Odoo\'s own (public)')));
    expect(await alerts()).toHaveLength(1);
    expect((await alerts())[0]!.body).toContain(`Database ${sub.database_name} has schema(s) "shadow_role"`);
    // Told once, not every round; a second one is told when it appears.
    await round();
    expect(await alerts()).toHaveLength(1);
    await queryIn(sub.database_name, 'CREATE SCHEMA "Other one"');
    expect((await round()).other_schemas[sub.id]).toEqual(['Other one', 'shadow_role']);
    const all = (await messages(t, sub.id)).map((m) => m.body);
    expect(all.filter((b) => b.includes('schema(s) "Other one" besides'))).toHaveLength(1);
    await queryIn(sub.database_name, 'DROP SCHEMA shadow_role CASCADE; DROP SCHEMA "Other one"');
    const gone = await round();
    expect(gone.other_schemas[sub.id]).toBeUndefined();
    expect((await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: sub.id } })).usage).toMatchObject({ other_schemas: [] });
  });

  it('settings: usage_interval_minutes 5..1440, limit_grace_days 0..365 (400 naming the field)', async () => {
    for (const payload of [
      { usage_interval_minutes: 4 },
      { usage_interval_minutes: 1441 },
      { limit_grace_days: -1 },
      { limit_grace_days: 366 },
    ]) {
      const res = await settings(payload);
      expect(res.statusCode).toBe(400);
      expect(res.json().error.details.fields[0].field).toBe(`body.${Object.keys(payload)[0]}`);
    }
    expect((await settings({ usage_interval_minutes: 60 })).json()).toMatchObject({ usage_interval_minutes: 60 });
    const asUser = await request(t.app, t.as.user, { method: 'POST', url: '/api/v1/settings/actions/collect_usage' });
    expect(asUser.statusCode).toBe(403);
  });
});
