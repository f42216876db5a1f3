// The trial straight into the instance, without Odoo (real PostgreSQL, Redis, workers, SMTP server
// and Chromium): after the correct code the page shows the progress (refreshing itself without
// JavaScript, asking the status endpoint with it), then posts a one-time sign-in link to the
// instance's own address. The instance is the stand-in template's copy, with the addon's table
// svc_sign_in_link as the addon's model makes it; its address is a small HTTP server on loopback
// (Chromium resolves *.localhost there) that records what the page posts. Only the token's hash
// lands in the instance, never the token in svc's database; the addon's own statement
// (controllers/sign_in.py) consumes a row once and not after its expiry. A failed deployment shows
// a page saying so, and the same page takes the visitor in once the operator deployed it again.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request, waitForJob } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';
import { act, useLifecycle } from './helpers/lifecycle.js';
import { queryIn, tenantUrl } from './helpers/odoo-template.js';
import { adminQuery } from './helpers/pg.js';
import { codeFrom, useSmtpServer } from './helpers/smtp.js';
import { createTrialPackage, injectTransport, Visitor } from './helpers/trial.js';

const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];

/** The instances' address: a stand-in that records what reaches /svc/sign_in. */
const posted: { method: string; url: string; host: string; body: string }[] = [];
const instance = http.createServer((req, res) => {
  let body = '';
  req.on('data', (chunk) => (body += chunk));
  req.on('end', () => {
    posted.push({ method: req.method!, url: req.url!, host: req.headers.host ?? '', body });
    res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>Inside the instance</title><h1>Inside</h1>');
  });
});
let instancePort = 0;
beforeAll(async () => {
  await new Promise<void>((resolve) => instance.listen(0, '127.0.0.1', resolve));
  instancePort = (instance.address() as AddressInfo).port;
});
afterAll(() => new Promise<void>((resolve) => instance.close(() => resolve())));

const smtp = useSmtpServer();
const t = useTestApp({
  workers: true,
  env: () => ({ SMTP_URL: smtp.url, SUBSCRIPTION_URL: `http://{database_name}.localhost:${instancePort}` }),
});
const fx = useLifecycle(t);
let browser: Browser;
let baseUrl: string;
let n = 0;

/** The addon's table as its model (models/svc_sign_in_link.py) makes it, owned by the tenant role like Odoo's. */
const SIGN_IN_TABLE = `CREATE TABLE svc_sign_in_link (id serial PRIMARY KEY, token_hash varchar NOT NULL,
  user_id int NOT NULL REFERENCES res_users(id) ON DELETE CASCADE, expires_at timestamp NOT NULL);
  CREATE INDEX svc_sign_in_link__token_hash_index ON svc_sign_in_link (token_hash)`;

/** The addon's consuming statement, read from the addon (each of its named %(name)s parameters as $n, in order of first use). */
const CONSUME = (() => {
  const source = readFileSync(new URL('../odoo-addons/svc_instance/controllers/sign_in.py', import.meta.url), 'utf8');
  const sql = /"""(DELETE FROM public\.svc_sign_in_link[\s\S]*?)"""/.exec(source)![1]!;
  const names: string[] = [];
  return sql.replace(/%\((\w+)\)s/g, (_, name: string) => {
    if (!names.includes(name)) names.push(name);
    return `$${names.indexOf(name) + 1}`;
  });
})();

beforeAll(async () => {
  const client = new pg.Client({ connectionString: tenantUrl(fx.templateDb) });
  await client.connect();
  await client.query(SIGN_IN_TABLE);
  await client.end();
  baseUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
  browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: CHROMIUM_ARGS });
});
afterAll(async () => {
  await browser?.close();
});

const autoPackage = () => createTrialPackage(t.ctx, { auto_run_subscription: true, database_template_id: fx.templateId });
const company = () => `${t.ctx.dbName} Straight ${++n}`;
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

/** Signs up through the pages (no browser): the visitor and the page that answered the correct code. */
async function verified(packageId: number, email = `straight-${++n}-${Date.now()}@example.com`) {
  const visitor = new Visitor(injectTransport(t.app));
  const code = await visitor.submit(email, packageId, { company_name: company() });
  expect(code.status).toBe(200);
  const page = await visitor.verify(code.token!, codeFrom(await smtp.waitFor(email)));
  return { visitor, page, email };
}

async function stateOf(visitor: Visitor) {
  const res = await visitor.open('/saas/trial/progress/status');
  return { status: res.status, ...(JSON.parse(res.html) as { state: string | null }) };
}

async function until(visitor: Visitor, state: string) {
  await expect.poll(async () => (await stateOf(visitor)).state, { timeout: 30_000, interval: 200 }).toBe(state);
}

async function subscriptionOf(email: string) {
  const request_ = await t.ctx.db.trialRequest.findFirstOrThrow({ where: { email }, include: { subscription: true } });
  return request_.subscription!;
}

const tokenIn = (html: string) => /name="token" value="([A-Za-z0-9_-]{43})"/.exec(html)?.[1];

/** Every text of svc's own database that holds `secret` (table names). */
async function svcTablesHolding(secret: string) {
  const tables = await t.ctx.db.$queryRaw<{ name: string }[]>`
    SELECT quote_ident(table_name) AS name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`;
  const holding: string[] = [];
  for (const { name } of tables) {
    const [row] = await t.ctx.db.$queryRawUnsafe<{ n: number }[]>(
      `SELECT count(*)::int AS n FROM ${name} t WHERE t::text LIKE $1`,
      `%${secret}%`,
    );
    if (row!.n > 0) holding.push(name);
  }
  return holding;
}

describe('the trial page after the correct code', () => {
  it('shows the progress, then posts a one-time link whose hash alone is in the instance, for its customer, for minutes', async () => {
    const pkg = await autoPackage();
    const { visitor, page, email } = await verified(pkg.id);
    expect(page.status).toBe(200);
    expect(page.html).toContain('Thank you!');
    expect(page.html).toMatch(
      /Your trial is being set up now\. As soon as it is ready, we send an e-mail to <strong>s\*\*\*@example\.com<\/strong>/,
    );
    // Without JavaScript it refreshes itself (to the GET page, not the POST); with it, its script asks the status.
    expect(page.html).toContain('<noscript><meta http-equiv="refresh" content="3;url=/saas/trial/progress"></noscript>');
    const script = readFileSync(new URL('../views/trial/progress.js', import.meta.url), 'utf8');
    expect(page.html).toContain(`<script>${script}</script>`);
    const hash = createHash('sha256').update(script).digest('base64');
    expect(page.headers['content-security-policy']).toContain(`script-src 'sha256-${hash}'; connect-src 'self'`);
    expect(page.headers['cache-control']).toBe('no-store');
    const cookies = [page.headers['set-cookie']].flat().join('\n');
    expect(cookies).toMatch(/svc_trial_visitor=\d+\.\d+\.[A-Za-z0-9_-]{43}; Path=\/saas\/trial; Max-Age=604800; HttpOnly; SameSite=Lax/);

    await until(visitor, 'ready');
    const sub = await subscriptionOf(email);
    const url = `http://${sub.database_name}.localhost:${instancePort}`;
    const ready = await visitor.open('/saas/trial/progress');
    expect(ready.status).toBe(200);
    expect(ready.html).toContain(`<form id="sign-in" method="post" action="${url}/svc/sign_in">`);
    // CSP names no host with "_" (a database name may hold one): the wildcard of the address's parent domain.
    expect(ready.headers['content-security-policy']).toContain(`form-action 'self' http://*.localhost:${instancePort};`);
    expect(ready.headers['cache-control']).toBe('no-store');
    expect(ready.html).not.toContain('http-equiv="refresh"');
    const token = tokenIn(ready.html)!;
    expect(token).toBeTruthy();

    // In the instance: the hash, the customer's user (the template's administrator), an expiry minutes ahead.
    const rows = await queryIn(
      sub.database_name!,
      `SELECT token_hash, user_id, extract(epoch FROM expires_at - (now() AT TIME ZONE 'UTC'))::int AS seconds FROM svc_sign_in_link`,
    );
    expect(rows).toEqual([{ token_hash: sha256(token), user_id: 2, seconds: expect.any(Number) }]);
    expect(rows[0]!.seconds).toBeGreaterThan(150);
    expect(rows[0]!.seconds).toBeLessThanOrEqual(180);
    expect(await svcTablesHolding(token)).toEqual([]);
    expect(await svcTablesHolding(sha256(token))).toEqual([]);

    // A HEAD mints nothing.
    expect((await t.app.inject({ method: 'HEAD', url: '/saas/trial/progress', headers: { cookie: visitor.cookie! } })).statusCode).toBe(
      200,
    );
    expect(await queryIn(sub.database_name!, 'SELECT count(*)::int AS n FROM svc_sign_in_link')).toEqual([{ n: 1 }]);
    // Each page served mints its own link; the addon's statement takes a row once, and not once expired.
    const again = tokenIn((await visitor.open('/saas/trial/progress')).html)!;
    expect(again).not.toBe(token);
    const consume = (tok: string) => queryIn(sub.database_name!, CONSUME, [sha256(tok)]);
    expect(await consume(token)).toEqual([{ user_id: 2, '?column?': true }]);
    expect(await consume(token)).toEqual([]);
    await queryIn(sub.database_name!, `UPDATE svc_sign_in_link SET expires_at = (now() AT TIME ZONE 'UTC') - interval '1 second'`);
    expect(await consume(again)).toEqual([{ user_id: 2, '?column?': false }]);
    expect(await queryIn(sub.database_name!, 'SELECT count(*)::int AS n FROM svc_sign_in_link')).toEqual([{ n: 0 }]);
    // The next link clears what expired: only its own row is there.
    await queryIn(sub.database_name!, `INSERT INTO svc_sign_in_link (token_hash, user_id, expires_at) VALUES ('x', 2, '2000-01-01')`);
    const third = tokenIn((await visitor.open('/saas/trial/progress')).html)!;
    expect(await queryIn(sub.database_name!, 'SELECT token_hash FROM svc_sign_in_link')).toEqual([{ token_hash: sha256(third) }]);
  });

  it('is only for the browser that entered the code: another, or a forged cookie, sees no trial and mints nothing', async () => {
    const pkg = await autoPackage();
    const { visitor, email } = await verified(pkg.id);
    await until(visitor, 'ready');
    const sub = await subscriptionOf(email);
    const stranger = new Visitor(injectTransport(t.app));
    const other = await stranger.open('/saas/trial/progress');
    expect(other.status).toBe(404);
    expect(other.html).toContain('No trial to show');
    expect(await stateOf(stranger)).toEqual({ status: 404, state: null });
    const own = /svc_trial_visitor=(\d+)\.(\d+)\.(\S+?)(;|$)/.exec(visitor.cookie!)!;
    for (const forged of [
      `${Number(own[1]) + 1}.${own[2]}.${own[3]}`,
      `${own[1]}.${Number(own[2]) + 1}.${own[3]}`,
      `${own[1]}.${own[2]}.x${own[3]!.slice(1)}`,
    ]) {
      stranger.cookie = `svc_trial_visitor=${forged}`;
      expect((await stranger.open('/saas/trial/progress')).status).toBe(404);
    }
    expect(await queryIn(sub.database_name!, 'SELECT count(*)::int AS n FROM svc_sign_in_link')).toEqual([{ n: 0 }]);
  });

  it('a package the team sets up: the page says so and refreshes slowly; it takes the visitor in once an operator made the trial', async () => {
    const pkg = await createTrialPackage(t.ctx, { database_template_id: fx.templateId });
    const { visitor, page, email } = await verified(pkg.id);
    expect(page.html).toContain(
      'Our team sets up your trial. As soon as it is ready, we send an e-mail to <strong>s***@example.com</strong>',
    );
    expect(page.html).toContain('content="30;url=/saas/trial/progress"');
    expect(await stateOf(visitor)).toEqual({ status: 200, state: 'waiting' });
    const request_ = await t.ctx.db.trialRequest.findFirstOrThrow({ where: { email } });
    const processed = await request(t.app, t.as.operator, {
      method: 'POST',
      url: `/api/v1/trial-requests/${request_.id}/actions/create_subscription`,
    });
    expect(processed.statusCode, processed.body).toBe(200);
    await until(visitor, 'ready');
    expect(tokenIn((await visitor.open('/saas/trial/progress')).html)).toBeTruthy();
  });

  it('a failed deployment shows a page saying so and that the team was told; deployed again, the same page takes the visitor in', async () => {
    const pkg = await autoPackage();
    const parked = `${fx.templateDb}_away`;
    await adminQuery(`ALTER DATABASE "${fx.templateDb}" RENAME TO "${parked}"`);
    let visitor: Visitor;
    let email: string;
    try {
      ({ visitor, email } = await verified(pkg.id));
      await until(visitor, 'failed');
    } finally {
      await adminQuery(`ALTER DATABASE "${parked}" RENAME TO "${fx.templateDb}"`);
    }
    const failed = await visitor.open('/saas/trial/progress');
    expect(failed.status).toBe(200);
    expect(failed.html).toContain('Your trial could not be set up');
    expect(failed.html).toContain('Our team has been told');
    // No spinner: no refresh, no script.
    expect(failed.html).not.toContain('http-equiv="refresh"');
    expect(failed.html).not.toContain('<script');
    const sub = await subscriptionOf(email);
    const alerts = await t.ctx.db.message.findMany({
      where: { model_name: 'svc.subscription', rec_id: sub.id, subtype_xmlid: 'mail.mt_alert' },
    });
    expect(alerts.map((m) => m.body)).toEqual([expect.stringMatching(/^Deployment failed: /)]);

    const deploy = await act(t, sub.id, 'deploy');
    expect(deploy.statusCode, deploy.body).toBe(202);
    expect((await waitForJob(t.app, t.as.user, deploy.json().job_id)).state).toBe('completed');
    expect(tokenIn((await visitor.open('/saas/trial/progress')).html)).toBeTruthy();
  });
});

describe('in Chromium', () => {
  for (const javaScript of [true, false]) {
    it(`form, code, progress, and the link posted to the instance's own address (JavaScript ${javaScript ? 'on' : 'off'})`, async () => {
      const pkg = await autoPackage();
      const email = `chromium-${javaScript}-${Date.now()}@example.com`;
      const context = await browser.newContext({ javaScriptEnabled: javaScript });
      const page = await context.newPage();
      try {
        await page.goto(`${baseUrl}/saas/trial/${pkg.url_string}`);
        await page.getByLabel('Your name').fill('Jane Doe');
        await page.getByLabel('Company name').fill(company());
        await page.getByLabel('E-mail address').fill(email);
        await page.getByLabel('Mobile number').fill('+49 170 1234567');
        await page.getByLabel('Company size').selectOption('1-5');
        await page.getByRole('button', { name: 'Send me the code' }).click();
        await page.getByLabel('Verification code').fill(codeFrom(await smtp.waitFor(email)));
        const before = posted.length;
        await page.getByRole('button', { name: 'Confirm' }).click();
        if (!javaScript) {
          // The page refreshes itself until the ready page; its button posts the link.
          await page.getByRole('button', { name: 'Open your Odoo' }).click({ timeout: 30_000 });
        }
        await expect.poll(() => page.title(), { timeout: 30_000 }).toBe('Inside the instance');
        const sub = await subscriptionOf(email);
        const arrived = posted.slice(before).filter((r) => r.url !== '/favicon.ico');
        expect(arrived).toHaveLength(1);
        expect(arrived[0]).toMatchObject({ method: 'POST', url: '/svc/sign_in', host: `${sub.database_name}.localhost:${instancePort}` });
        const token = new URLSearchParams(arrived[0]!.body).get('token')!;
        expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
        expect(page.url()).toBe(`http://${sub.database_name}.localhost:${instancePort}/svc/sign_in`);
        expect(await queryIn(sub.database_name!, 'SELECT token_hash FROM svc_sign_in_link')).toEqual([{ token_hash: sha256(token) }]);
      } catch (err) {
        throw new Error(`${(err as Error).message}\nat ${page.url()}:\n${(await page.content()).slice(0, 3000)}`);
      } finally {
        await context.close();
      }
    }, 90_000);
  }
});
