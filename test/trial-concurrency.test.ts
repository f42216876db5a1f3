// The trial limits (5 wrong codes and 3 codes per verification, 3 verifications per e-mail and 10
// per IP an hour) under real concurrency: two API instances (separate contexts, so separate
// PostgreSQL connection pools, like two API processes) listen on 127.0.0.1:0 on one database, and
// the requests are sent at once over real HTTP. Real PostgreSQL, Redis and SMTP server (smtp-server).
// Both instances trust 127.0.0.1 as a proxy so each request can carry its own client IP.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../src/app.js';
import { createContext, type AppContext } from '../src/context.js';
import { useTestApp } from './helpers/app.js';
import { codeFrom, useSmtpServer } from './helpers/smtp.js';
import { createTrialPackage, httpTransport, otherCode, signupFields, Visitor } from './helpers/trial.js';

const smtp = useSmtpServer();
const t = useTestApp({ env: () => ({ SMTP_URL: smtp.url, TRUST_PROXY: '127.0.0.1' }) });

let second: AppContext;
let secondApp: FastifyInstance;
let urls: string[] = [];
let pkgId: number;

beforeAll(async () => {
  second = await createContext(t.ctx.config, t.ctx.log);
  secondApp = await buildApp(second);
  urls = await Promise.all([t.app, secondApp].map((a) => a.listen({ port: 0, host: '127.0.0.1' })));
  pkgId = (await createTrialPackage(t.ctx)).id;
});
afterAll(async () => {
  await secondApp?.close();
  await second?.close();
});

/** One browser session (cookie + CSRF field) used against both instances. */
async function session(ip: string) {
  const v = new Visitor(httpTransport(urls[0]!));
  await v.open();
  const via = (i: number) => {
    const w = new Visitor(httpTransport(urls[i % 2]!));
    w.cookie = v.cookie;
    w.csrf = v.csrf;
    return w;
  };
  return { v, via, headers: { 'x-forwarded-for': ip } };
}

async function start(address: string, ip: string) {
  const s = await session(ip);
  const page = await s.v.post('/saas/trial/submit', signupFields(address, pkgId), { headers: s.headers });
  expect(page.status).toBe(200);
  return { ...s, token: page.token!, code: codeFrom(await smtp.waitFor(address)) };
}

const statuses = (pages: { status: number }[]) =>
  pages.reduce<Record<number, number>>((acc, p) => {
    acc[p.status] = (acc[p.status] ?? 0) + 1;
    return acc;
  }, {});

describe('under concurrency', () => {
  it('50 simultaneous wrong guesses count at most 5: four 400, one 429 that cancels, the rest 410', async () => {
    const { via, token, code } = await start('guess@example.com', '198.51.100.1');
    const wrong = otherCode(code);
    const pages = await Promise.all(Array.from({ length: 50 }, (_, i) => via(i).post('/saas/trial/verify', { token, code: wrong })));
    expect(statuses(pages)).toEqual({ 400: 4, 429: 1, 410: 45 });
    const row = await t.ctx.db.trialVerification.findUniqueOrThrow({ where: { access_token: token } });
    expect(row).toMatchObject({ failed_attempts: 5, state: 'cancelled' });
    expect((await via(0).post('/saas/trial/verify', { token, code })).status).toBe(410);
  });

  it('the right code sent 10 times at once creates exactly one trial request', async () => {
    const { via, token, code } = await start('twice@example.com', '198.51.100.2');
    const pages = await Promise.all(Array.from({ length: 10 }, (_, i) => via(i).post('/saas/trial/verify', { token, code })));
    expect(statuses(pages)).toEqual({ 200: 1, 410: 9 });
    expect(await t.ctx.db.trialRequest.count({ where: { email: 'twice@example.com' } })).toBe(1);
  });

  it('10 simultaneous resends: one code sent, the others refused by the cooldown', async () => {
    const { via, headers, token } = await start('resend@example.com', '198.51.100.3');
    await t.ctx.db.$executeRaw`UPDATE trial_verifications SET last_code_sent = now() - interval '61 seconds' WHERE access_token = ${token}`;
    const pages = await Promise.all(Array.from({ length: 10 }, (_, i) => via(i).post('/saas/trial/resend', { token }, { headers })));
    expect(statuses(pages)).toEqual({ 200: 1, 429: 9 });
    expect((await t.ctx.db.trialVerification.findUniqueOrThrow({ where: { access_token: token } })).codes_sent).toBe(2);
    await smtp.waitFor('resend@example.com', 2);
  });

  it('10 simultaneous submits for one e-mail (different IPs): exactly 3 verifications', async () => {
    const address = 'burst@example.com';
    const s = await session('198.51.100.4');
    const pages = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        s.via(i).post('/saas/trial/submit', signupFields(address, pkgId), { headers: { 'x-forwarded-for': `203.0.113.${i + 1}` } }),
      ),
    );
    expect(statuses(pages)).toEqual({ 200: 3, 429: 7 });
    expect(await t.ctx.db.trialVerification.count({ where: { email: address } })).toBe(3);
  });

  it('15 simultaneous submits from one IP (different e-mails): exactly 10 verifications', async () => {
    const ip = '198.51.100.5';
    const s = await session(ip);
    const pages = await Promise.all(
      Array.from({ length: 15 }, (_, i) =>
        s.via(i).post('/saas/trial/submit', signupFields(`ip-${i}@example.com`, pkgId), { headers: { 'x-forwarded-for': ip } }),
      ),
    );
    expect(statuses(pages)).toEqual({ 200: 10, 429: 5 });
    expect(await t.ctx.db.trialVerification.count({ where: { ip_address: ip } })).toBe(10);
  });
});
