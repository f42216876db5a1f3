// A deployment makes a customer instance, on real parts: an Odoo-shaped template on the real
// PostgreSQL, its filestore on a real sshd host (the sudo NOPASSWD user, so as root), a real SMTP
// server for the trial_ready mail, and Debian's passlib to check the password hash as Odoo would.
import { mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { request, waitForJob } from './helpers/api.js';
import { useOdooHost } from './helpers/odoo-host.js';
import { act, databaseRow, get, messages } from './helpers/lifecycle.js';
import { configParameters, createOdooTemplate, queryIn, TEMPLATE_ADMIN_PASSWORD } from './helpers/odoo-template.js';
import { adminQuery } from './helpers/pg.js';
import { textOf } from './helpers/smtp.js';
import { adminRow, credentialsIn, everythingStored, passlibVerifies } from './helpers/customer-credentials.js';
import { freePort } from './helpers/sshd.js';

const f = useOdooHost({
  // The template's filestore: attachments in Odoo's layout (sha1 prefix directories).
  'ab/abcdef0123': 'logo bytes',
  'ab/abcdef4567': 'attachment bytes',
});
const { t } = f;

describe('a trial deployment', () => {
  it('gives the copy its own identity, the customer login and the package limits, copies the filestore, and tells the password only in the mail', async () => {
    const trialEnd = new Date(Date.now() + 10 * 86_400_000);
    const other = await f.fx.deployed();
    const sub = await f.fx.deployed({
      is_trial: true,
      trial_end_date: trialEnd.toISOString(),
      user_limit: 7,
      storage_limit_gb: 3,
      model_limits: { 'res.partner': 500 },
    });
    const partner = (await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/partners/${sub.partner_id}` })).json();

    // Identity: its own, not the template's and not another tenant's.
    const [params, otherParams, templateParams] = await Promise.all([
      configParameters(sub.database_name),
      configParameters(other.database_name),
      configParameters(f.fx.templateDb),
    ]);
    for (const key of ['database.secret', 'database.uuid']) {
      expect(params[key]).toMatch(/^[0-9a-f-]{36}$/);
      expect(params[key]).not.toBe(templateParams[key]);
      expect(params[key]).not.toBe(otherParams[key]);
    }
    expect(Date.now() - Date.parse(`${params['database.create_date']}Z`)).toBeLessThan(10 * 60_000);
    expect(params['web.base.url']).toBe(sub.url);
    expect(params).not.toHaveProperty('database.enterprise_code');
    expect(params).not.toHaveProperty('database.expiration_date');
    expect(params).not.toHaveProperty('database.expiration_reason');
    // Package limits as parameters the instance can read.
    expect(params).toMatchObject({
      'svc.subscription_id': String(sub.id),
      'svc.is_trial': 'True',
      'svc.trial_end_date': trialEnd.toISOString().slice(0, 19).replace('T', ' '),
      'svc.user_limit': '7',
      'svc.storage_limit_gb': '3',
      'svc.model_limits': JSON.stringify({ 'res.partner': 500 }),
    });

    // The customer's login, with the password of the mail (and not the template's).
    const mail = await f.smtp.waitFor(partner.email);
    const text = textOf(mail);
    const { login, password } = credentialsIn(text);
    expect(login).toBe(partner.email);
    expect(password).toMatch(/^[A-Za-z0-9_-]{16,}$/);
    const admin = await adminRow(sub.database_name);
    expect(admin).toMatchObject({ login: partner.email, name: partner.name, email: partner.email });
    expect(admin.password).toMatch(/^\$pbkdf2-sha512\$1000\$/);
    expect(passlibVerifies(password, admin.password)).toBe(true);
    expect(passlibVerifies(TEMPLATE_ADMIN_PASSWORD, admin.password)).toBe(false);
    const companies = await queryIn(
      sub.database_name,
      'SELECT c.name, p.name AS partner_name FROM res_company c JOIN res_partner p ON p.id = c.partner_id',
    );
    expect(companies).toEqual([{ name: partner.name, partner_name: partner.name }]);

    // The password is in the mail sent and nowhere else.
    expect(await everythingStored(t)).not.toContain(password);
    const copy = (await messages(t, sub.id)).find((m) => m.message_type === 'email')!;
    expect(copy.body).toContain('Password: ********');

    // The filestore: the template's files, hard-linked.
    for (const file of ['abcdef0123', 'abcdef4567']) {
      const [copied, original] = await Promise.all([
        stat(path.join(f.filestore(sub.database_name), 'ab', file)),
        stat(path.join(f.filestore(f.fx.templateDb), 'ab', file)),
      ]);
      expect(copied.ino).toBe(original.ino);
    }
    expect(await readFile(path.join(f.filestore(sub.database_name), 'ab', 'abcdef0123'), 'utf8')).toBe('logo bytes');

    // Each step is in the job's progress and the action log.
    const steps = (
      await t.ctx.db.actionLog.findMany({ where: { model_name: 'svc.subscription', rec_id: sub.id }, orderBy: { id: 'asc' } })
    ).map((r) => `${r.status} ${r.input_text.split(' ').slice(0, 4).join(' ')}`);
    // The filestore is copied while the database steps run, one after the other.
    // Each row names its operation first.
    expect(steps.filter((x) => !x.includes('filestore'))).toEqual([
      'success deploy: choose the host',
      expect.stringMatching(/^success deploy: CREATE DATABASE/),
      'success deploy: new identity of',
      'success deploy: the administrator of',
      'success deploy: svc.* config parameters',
    ]);
    expect(steps.filter((x) => x.includes('filestore'))).toEqual([`success deploy: filestore of ${sub.database_name}`]);
  });

  it('keeps the package limits current: extend_trial, PATCH and convert_to_paid are written into the running instance', async () => {
    const sub = await f.fx.deployed({ is_trial: true, trial_end_date: new Date(Date.now() + 86_400_000).toISOString(), user_limit: 2 });
    const param = async (key: string) => (await configParameters(sub.database_name))[key];

    const extended = await act(t, sub.id, 'extend_trial', { days: 30 });
    expect(extended.statusCode, extended.body).toBe(200);
    const end = extended.json().trial_end_date as string;
    await expect.poll(() => param('svc.trial_end_date'), { timeout: 15_000 }).toBe(end.slice(0, 19).replace('T', ' '));

    const patched = await request(t.app, t.as.operator, {
      method: 'PATCH',
      url: `/api/v1/subscriptions/${sub.id}`,
      payload: { user_limit: 25 },
    });
    expect(patched.statusCode, patched.body).toBe(200);
    await expect.poll(() => param('svc.user_limit'), { timeout: 15_000 }).toBe('25');

    expect((await act(t, sub.id, 'convert_to_paid')).statusCode).toBe(200);
    await expect.poll(() => param('svc.is_trial'), { timeout: 15_000 }).toBe('False');
    expect(await param('svc.trial_end_date')).toBeUndefined();
    await expect.poll(async () => (await get(t, sub.id)).instance_sync_pending_at ?? null, { timeout: 15_000 }).toBeNull();
  });

  it('a limit change that cannot be written stays pending, says so, and is written once the instance runs again', async () => {
    const sub = await f.fx.deployed({ user_limit: 2 });
    expect((await act(t, sub.id, 'suspend')).statusCode).toBe(200);
    const patched = await request(t.app, t.as.operator, {
      method: 'PATCH',
      url: `/api/v1/subscriptions/${sub.id}`,
      payload: { user_limit: 9 },
    });
    expect(patched.statusCode).toBe(200);
    const row = await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: sub.id } });
    expect(row.instance_sync_pending_at).not.toBeNull();
    expect((await act(t, sub.id, 'reactivate')).statusCode).toBe(200);
    await expect.poll(async () => (await configParameters(sub.database_name))['svc.user_limit'], { timeout: 15_000 }).toBe('9');

    // Written behind the service's back to fail: the chatter says so and it stays pending.
    await adminQuery(`ALTER DATABASE "${sub.database_name}" WITH ALLOW_CONNECTIONS false`);
    await request(t.app, t.as.operator, { method: 'PATCH', url: `/api/v1/subscriptions/${sub.id}`, payload: { user_limit: 11 } });
    await expect
      .poll(async () => (await messages(t, sub.id)).some((m) => /package limits could not be written/.test(m.body)), { timeout: 15_000 })
      .toBe(true);
    expect((await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: sub.id } })).instance_sync_pending_at).not.toBeNull();
    await adminQuery(`ALTER DATABASE "${sub.database_name}" WITH ALLOW_CONNECTIONS true`);
    const lifecycle = await request(t.app, t.as.operator, { method: 'POST', url: '/api/v1/settings/actions/run_trial_lifecycle' });
    await waitForJob(t.app, t.as.user, lifecycle.json().job_id);
    await expect.poll(async () => (await configParameters(sub.database_name))['svc.user_limit'], { timeout: 15_000 }).toBe('11');
  });

  it('a ready mail sent again tells a new password, set in the instance first', async () => {
    const sub = await f.fx.deployed({ is_trial: true, trial_end_date: new Date(Date.now() + 5 * 86_400_000).toISOString() });
    const partner = (await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/partners/${sub.partner_id}` })).json();
    const first = credentialsIn(textOf(await f.smtp.waitFor(partner.email)));
    // As if that delivery had failed: the lifecycle run sends it again.
    await t.ctx.db.subscription.update({ where: { id: sub.id }, data: { trial_ready_sent_at: null } });
    const lifecycle = await request(t.app, t.as.operator, { method: 'POST', url: '/api/v1/settings/actions/run_trial_lifecycle' });
    await waitForJob(t.app, t.as.user, lifecycle.json().job_id);
    const second = credentialsIn(textOf(await f.smtp.waitFor(partner.email, 2)));
    expect(second.password).not.toBe(first.password);
    const admin = await adminRow(sub.database_name);
    expect(passlibVerifies(second.password, admin.password)).toBe(true);
    expect(passlibVerifies(first.password, admin.password)).toBe(false);
    expect(await everythingStored(t)).not.toContain(second.password);
  });

  it('drop_database removes the database and its filestore', async () => {
    const sub = await f.fx.deployed();
    expect((await stat(f.filestore(sub.database_name))).isDirectory()).toBe(true);
    expect((await act(t, sub.id, 'cancel')).statusCode).toBe(200);
    const drop = await act(t, sub.id, 'drop_database', { skip_backup: true }, t.as.admin);
    expect((await waitForJob(t.app, t.as.user, drop.json().job_id)).state).toBe('completed');
    expect(await databaseRow(sub.database_name)).toBeNull();
    await expect(stat(f.filestore(sub.database_name))).rejects.toThrow(/ENOENT/);
    await expect(stat(f.filestore(f.fx.templateDb))).resolves.toBeTruthy();
    // The Odoo host's action log names the operation of each filestore command.
    const ours = new RegExp(`/filestore/${sub.database_name}(?![\\w.-])`);
    const rows = await t.ctx.db.actionLog.findMany({
      where: { model_name: 'svc.root.server', rec_id: f.rootServerId },
      orderBy: { id: 'asc' },
    });
    expect(rows.filter((r) => ours.test(r.input_text)).map((r) => r.input_text.slice(0, r.input_text.indexOf(': ')))).toEqual([
      'deploy',
      'drop_database',
    ]);
  });

  it('deployments from one template at once each get a database of their own', async () => {
    const subs = await Promise.all([1, 2, 3].map(() => f.fx.deployed()));
    const names = new Set(subs.map((s) => s.database_name));
    expect(names.size).toBe(3);
    const secrets = await Promise.all(subs.map(async (s) => (await configParameters(s.database_name))['database.secret']));
    expect(new Set(secrets).size).toBe(3);
  });
});

describe('a deployment that cannot finish', () => {
  /** A template record of its own on the local server, for one failure case. */
  async function templateOf(db: string, rootServer: number | null = null) {
    const res = await request(t.app, t.as.operator, {
      method: 'POST',
      url: '/api/v1/database-templates',
      payload: { name: db, postgresql_server_id: f.fx.serverId, template_db_name: db, root_server_id: rootServer },
    });
    expect(res.statusCode, res.body).toBe(201);
    return res.json().id as number;
  }

  it('a template without the Odoo tables fails naming what is missing, leaves nothing behind, and check says so (400)', async () => {
    for (const [n, without, missing] of [
      [1, 'res_users', 'table res_users'],
      [2, 'res_users.share', 'column res_users.share'],
    ] as const) {
      const db = `${t.ctx.dbName}_bad${n}`;
      await createOdooTemplate(db, { without });
      const templateId = await templateOf(db);
      const check = await request(t.app, t.as.operator, { method: 'POST', url: `/api/v1/database-templates/${templateId}/actions/check` });
      expect(check.statusCode, check.body).toBe(400);
      expect(check.json().error.message).toContain(`missing ${missing}`);

      const partner = await f.fx.partner();
      const sub = await request(t.app, t.as.operator, {
        method: 'POST',
        url: '/api/v1/subscriptions',
        payload: { name: 'x', partner_id: partner.id, database_template_id: templateId, database_name: `${t.ctx.dbName}_nb${n}` },
      });
      const id = sub.json().id as number;
      await act(t, id, 'confirm');
      const job = await waitForJob(t.app, t.as.user, (await act(t, id, 'deploy')).json().job_id);
      expect(job.state).toBe('failed');
      expect(job.error).toContain(`missing ${missing}`);
      expect(await databaseRow(`${t.ctx.dbName}_nb${n}`)).toBeNull();
      expect((await get(t, id)).state).toBe('failed');
    }
    const good = await request(t.app, t.as.operator, {
      method: 'POST',
      url: `/api/v1/database-templates/${f.fx.templateId}/actions/check`,
    });
    expect(good.statusCode, good.body).toBe(200);
    expect(good.json()).toMatchObject({ ok: true, filestore: 'present', size_bytes: expect.any(Number) });
  });

  it('an Odoo host that cannot be reached fails naming the server, and no database or half-copied filestore stays', async () => {
    const port = await freePort();
    const [down] = await t.ctx.db.$queryRaw<{ id: number }[]>`
      INSERT INTO root_servers (name, ip, port, username, state, uuid, updated_at)
      VALUES ('odoo-down', '127.0.0.1', ${port}, 'root', 'confirmed', gen_random_uuid()::text, now()) RETURNING id`;
    const db = `${t.ctx.dbName}_tpl_down`;
    await createOdooTemplate(db);
    const templateId = await templateOf(db, down!.id);
    const partner = await f.fx.partner();
    const name = `${t.ctx.dbName}_down`;
    const sub = await request(t.app, t.as.operator, {
      method: 'POST',
      url: '/api/v1/subscriptions',
      payload: { name: 'x', partner_id: partner.id, database_template_id: templateId, database_name: name },
    });
    const id = sub.json().id as number;
    await act(t, id, 'confirm');
    const job = await waitForJob(t.app, t.as.user, (await act(t, id, 'deploy')).json().job_id);
    expect(job.state).toBe('failed');
    expect(job.error).toMatch(new RegExp(`Odoo host odoo-down \\(root server ${down!.id}\\) could not be reached`));
    expect(await databaseRow(name)).toBeNull();
    await expect(stat(f.filestore(name))).rejects.toThrow(/ENOENT/);
    expect((await messages(t, id)).at(-1)!.body).toMatch(/was dropped/);
  });

  it('a failure after the copy removes what it made, and deploy again starts clean', async () => {
    const partner = await f.fx.partner();
    const name = `${t.ctx.dbName}_again`;
    // Somebody's directory where the filestore should go: the filestore step refuses to merge into it.
    await mkdir(f.filestore(name), { recursive: true });
    await writeFile(path.join(f.filestore(name), 'not-ours'), 'x');
    const created = await request(t.app, t.as.operator, {
      method: 'POST',
      url: '/api/v1/subscriptions',
      payload: { name: 'x', partner_id: partner.id, database_template_id: f.fx.templateId, database_name: name },
    });
    const id = created.json().id as number;
    await act(t, id, 'confirm');
    const failed = await waitForJob(t.app, t.as.user, (await act(t, id, 'deploy')).json().job_id);
    expect(failed.state).toBe('failed');
    expect(failed.error).toMatch(/already exists/);
    expect(await databaseRow(name)).toBeNull();
    expect(await readFile(path.join(f.filestore(name), 'not-ours'), 'utf8')).toBe('x');

    await rm(f.filestore(name), { recursive: true });
    const again = await waitForJob(t.app, t.as.user, (await act(t, id, 'deploy')).json().job_id);
    expect(again.state, again.error).toBe('completed');
    expect((await get(t, id)).state).toBe('running');
  });

  it('what a worker that died left (its database recorded, never running) is removed by the next attempt', async () => {
    const sub = await f.fx.deployed();
    const before = await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: sub.id } });
    // As a deployment cut short after the copy leaves it: the identity recorded, state failed.
    await t.ctx.db.subscription.update({ where: { id: sub.id }, data: { state: 'failed', database_created_at: null } });
    const job = await waitForJob(t.app, t.as.user, (await act(t, sub.id, 'deploy')).json().job_id);
    expect(job.state, job.error).toBe('completed');
    const after = await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: sub.id } });
    expect(after.database_oid).not.toBe(before.database_oid);
    const log = await t.ctx.db.actionLog.findMany({
      where: { model_name: 'svc.subscription', rec_id: sub.id, input_text: { contains: 'earlier attempt' } },
    });
    expect(log.map((r) => r.status)).toEqual(['success']);
  });
});

describe('database templates', () => {
  it('with a root server, template_db_name must be a directory name; root_server_id cannot change while its databases exist', async () => {
    const bad = await request(t.app, t.as.operator, {
      method: 'POST',
      url: '/api/v1/database-templates',
      payload: { name: 'x', postgresql_server_id: f.fx.serverId, template_db_name: '../etc', root_server_id: f.rootServerId },
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.details.fields).toEqual([{ field: 'template_db_name', message: 'not a directory name' }]);
    await f.fx.deployed();
    const move = await request(t.app, t.as.operator, {
      method: 'PATCH',
      url: `/api/v1/database-templates/${f.fx.templateId}`,
      payload: { root_server_id: null },
    });
    expect(move.statusCode).toBe(409);
    expect(move.json().error.details.fields.map((f: { field: string }) => f.field)).toEqual(['root_server_id']);
  });
});
