// The first screen of a new instance (issue 48, points 3 and 4), on the real Odoo: a template built
// by the host's Odoo carries the asset bundles of the first pages (ir.attachment rows and their
// files), a copy's filestore has those files, and the copy's first pages in Chromium (the login page,
// /odoo, /web) make no bundle again. The customer's password, hashed by svc with few rounds, signs
// in and stays as it is after the deployment's sign-in (svc's addon keeps it); a password the
// customer sets is hashed by Odoo with its own rounds. Ports 20400 (18.0) and 20500 (19.0).
import { existsSync } from 'node:fs';
import { chromium } from 'playwright-core';
import { describe, expect, test } from 'vitest';
import { request, waitForJob } from '../test/helpers/api.js';
import { credentialsIn } from '../test/helpers/customer-credentials.js';
import { queryIn } from '../test/helpers/odoo-template.js';
import { textOf, useSmtpServer } from '../test/helpers/smtp.js';
import { RANDOM_PASSWORD_ROUNDS } from '../src/instances/odoo-password.js';
import { jsonRpc, odooSources, packagesOf, rpcResult, useOdooFixture } from './odoo-fixture.js';

const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run'];
/** The bundles the first pages load (src/odoo/template-assets.py). */
const FIRST_PAGE_BUNDLES = [
  'bus.websocket_worker_assets.min.js',
  'web.assets_frontend.min.css',
  'web.assets_frontend_lazy.min.js',
  'web.assets_frontend_minimal.min.js',
  'web.assets_web.min.css',
  'web.assets_web.min.js',
  'web.assets_web_print.min.css',
];

const sources = odooSources();
const smtp = useSmtpServer();
const f = useOdooFixture({
  get SMTP_URL() {
    return smtp.url;
  },
  SUBSCRIPTION_URL: 'https://{database_name}.odoo.test',
} as Record<string, string>);

/** The asset bundles' attachments of a database: name, URL and stored file. */
const bundles = (database: string) =>
  queryIn<{ name: string; url: string; store_fname: string }>(
    database,
    "SELECT name, url, store_fname FROM ir_attachment WHERE url LIKE '/web/assets/%' ORDER BY name, id",
  );

describe.each(sources.map((s, i) => ({ ...s, port: 20400 + 100 * i })))('the first screen on Odoo $name', (src) => {
  test('a copy of the template serves its first pages with the bundles built with the template; the customer signs in with the mail', async () => {
    const version = await f.newVersion({
      name: `${src.name}-first`,
      source_url: `file://${src.file}`,
      source_sha256: src.sha256,
      os_packages: packagesOf(src.series),
      server_wide_modules: src.series >= 19 ? ['base', 'rpc', 'web'] : ['base', 'web'],
    });
    const host = await f.newHost();
    const setup = await f.runJob(host, 'setup_odoo', {
      odoo_version_id: version.id,
      postgresql_server_id: f.pgServerId,
      http_port: src.port,
      workers: 0,
      max_cron_threads: 0,
    });
    expect(setup.state, JSON.stringify(setup)).toBe('completed');
    const templateDb = `svc_odoo_fs_tpl${src.series}_${Date.now().toString(36)}`;
    const template = await request(f.t.app, f.t.as.operator, {
      method: 'POST',
      url: '/api/v1/database-templates',
      payload: {
        name: `Odoo ${src.name} first screen`,
        postgresql_server_id: f.pgServerId,
        template_db_name: templateDb,
        root_server_id: host,
      },
    });
    expect(template.statusCode, template.body).toBe(201);
    const built = await f.runJob(template.json().id, 'build', { modules: ['base'] }, 'database-templates');
    expect(built.state, JSON.stringify(built)).toBe('completed');

    // The template carries the first pages' bundles, each with its file.
    const inTemplate = await bundles(templateDb);
    expect([...new Set(inTemplate.map((b) => b.name))].sort()).toEqual(FIRST_PAGE_BUNDLES);
    for (const b of inTemplate) expect(existsSync(`${f.base}/data/filestore/${templateDb}/${b.store_fname}`), b.url).toBe(true);

    // A trial deployed from it: the bundles came with the copy, their files with its filestore.
    const database = `svc_odoo_fs_c${src.series}_${Date.now().toString(36)}`;
    const email = `first-${src.series}-${Date.now()}@example.com`;
    const partner = await request(f.t.app, f.t.as.operator, { method: 'POST', url: '/api/v1/partners', payload: { name: 'Jane', email } });
    const created = await request(f.t.app, f.t.as.operator, {
      method: 'POST',
      url: '/api/v1/subscriptions',
      payload: {
        name: 'Trial',
        partner_id: partner.json().id,
        database_template_id: template.json().id,
        database_name: database,
        is_trial: true,
        trial_end_date: new Date(Date.now() + 14 * 86_400_000).toISOString(),
      },
    });
    expect(created.statusCode, created.body).toBe(201);
    const id = created.json().id as number;
    const act = (name: string) => request(f.t.app, f.t.as.operator, { method: 'POST', url: `/api/v1/subscriptions/${id}/actions/${name}` });
    expect((await act('confirm')).statusCode).toBe(200);
    const job = await waitForJob(f.t.app, f.t.as.user, (await act('deploy')).json().job_id, 10 * 60_000);
    expect(job.state, job.error).toBe('completed');
    const before = await bundles(database);
    expect(before).toEqual(inTemplate);
    for (const b of before) expect(existsSync(`${f.base}/data/filestore/${database}/${b.store_fname}`), b.url).toBe(true);

    // The deployment signed in with the mailed password and left svc's hash as it was (no re-hash).
    const { login, password } = credentialsIn(textOf(await smtp.waitFor(email)));
    const hashOf = async () => (await queryIn<{ password: string }>(database, 'SELECT password FROM res_users WHERE id = 2'))[0]!.password;
    expect((await hashOf()).startsWith(`$pbkdf2-sha512$${RANDOM_PASSWORD_ROUNDS}$`)).toBe(true);

    // The customer's first pages in Chromium: the login page, /odoo, /web. No bundle is made again.
    const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: CHROMIUM_ARGS });
    try {
      const context = await browser.newContext({
        extraHTTPHeaders: { 'x-forwarded-host': `${database}.odoo.test` },
        viewport: { width: 1280, height: 720 },
        locale: 'en-US',
      });
      const page = await context.newPage();
      const odoo = `http://127.0.0.1:${src.port}`;
      const failedAssets: string[] = [];
      page.on('response', (r) => {
        if (r.url().includes('/web/assets/') && r.status() >= 400) failedAssets.push(`${r.status()} ${r.url()}`);
      });
      await page.goto(`${odoo}/web/login`);
      await page.fill('input[name="login"]', login);
      await page.fill('input[name="password"]', password);
      await page.click('button[type="submit"]');
      await page.locator('.o_web_client .o_main_navbar').waitFor({ timeout: 120_000 });
      await page.locator('.o_action_manager > .o_action, .o_action_manager > .o_view_controller').first().waitFor({ timeout: 120_000 });
      await page.goto(`${odoo}/web`);
      await page.locator('.o_web_client .o_main_navbar').waitFor({ timeout: 120_000 });
      await page.locator('.o_action_manager > .o_action, .o_action_manager > .o_view_controller').first().waitFor({ timeout: 120_000 });
      expect(failedAssets).toEqual([]);
    } finally {
      await browser.close();
    }
    expect(await bundles(database)).toEqual(before);
    expect((await hashOf()).startsWith(`$pbkdf2-sha512$${RANDOM_PASSWORD_ROUNDS}$`)).toBe(true);

    // A password the customer sets: Odoo's own hash (its rounds), and it signs in.
    const uid = rpcResult((await jsonRpc(src.port, 'common', 'authenticate', [database, login, password, {}])).body);
    expect(uid).toBe(2);
    const own = `Own-${Date.now()}-password`;
    const changed = await jsonRpc(src.port, 'object', 'execute_kw', [
      database,
      uid,
      password,
      'res.users',
      'change_password',
      [password, own],
    ]);
    expect(rpcResult(changed.body)).toBe(true);
    expect((await hashOf()).startsWith('$pbkdf2-sha512$600000$')).toBe(true);
    expect(rpcResult((await jsonRpc(src.port, 'common', 'authenticate', [database, login, own, {}])).body)).toBe(2);
    expect(rpcResult((await jsonRpc(src.port, 'common', 'authenticate', [database, login, password, {}])).body)).toBe(false);
  });
});
