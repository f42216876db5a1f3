// The trial straight into Odoo, on the real Odoo, for each tarball of ODOO_SOURCE: in Chromium a
// visitor fills the trial form, enters the mailed code and ends up inside their own Odoo's web
// client, signed in as the customer, without typing a password, through the instance's own address
// (SUBSCRIPTION_URL: <database>.localhost on a relay in front of the host's Odoo, whose dbfilter
// ^%d$ finds the database by that name, as the proxy's address would). The link used twice,
// expired or altered shows Odoo's login page; the token is in no line of Odoo's log. Odoo ports
// 20000-20199: 20000 + 100 per tarball, the relay on 20199.
import { readFile } from 'node:fs/promises';
import net from 'node:net';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { queryIn } from '../test/helpers/odoo-template.js';
import { codeFrom, useSmtpServer } from '../test/helpers/smtp.js';
import { odooSources, useOdooFixture } from './odoo-fixture.js';
import { useOdooHost } from './odoo-host.js';

const sources = odooSources();
const RELAY_PORT = 20199;
const smtp = useSmtpServer();
const f = useOdooFixture({
  get SMTP_URL() {
    return smtp.url;
  },
  SUBSCRIPTION_URL: `http://{database_name}.localhost:${RELAY_PORT}`,
} as Record<string, string>);
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];

/** The instances' address: a relay to the Odoo of the tarball under test. */
const relay = { target: 0, server: null as net.Server | null, sockets: new Set<net.Socket>() };
let browser: Browser;
let baseUrl: string;

beforeAll(async () => {
  relay.server = net.createServer((client) => {
    const upstream = net.connect(relay.target, '127.0.0.1');
    for (const s of [client, upstream]) {
      relay.sockets.add(s);
      s.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
      s.on('close', () => relay.sockets.delete(s));
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => relay.server!.listen(RELAY_PORT, '127.0.0.1', resolve));
  baseUrl = await f.t.app.listen({ port: 0, host: '127.0.0.1' });
  browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: CHROMIUM_ARGS });
});
afterAll(async () => {
  await browser?.close();
  for (const s of relay.sockets) s.destroy();
  await new Promise<void>((resolve) => (relay.server ? relay.server.close(() => resolve()) : resolve()));
});

/** The web client is there and its session is the customer's (asked from inside the page). */
async function signedInAs(page: Page) {
  await page.locator('.o_main_navbar').waitFor({ timeout: 180_000 });
  return page.evaluate(async () => {
    const res = await fetch('/web/session/get_session_info', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', method: 'call', id: 1, params: {} }),
    });
    const { result } = (await res.json()) as { result: { uid: number; username: string } };
    return { uid: result.uid, login: result.username };
  });
}

/** Posts `token` to the instance's sign-in route from a page of its own (a browser with no session there). */
async function postToken(context: BrowserContext, action: string, token: string) {
  const page = await context.newPage();
  await page.goto(`${baseUrl}/healthz`);
  await page.setContent(`<form method="post" action="${action}"><input name="token" value="${token}"><button>go</button></form>`);
  await Promise.all([page.waitForURL(/\/web\/login/, { timeout: 60_000 }).catch(() => {}), page.click('button')]);
  return page;
}

/** Odoo's login page, and nothing else: its form, no web client. */
async function expectLoginPage(page: Page) {
  // Attached, not visible: Odoo 18's login page without JavaScript can lay its field out hidden.
  await page.locator('input[name="login"]').waitFor({ state: 'attached', timeout: 60_000 });
  expect(new URL(page.url()).pathname).toBe('/web/login');
  expect(await page.locator('.o_main_navbar').count()).toBe(0);
}

describe.each(sources.map((s, i) => ({ ...s, port: 20000 + 100 * i })))('the trial straight into Odoo $name', (src) => {
  const made = useOdooHost(f, src, { name: 'straight', prefix: 'svc_odoo_s' });
  let pkg: { url_string: string };
  const email = `straight-${src.series}-${Date.now()}@example.com`;
  const tokens: string[] = [];
  /** The visitor's browser and the instance, as the first test leaves them. */
  let visitor: BrowserContext;
  let database: string;
  let origin: string;
  let ready: Page;
  let expiring: string | null;
  let fresh: string;
  let altered: string;
  const contexts: BrowserContext[] = [];
  const context = async (options?: Parameters<Browser['newContext']>[0]) => {
    const opened = await browser.newContext(options);
    contexts.push(opened);
    return opened;
  };

  beforeAll(async () => {
    relay.target = src.port;
    pkg = await f.t.ctx.db.trialPackage.create({
      data: {
        name: `Straight ${src.series}`,
        url_string: `straight-${src.series}-${Date.now().toString(36)}`,
        packages: [],
        auto_run_subscription: true,
        database_template_id: made.templateId,
      },
    });
  });
  afterAll(async () => {
    await Promise.all(contexts.map((c) => c.close()));
    // The next tarball's Odoo takes the relay's place.
    if (made.host) expect((await f.runJob(made.host, 'stop_odoo')).state).toBe('completed');
  });

  test("form, mailed code, and inside the web client at the instance's own address, signed in as the customer", async () => {
    visitor = await context();
    const page = await visitor.newPage();
    page.on('request', (r) => {
      if (r.method() === 'POST' && new URL(r.url()).pathname === '/svc/sign_in')
        tokens.push(new URLSearchParams(r.postData() ?? '').get('token')!);
    });
    await page.goto(`${baseUrl}/saas/trial/${pkg.url_string}`);
    await page.getByLabel('Your name').fill('Jane Doe');
    await page.getByLabel('Company name').fill(`Straight ${src.series} ${Date.now().toString(36)}`);
    await page.getByLabel('E-mail address').fill(email);
    await page.getByLabel('Mobile number').fill('+49 170 1234567');
    await page.getByLabel('Company size').selectOption('1-5');
    await page.getByRole('button', { name: 'Send me the code' }).click();
    await page.getByLabel('Verification code').fill(codeFrom(await smtp.waitFor(email)));
    await page.getByRole('button', { name: 'Confirm' }).click();

    // Progress, then the instance's own address, the web client, the customer's session.
    await page.waitForURL(/\.localhost:20199\/odoo/, { timeout: 180_000 });
    const request_ = await f.t.ctx.db.trialRequest.findFirstOrThrow({ where: { email }, include: { subscription: true } });
    database = request_.subscription!.database_name!;
    origin = `http://${database}.localhost:${RELAY_PORT}`;
    expect(new URL(page.url()).origin).toBe(origin);
    expect(await signedInAs(page)).toEqual({ uid: 2, login: email });
    expect(tokens).toHaveLength(1);
    expect(await queryIn(database, 'SELECT count(*)::int AS n FROM svc_sign_in_link')).toEqual([{ n: 0 }]);
  });

  test('the link used twice: another browser posting the same token gets the login page', async () => {
    await expectLoginPage(await postToken(await context(), `${origin}/svc/sign_in`, tokens[0]!));
  });

  test('a fresh link read from the page without JavaScript (same visitor cookie), expired before it is used, shows the login page', async () => {
    const noScript = await context({ javaScriptEnabled: false });
    await noScript.addCookies(await visitor.cookies(`${baseUrl}/saas/trial/progress`));
    ready = await noScript.newPage();
    await ready.goto(`${baseUrl}/saas/trial/progress`);
    expiring = await ready.locator('input[name="token"]').getAttribute('value');
    expect(await queryIn(database, 'SELECT count(*)::int AS n FROM svc_sign_in_link')).toEqual([{ n: 1 }]);
    await queryIn(database, "UPDATE svc_sign_in_link SET expires_at = (now() AT TIME ZONE 'UTC') - interval '1 second'");
    await ready.getByRole('button', { name: 'Open your Odoo' }).click();
    await expectLoginPage(ready);
    expect(expiring).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  test('an altered link shows the login page, and the real token still works afterwards (the button of the page)', async () => {
    await ready.goto(`${baseUrl}/saas/trial/progress`);
    fresh = (await ready.locator('input[name="token"]').getAttribute('value'))!;
    altered = (fresh[0] === 'A' ? 'B' : 'A') + fresh.slice(1);
    await expectLoginPage(await postToken(await context(), `${origin}/svc/sign_in`, altered));
    await ready.getByRole('button', { name: 'Open your Odoo' }).click();
    await ready.waitForURL(/\/odoo/, { timeout: 60_000 });
    expect(new URL(ready.url()).pathname).toMatch(/^\/odoo/);
  });

  test("no token in Odoo's log (nor in its access log lines: the token is in the body)", async () => {
    const log = await readFile(`${f.base}/logs/odoo-${src.port}.log`, 'utf8');
    for (const token of [tokens[0]!, expiring!, fresh, altered]) expect(log).not.toContain(token);
    expect(log).toContain('svc: sign-in link used for db:');
  });
});
