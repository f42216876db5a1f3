// The first screen of a new instance (issue 48, points 3 and 4), on the real Odoo: a template built
// by the host's Odoo carries the asset bundles of the first pages (ir.attachment rows and their
// files), a copy's filestore has those files, and the copy's first pages in Chromium (the login page,
// /odoo, /web) make no bundle again. The customer's password, hashed by svc with few rounds, signs
// in and stays as it is after the deployment's sign-in (svc's addon keeps it); a password the
// customer sets is hashed by Odoo with its own rounds. The tests run on the host and template of
// odoo-deployment.test.ts (the same app settings): one setup and one build less per version.
import { existsSync } from 'node:fs';
import { chromium } from 'playwright-core';
import { expect, test } from 'vitest';
import { credentialsIn } from '../test/helpers/customer-credentials.js';
import { queryIn } from '../test/helpers/odoo-template.js';
import { type TestSmtpServer, textOf } from '../test/helpers/smtp.js';
import { RANDOM_PASSWORD_ROUNDS } from '../src/instances/odoo-password.js';
import { jsonRpc, type OdooFixture, rpcResult } from './odoo-fixture.js';
import { deploySubscription, type OdooHost, type PortedSource } from './odoo-host.js';

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

/** The asset bundles' attachments of a database: name, URL and stored file. */
const bundles = (database: string) =>
  queryIn<{ name: string; url: string; store_fname: string }>(
    database,
    "SELECT name, url, store_fname FROM ir_attachment WHERE url LIKE '/web/assets/%' ORDER BY name, id",
  );

/** The first screen's tests, on the suite's host `made` (set up, its template built) of `src`. */
export function firstScreenTests(f: OdooFixture, smtp: TestSmtpServer, src: PortedSource, made: OdooHost) {
  const database = `svc_odoo_fs_c${src.series}_${Date.now().toString(36)}`;
  const email = `first-${src.series}-${Date.now()}@example.com`;
  /** The template's bundles and then the copy's, as the first tests found them. */
  let inTemplate: Awaited<ReturnType<typeof bundles>>;
  let before: Awaited<ReturnType<typeof bundles>>;
  const hashOf = async () => (await queryIn<{ password: string }>(database, 'SELECT password FROM res_users WHERE id = 2'))[0]!.password;
  const mailed = async () => credentialsIn(textOf(await smtp.waitFor(email)));

  test("the template carries the first pages' bundles, each with its file", async () => {
    inTemplate = await bundles(made.templateDb);
    expect([...new Set(inTemplate.map((b) => b.name))].sort()).toEqual(FIRST_PAGE_BUNDLES);
    for (const b of inTemplate) expect(existsSync(`${f.base}/data/filestore/${made.templateDb}/${b.store_fname}`), b.url).toBe(true);
  });

  test('a trial deployed from it has the bundles with the copy, their files with its filestore', async () => {
    const { job } = await deploySubscription(f, { templateId: made.templateId, database, email });
    expect(job.state, job.error).toBe('completed');
    before = await bundles(database);
    expect(before).toEqual(inTemplate);
    for (const b of before) expect(existsSync(`${f.base}/data/filestore/${database}/${b.store_fname}`), b.url).toBe(true);
  });

  test("the deployment signed in with the mailed password and left svc's hash as it was (no re-hash)", async () => {
    await mailed();
    expect((await hashOf()).startsWith(`$pbkdf2-sha512$${RANDOM_PASSWORD_ROUNDS}$`)).toBe(true);
  });

  test("the customer's first pages in Chromium (the login page, /odoo, /web) make no bundle again nor re-hash the password", async () => {
    const { login, password } = await mailed();
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
  });

  test("a password the customer sets: Odoo's own hash (its rounds), and it signs in", async () => {
    const { login, password } = await mailed();
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
}
