// svc's addon (odoo-addons/svc_instance) on the real Odoo, for each tarball of ODOO_SOURCE: Odoo's
// own tests of the addon (tests/, run by Odoo with --test-enable on the host's Odoo, as its user,
// with its configuration), then the path through svc: setup_odoo ships the addon, build installs it
// in the template, a trial deployed from it enforces its package. The customer adds one user over
// JSON-RPC (accepted) and a second (refused, naming the limit); PATCH user_limit raises the limit
// and the second is accepted at once; an attachment is refused while storage is full; the web
// client's session carries the trial's days left; suspension answers a page and RPC an error, and
// reactivation lifts it. Then what a tenant's administrator tried over JSON-RPC: users made internal
// through res.groups or hidden by share, attachments claiming an exemption while storage is full,
// a schema shadowing the parameters during a suspension. Odoo ports 18400-18499 (50 per tarball).
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { chromium } from 'playwright-core';
import { describe, expect, test } from 'vitest';
import { request, waitForJob } from '../test/helpers/api.js';
import { queryIn } from '../test/helpers/odoo-template.js';
import { adminQuery, dropDatabase } from '../test/helpers/pg.js';
import { textOf, useSmtpServer } from '../test/helpers/smtp.js';
import { jsonRpc, odooGet, odooSources, useOdooFixture } from './odoo-fixture.js';
import { useOdooHost } from './odoo-host.js';

const run = promisify(execFile);
const sources = odooSources();
const smtp = useSmtpServer();
const f = useOdooFixture({
  get SMTP_URL() {
    return smtp.url;
  },
  SUBSCRIPTION_URL: 'https://{database_name}.odoo.test',
} as Record<string, string>);

const GIB = 1024 ** 3;
/** Where the browser test leaves its screenshots (the ones in docs/images come from here); unset: none. */
const SHOTS = process.env.SVC_SCREENSHOTS;
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];

/** An XML-RPC request body (strings, integers and arrays are all these calls need). */
function xmlrpcCall(method: string, params: unknown[]): string {
  const value = (v: unknown): string =>
    typeof v === 'number'
      ? `<int>${v}</int>`
      : Array.isArray(v)
        ? `<array><data>${v.map((x) => `<value>${value(x)}</value>`).join('')}</data></array>`
        : `<string>${String(v).replaceAll('&', '&amp;').replaceAll('<', '&lt;')}</string>`;
  const args = params.map((p) => `<param><value>${value(p)}</value></param>`).join('');
  return `<?xml version="1.0"?><methodCall><methodName>${method}</methodName><params>${args}</params></methodCall>`;
}

/** The result of a JSON-RPC call, or its error's message. */
async function rpc(port: number, service: string, method: string, args: unknown[]) {
  const res = await jsonRpc(port, service, method, args);
  const body = JSON.parse(res.body) as { result?: unknown; error?: { data?: { message?: string }; message?: string } };
  return body.error ? { error: body.error.data?.message ?? body.error.message ?? res.body } : { result: body.result };
}

describe.each(sources.map((s, i) => ({ ...s, port: 18400 + 50 * i })))('svc_instance on Odoo $name', (src) => {
  // The host and its template (filled in beforeAll), then the trial the tests share.
  const made = Object.assign(useOdooHost(f, src, { name: 'addon', prefix: 'svc_odoo_a' }), {
    subscription: 0,
    database: '',
    email: '',
    password: '',
  });

  test('setup_odoo ships the addon and build installs it in the template', async () => {
    expect(made.built.result).toMatchObject({ modules: ['base', 'svc_instance', 'web'] });
    expect(await queryIn(made.templateDb, "SELECT state FROM ir_module_module WHERE name = 'svc_instance'")).toEqual([
      { state: 'installed' },
    ]);
  });

  test("Odoo's own tests of the addon pass", async () => {
    // Odoo's own tests, in a database of their own, by the host's Odoo as its user with its configuration.
    const server = await f.server(made.host);
    const odoo = `${f.base}/versions/${src.name}-addon/odoo-bin`;
    const testDb = `svc_odoo_a_test${src.series}_${Date.now().toString(36)}`;
    const odooRun = (args: string[]) =>
      run(
        'setpriv',
        [
          '--reuid=odoo',
          '--regid=odoo',
          '--init-groups',
          'env',
          `HOME=${f.base}/data`,
          '/usr/bin/python3',
          odoo,
          '-c',
          `${f.base}/config/odoo-${src.port}.conf`,
          '-d',
          testDb,
          '--workers=0',
          '--max-cron-threads=0',
          '--stop-after-init',
          ...args,
        ],
        { cwd: `${f.base}/versions/${src.name}-addon`, maxBuffer: 64 * 1024 * 1024, timeout: 10 * 60_000 },
      ).catch((err: { stdout?: string; stderr?: string; message: string }) => ({
        stdout: err.stdout ?? '',
        stderr: `${err.stderr ?? ''}\n${err.message}`,
      }));
    try {
      // A copy of the template (the addon installed), updated with the tests enabled: no second base install.
      await adminQuery(`CREATE DATABASE "${testDb}" OWNER "${server.odoo_db_user}" TEMPLATE "${made.templateDb}"`);
      // With its filestore, as a deployment copies it: the template's asset bundles are files there.
      await run('cp', ['-a', `${f.base}/data/filestore/${made.templateDb}`, `${f.base}/data/filestore/${testDb}`]);
      const tests = await odooRun([
        '-u',
        'svc_instance',
        '--test-enable',
        '--test-tags',
        '/svc_instance',
        `--db-filter=^${testDb}$`,
        `--http-port=${src.port + 20}`,
        `--gevent-port=${src.port + 23}`,
      ]);
      const out = `${tests.stdout}\n${tests.stderr}`;
      const summary = /(\d+) failed, (\d+) error\(s\) of (\d+) tests/.exec(out);
      expect(summary, out.slice(-5000)).not.toBeNull();
      // Odoo names each failing test on a line of its own, with its traceback after it.
      const failures = out
        .split('\n')
        .filter((l) => / (FAIL|ERROR): /.test(l) || /^(AssertionError|Traceback| {2}File .*svc_instance)/.test(l));
      expect({ failed: summary![1], errors: summary![2] }, `${failures.join('\n')}\n${out.slice(-4000)}`).toEqual({
        failed: '0',
        errors: '0',
      });
      expect(Number(summary![3])).toBeGreaterThanOrEqual(20);
    } finally {
      await dropDatabase(testDb);
      await run('rm', ['-rf', `${f.base}/data/filestore/${testDb}`]);
    }
    expect(server.odoo_state).toBe('running');
  });

  test('a trial deployed from it enforces its package; svc raises a limit at once, suspends and reactivates it', async () => {
    // Whom customers contact: written into the instance (svc.contact), named by the addon's messages.
    const contact = await request(f.t.app, f.t.as.admin, {
      method: 'PATCH',
      url: '/api/v1/settings',
      payload: { support_contact: 'help@example.com' },
    });
    expect(contact.statusCode, contact.body).toBe(200);
    const email = `addon-${src.series}-${Date.now()}@example.com`;
    const partner = await request(f.t.app, f.t.as.operator, { method: 'POST', url: '/api/v1/partners', payload: { name: 'Jane', email } });
    const database = `svc_odoo_a_c${src.series}_${Date.now().toString(36)}`;
    const created = await request(f.t.app, f.t.as.operator, {
      method: 'POST',
      url: '/api/v1/subscriptions',
      payload: {
        name: 'Trial',
        partner_id: partner.json().id,
        database_template_id: made.templateId,
        database_name: database,
        is_trial: true,
        trial_end_date: new Date(Date.now() + 10 * 86_400_000 + 3_600_000).toISOString(),
        user_limit: 2,
        storage_limit_gb: 1,
        model_limits: { 'res.partner.category': 1 },
      },
    });
    expect(created.statusCode, created.body).toBe(201);
    const id = created.json().id as number;
    const act = (name: string) => request(f.t.app, f.t.as.operator, { method: 'POST', url: `/api/v1/subscriptions/${id}/actions/${name}` });
    expect((await act('confirm')).statusCode).toBe(200);
    const job = await waitForJob(f.t.app, f.t.as.user, (await act('deploy')).json().job_id, 10 * 60_000);
    expect(job.state, job.error).toBe('completed');
    const text = textOf(await smtp.waitFor(email));
    const password = /Password: +(\S+)/.exec(text)![1]!;

    Object.assign(made, { subscription: id, database, email, password });
    const uid = (await rpc(src.port, 'common', 'authenticate', [database, email, password, {}])).result as number;
    expect(uid).toBe(2);
    const call = (model: string, method: string, args: unknown[], kwargs: object = {}) =>
      rpc(src.port, 'object', 'execute_kw', [database, uid, password, model, method, args, kwargs]);
    const newUser = (login: string) => call('res.users', 'create', [{ name: login, login }]);

    // user_limit 2: the customer (the template's administrator) and one more.
    expect(await newUser('second@example.com')).toMatchObject({ result: expect.any(Number) });
    const refused = await newUser('third@example.com');
    expect(refused.error).toContain('Your package allows 2 internal users; this would make 3');
    expect(refused.error).toContain('contact help@example.com');
    // The parameters are the operator's: the customer reads them, cannot change them.
    expect(await call('ir.config_parameter', 'get_param', ['svc.user_limit'])).toEqual({ result: '2' });
    expect((await call('ir.config_parameter', 'set_param', ['svc.user_limit', '50'])).error).toContain('set by your provider');

    // A model limit: one contact tag, not two.
    expect(await call('res.partner.category', 'create', [{ name: 'First tag' }])).toMatchObject({ result: expect.any(Number) });
    expect((await call('res.partner.category', 'create', [{ name: 'Second tag' }])).error).toContain(
      'Your package allows 1 records of Partner Tags (res.partner.category); this would make 2',
    );

    // Raised through svc: sync_instance writes it, and the next call is allowed.
    const patched = await request(f.t.app, f.t.as.operator, {
      method: 'PATCH',
      url: `/api/v1/subscriptions/${id}`,
      payload: { user_limit: 3 },
    });
    expect(patched.statusCode, patched.body).toBe(200);
    await expect
      .poll(async () => (await queryIn(database, "SELECT value FROM ir_config_parameter WHERE key = 'svc.user_limit'"))[0]?.value, {
        timeout: 60_000,
      })
      .toBe('3');
    expect(await newUser('third@example.com')).toMatchObject({ result: expect.any(Number) });

    // Storage at its limit (as the usage round would write it): a new file is refused, reading goes on.
    await queryIn(database, "UPDATE ir_config_parameter SET value = $1 WHERE key = 'svc.storage_used_bytes'", [String(GIB)]);
    await queryIn(
      database,
      "INSERT INTO ir_config_parameter (key, value) SELECT 'svc.storage_used_bytes', $1 WHERE NOT EXISTS (SELECT 1 FROM ir_config_parameter WHERE key = 'svc.storage_used_bytes')",
      [String(GIB)],
    );
    const file = await call('ir.attachment', 'create', [{ name: 'a.txt', datas: Buffer.from('hello').toString('base64') }]);
    expect(file.error).toContain('Storage is full');
    expect(await call('ir.attachment', 'search_count', [[]])).toMatchObject({ result: expect.any(Number) });

    // The web client's session: the trial's days left and its end in the user's language.
    const headers = { 'x-forwarded-host': `${database}.odoo.test`, 'x-forwarded-proto': 'https', 'content-type': 'application/json' };
    const session = await odooGet(src.port, '/web/session/authenticate', {
      method: 'POST',
      headers,
      body: JSON.stringify({ jsonrpc: '2.0', method: 'call', id: 1, params: { db: database, login: email, password } }),
    });
    const info = (await session.json()) as { result?: { svc_trial?: { days_left: number; end_date: string } }; error?: unknown };
    const trial = info.result?.svc_trial;
    expect(trial, JSON.stringify(info)).toMatchObject({ end_date: expect.any(String) });
    // 10 days and an hour from now: 10 days left, or 11 when the end falls after midnight.
    expect([10, 11]).toContain(trial!.days_left);

    // Suspended: a page for the web, an error for RPC; reactivated: as before.
    expect((await act('suspend')).statusCode).toBe(200);
    const page = await odooGet(src.port, '/web/login', {
      headers: { 'x-forwarded-host': `${database}.odoo.test`, 'x-forwarded-proto': 'https' },
    });
    expect(page.status).toBe(503);
    const html = await page.text();
    expect(html).toContain('This Odoo instance is suspended');
    expect(html).toContain('Its provider suspended it');
    expect(html).toContain('To reactivate it, contact help@example.com.');
    expect((await rpc(src.port, 'common', 'authenticate', [database, email, password, {}])).error).toContain(
      'This Odoo instance is suspended',
    );
    expect((await call('res.partner', 'search_count', [[]])).error).toContain('This Odoo instance is suspended');
    // XML-RPC at the tenant's own address answers an XML-RPC fault, not the page.
    const xml = await odooGet(src.port, '/xmlrpc/2/object', {
      method: 'POST',
      headers: { 'x-forwarded-host': `${database}.odoo.test`, 'content-type': 'text/xml' },
      body: xmlrpcCall('execute_kw', [database, uid, password, 'res.partner', 'search_count', [[]]]),
    });
    const fault = await xml.text();
    expect(xml.status, fault).toBe(200);
    expect(fault).toContain('<fault>');
    expect(fault).toContain('This Odoo instance is suspended');
    expect((await act('reactivate')).statusCode).toBe(200);
    expect(await call('res.partner', 'search_count', [[]])).toMatchObject({ result: expect.any(Number) });
    const login = await odooGet(src.port, '/web/login', {
      headers: { 'x-forwarded-host': `${database}.odoo.test`, 'x-forwarded-proto': 'https' },
    });
    expect(login.status).toBe(200);
  });

  test("in a browser: the trial's badge in the web client, a refused user in the form, the suspended page", async () => {
    const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: CHROMIUM_ARGS });
    const act = (name: string) =>
      request(f.t.app, f.t.as.operator, { method: 'POST', url: `/api/v1/subscriptions/${made.subscription}/actions/${name}` });
    try {
      const context = await browser.newContext({
        extraHTTPHeaders: { 'x-forwarded-host': `${made.database}.odoo.test` },
        viewport: { width: 1280, height: 720 },
        locale: 'en-US',
      });
      const page = await context.newPage();
      const odoo = `http://127.0.0.1:${src.port}`;
      await page.goto(`${odoo}/web/login`);
      await page.fill('input[name="login"]', made.email);
      await page.fill('input[name="password"]', made.password);
      await page.click('button[type="submit"]');
      const badge = page.locator('.o_svc_trial');
      await badge.waitFor({ timeout: 120_000 });
      expect(await badge.textContent()).toMatch(/Trial: 1[01] days left/);
      expect(await badge.getAttribute('title')).toMatch(/^Your trial ends on \w+ \d+, \d{4}\.$/);
      if (SHOTS) await page.screenshot({ path: `${SHOTS}/odoo-addon-trial-${src.series}.png` });

      // A fourth internal user (user_limit is 3 now) through the users' form: Odoo's error dialog.
      await page.goto(`${odoo}/odoo/action-base.action_res_users/new`);
      await page.locator('.o_field_widget[name="name"] input, .o_field_widget[name="name"] textarea').first().fill('Fourth colleague');
      await page.locator('.o_field_widget[name="login"] input').fill('fourth@example.com');
      await page.locator('.o_form_button_save').click();
      const dialog = page.locator('.modal-dialog');
      await dialog.waitFor({ timeout: 60_000 });
      expect(await dialog.textContent()).toContain('Your package allows 3 internal users; this would make 4');
      if (SHOTS) await page.screenshot({ path: `${SHOTS}/odoo-addon-user-limit-${src.series}.png` });

      expect((await act('suspend')).statusCode).toBe(200);
      const suspended = await page.goto(`${odoo}/odoo`);
      expect(suspended?.status()).toBe(503);
      expect(await page.locator('h1').textContent()).toBe('This Odoo instance is suspended');
      if (SHOTS) await page.screenshot({ path: `${SHOTS}/odoo-addon-suspended-${src.series}.png` });
    } finally {
      await act('reactivate');
      await browser.close();
    }
  });

  test("as the tenant's administrator over JSON-RPC: users made internal through groups or hidden by share, forged storage exemptions, a schema shadowing the parameters", async () => {
    const { database, email, password } = made;
    const uid = (await rpc(src.port, 'common', 'authenticate', [database, email, password, {}])).result as number;
    const call = (model: string, method: string, args: unknown[], kwargs: object = {}) =>
      rpc(src.port, 'object', 'execute_kw', [database, uid, password, model, method, args, kwargs]);
    const members = src.series >= 19 ? 'user_ids' : 'users';
    const groupsOfUser = src.series >= 19 ? 'group_ids' : 'groups_id';
    const groupUserRef = [
      ['module', '=', 'base'],
      ['name', '=', 'group_user'],
    ];
    const refs = (await call('ir.model.data', 'search_read', [groupUserRef], { fields: ['res_id'] })).result as { res_id: number }[];
    const groupUser = refs[0]!.res_id;
    const full = 'Your package allows 3 internal users; this would make 4';

    // 3 internal users of 3 (the browser test's fourth was refused). A user in no group is not internal...
    const loose = (await call('res.users', 'create', [{ name: 'Loose', login: 'loose@example.com', [groupsOfUser]: [[6, 0, []]] }]))
      .result as number;
    expect(loose).toEqual(expect.any(Number));
    // ... and is not made one through the groups: the internal group's users, a new group with users implying it,
    // an existing group of the user made to imply it.
    expect.soft((await call('res.groups', 'write', [[groupUser], { [members]: [[4, loose]] }])).error).toContain(full);
    expect
      .soft((await call('res.groups', 'create', [{ name: 'Insiders', [members]: [[4, loose]], implied_ids: [[4, groupUser]] }])).error)
      .toContain(full);
    const own = (await call('res.groups', 'create', [{ name: 'Loose friends', [members]: [[4, loose]] }])).result as number;
    expect(own).toEqual(expect.any(Number));
    expect.soft((await call('res.groups', 'write', [[own], { implied_ids: [[4, groupUser]] }])).error).toContain(full);
    // share written True on an internal user (a colleague, the customer's own system user): refused.
    const third = ((await call('res.users', 'search', [[['login', '=', 'third@example.com']]])).result as number[])[0]!;
    for (const id of [third, uid]) {
      expect
        .soft((await call('res.users', 'write', [[id], { share: true }])).error)
        .toContain('Whether a user is internal follows its groups');
    }
    expect.soft((await call('res.users', 'create', [{ name: 'Fifth', login: 'fifth@example.com' }])).error).toContain(full);

    // Storage full: no file is stored on the caller's word that Odoo stores it.
    await queryIn(database, "UPDATE ir_config_parameter SET value = $1 WHERE key = 'svc.storage_used_bytes'", [String(GIB)]);
    const partnerId = ((await call('res.users', 'read', [[uid], ['partner_id']])).result as { partner_id: [number, string] }[])[0]!
      .partner_id[0];
    const datas = Buffer.alloc(4096, 7).toString('base64');
    for (const forged of [
      { res_model: 'res.partner', res_field: 'image_1920', res_id: partnerId },
      { url: '/web/assets/1/web.assets_web.min.js', res_model: 'ir.ui.view' },
      { res_model: 'ir.ui.view' },
    ]) {
      expect
        .soft((await call('ir.attachment', 'create', [{ name: 'big.bin', datas, ...forged }])).error, JSON.stringify(forged))
        .toContain('Storage is full');
    }
    // A record's picture through its own field still is (1x1 PNG).
    const png = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';
    expect(await call('res.partner', 'write', [[partnerId], { image_1920: png }])).toEqual({ result: true });

    // A code server action makes a schema named after the role it connects as, with a view hiding svc.*
    // (first in Odoo's default search_path); svc then suspends the instance: it stays suspended.
    const modelId = ((await call('ir.model', 'search', [[['model', '=', 'res.partner']]])).result as number[])[0]!;
    const code = `env.cr.execute("""DO $$ BEGIN
      EXECUTE format('CREATE SCHEMA %I', current_user);
      EXECUTE format('CREATE VIEW %I.ir_config_parameter AS SELECT * FROM public.ir_config_parameter WHERE left(key, 4) <> ''svc.''', current_user);
    END $$""")`;
    const action = (await call('ir.actions.server', 'create', [{ name: 'Shadow', model_id: modelId, state: 'code', code }]))
      .result as number;
    expect(action).toEqual(expect.any(Number));
    const ran = await call('ir.actions.server', 'run', [[action]]);
    expect(ran.error).toBeUndefined();
    const shadows = async () =>
      (
        await queryIn<{ name: string }>(
          database,
          `SELECT nspname::text AS name FROM pg_namespace WHERE nspname NOT IN ('public', 'pg_catalog', 'information_schema', 'pg_toast')
             AND nspname !~ '^pg_(toast_)?temp_[0-9]+$'`,
        )
      ).map((r) => r.name);
    expect(await shadows()).toHaveLength(1);
    const act = (name: string) =>
      request(f.t.app, f.t.as.operator, { method: 'POST', url: `/api/v1/subscriptions/${made.subscription}/actions/${name}` });
    try {
      expect((await act('suspend')).statusCode).toBe(200);
      const page = await odooGet(src.port, '/web/login', {
        headers: { 'x-forwarded-host': `${database}.odoo.test`, 'x-forwarded-proto': 'https' },
      });
      expect.soft(page.status).toBe(503);
      expect((await call('res.partner', 'search_count', [[]])).error).toContain('This Odoo instance is suspended');
      expect((await rpc(src.port, 'common', 'authenticate', [database, email, password, {}])).error).toContain(
        'This Odoo instance is suspended',
      );
    } finally {
      expect((await act('reactivate')).statusCode).toBe(200);
    }
    // The usage round reports the schema to the operator.
    const usage = await request(f.t.app, f.t.as.operator, { method: 'POST', url: '/api/v1/settings/actions/collect_usage' });
    const round = await waitForJob(f.t.app, f.t.as.user, usage.json().job_id, 5 * 60_000);
    expect(round.state, round.error).toBe('completed');
    expect(round.result.other_schemas[made.subscription]).toEqual(await shadows());
    for (const name of await shadows()) await queryIn(database, `DROP SCHEMA "${name}" CASCADE`);
  });
});
