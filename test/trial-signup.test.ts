// The public trial pages end to end over HTTP (app.inject), on real PostgreSQL and Redis and a real
// SMTP server (smtp-server on loopback) that receives the code mails: every status code of the
// trial pages, CSRF, the limits (5 wrong codes and 3 codes 60 s apart per verification, 3
// verifications per e-mail and 10 per IP an hour; one after the other, concurrency is in
// trial-concurrency.test.ts), the cancellation rule, mail delivery failures and the client IP.
import { createHash } from 'node:crypto';
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { buildApp } from '../src/app.js';
import { createMailer } from '../src/core/mail.js';
import { createTrialCsrf } from '../src/trial/trial-csrf.js';
import { createTrialVerificationService } from '../src/trial/trial-verification-service.js';
import { useTestApp } from './helpers/app.js';
import { codeFrom, useSmtpServer } from './helpers/smtp.js';
import { freePort } from './helpers/sshd.js';
import { createTrialPackage, signupFields, injectTransport, otherCode, Visitor } from './helpers/trial.js';

const smtp = useSmtpServer();
let pkg: { id: number; name: string; url_string: string };
let pkg2: { id: number; name: string; url_string: string };
let n = 0;

/** A fresh address and a fresh client IP for each test, so limits of one test do not leak. */
function visitor(ip = `10.0.${Math.floor(++n / 250)}.${n % 250}`) {
  return new Visitor(injectTransport(t.app, ip));
}
const email = (tag: string) => `${tag}-${++n}@example.com`;

const t = useTestApp({ env: () => ({ SMTP_URL: smtp.url }) });

beforeAll(async () => {
  pkg = await createTrialPackage(t.ctx, { name: 'Odoo CRM' });
  pkg2 = await createTrialPackage(t.ctx, { name: 'Odoo Shop' });
});
beforeEach(() => smtp.refuse(() => false));

async function verification(token: string) {
  return t.ctx.db.trialVerification.findUniqueOrThrow({ where: { access_token: token } });
}

/** Submits the form and returns the token and the code read from the mail. */
async function startVerification(v: Visitor, address: string, packageId = pkg.id) {
  const to = address.toLowerCase(); // the code goes to the normalized address
  const before = smtp.messages.filter((m) => m.to.includes(to)).length;
  const page = await v.submit(address, packageId);
  expect(page.status).toBe(200);
  const mail = await smtp.waitFor(to, before + 1);
  return { token: page.token!, code: codeFrom(mail), page, mail };
}

describe('form pages', () => {
  it('GET /saas/trial shows the form with labelled fields and sets the CSRF cookie', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/saas/trial' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/text\/html/);
    expect(res.headers['set-cookie']).toMatch(/^svc_trial_csrf=[A-Za-z0-9_-]{43}; Path=\/saas\/trial; HttpOnly; SameSite=Lax$/);
    for (const field of ['contact_name', 'company_name', 'email', 'mobile', 'company_size', 'trial_package_id']) {
      expect(res.body).toContain(`<label for="${field}">`);
      expect(res.body).toMatch(new RegExp(`id="${field}" name="${field}"`));
    }
    expect(res.body).toContain('name="viewport"');
    expect(res.body).toContain('>Odoo CRM (14 days free)</option>');
    expect(res.body).toMatch(/name="_csrf" value="\d+\.[A-Za-z0-9_-]{43}"/);
  });

  it('with the database not answering, the visitor gets the HTML error page (not the API error JSON)', async () => {
    const down = () => Promise.reject(new Error('connection refused'));
    const { trialPackage, settings } = t.ctx.db;
    const saved = [trialPackage.findMany, settings.findUniqueOrThrow];
    Object.assign(trialPackage, { findMany: down });
    Object.assign(settings, { findUniqueOrThrow: down });
    try {
      const res = await t.app.inject({ method: 'GET', url: '/saas/trial' });
      expect(res.statusCode).toBe(500);
      expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
      expect(res.body).toContain('<title>Something went wrong · svc</title>');
    } finally {
      Object.assign(trialPackage, { findMany: saved[0] });
      Object.assign(settings, { findUniqueOrThrow: saved[1] });
    }
  });

  it('every page, error pages included, carries the security headers: no script, no framing, no sniffing', async () => {
    for (const [url, status] of [
      ['/saas/trial', 200],
      ['/saas/trial/no-such-package', 404],
      ['/saas/trial/%00', 400],
    ] as const) {
      const res = await t.app.inject({ method: 'GET', url });
      expect(res.statusCode, url).toBe(status);
      expect(res.headers['content-security-policy']).toMatch(
        /^default-src 'none'; style-src 'sha256-[A-Za-z0-9+/=]{44}'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'$/,
      );
      expect(res.headers).toMatchObject({
        'x-frame-options': 'DENY',
        'x-content-type-options': 'nosniff',
        'referrer-policy': 'same-origin',
      });
    }
    const posted = await visitor().post('/saas/trial/verify', { token: 'f'.repeat(64), code: '123456' });
    expect(posted.headers['x-frame-options']).toBe('DENY');
  });

  it('GET /saas/trial/<url_string> fixes the package; unknown or inactive → 404 page', async () => {
    const ok = await t.app.inject({ method: 'GET', url: `/saas/trial/${pkg.url_string}` });
    expect(ok.statusCode).toBe(200);
    expect(ok.body).toContain('Start your Odoo CRM trial');
    expect(ok.body).toContain(`name="trial_package_id" value="${pkg.id}"`);

    const unknown = await t.app.inject({ method: 'GET', url: '/saas/trial/no-such-package' });
    expect(unknown.statusCode).toBe(404);
    expect(unknown.body).toContain('Trial not found');

    const inactive = await createTrialPackage(t.ctx, { active: false });
    expect((await t.app.inject({ method: 'GET', url: `/saas/trial/${inactive.url_string}` })).statusCode).toBe(404);
    const res = await visitor().submit(email('inactive'), inactive.id);
    expect(res.status).toBe(400);
  });

  it('bad input: 400 with the form re-shown, messages next to the fields, values escaped, nothing stored or sent', async () => {
    const v = visitor();
    await v.open();
    const mails = smtp.messages.length;
    const page = await v.post('/saas/trial/submit', {
      contact_name: '',
      company_name: '<script>alert(1)</script>',
      email: 'not-an-address',
      mobile: 'call me',
      company_size: '7-8',
      trial_package_id: String(pkg.id),
    });
    expect(page.status).toBe(400);
    expect(page.html).toContain('role="alert"');
    expect(page.html).toMatch(/id="email"[^>]*aria-invalid="true" aria-describedby="email-error"/);
    expect(page.html).toContain('<p class="error" id="email-error">Enter a valid e-mail address</p>');
    expect(page.html).toContain('<p class="error" id="contact_name-error">Enter your name</p>');
    expect(page.html).toContain('id="mobile-error"');
    expect(page.html).toContain('id="company_size-error"');
    expect(page.html).not.toContain('<script>alert(1)</script>');
    expect(page.html).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(await t.ctx.db.trialVerification.count({ where: { email: 'not-an-address' } })).toBe(0);
    expect(smtp.messages.length).toBe(mails);

    // A number too short is told what the minimum is.
    const short = await v.post('/saas/trial/submit', { ...signupFields(email('short'), pkg.id), mobile: '123' });
    expect(short.status).toBe(400);
    expect(short.html).toContain('<p class="error" id="mobile-error">Enter at least 5 characters: digits, spaces and + ( ) . / -</p>');
  });
});

describe('CSRF', () => {
  it('a POST without the field, with a field of another visitor, or with a forged one → 403, nothing done', async () => {
    const address = email('csrf');
    const v = visitor();
    await v.open();
    const other = visitor();
    await other.open();
    for (const csrf of [null, other.csrf!, `${Math.floor(Date.now() / 1000) + 3600}.${'A'.repeat(43)}`]) {
      const page = await v.post('/saas/trial/submit', signupFields(address, pkg.id), { csrf });
      expect(page.status).toBe(403);
      expect(page.html).toContain('Please reload the form');
    }
    // No cookie at all (e.g. a cross-site form without the visitor's cookie).
    const noCookie = await t.app.inject({
      method: 'POST',
      url: '/saas/trial/verify',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: `_csrf=${encodeURIComponent(v.csrf!)}&token=${'a'.repeat(64)}&code=123456`,
    });
    expect(noCookie.statusCode).toBe(403);
    expect(await t.ctx.db.trialVerification.count({ where: { email: address } })).toBe(0);
  });

  it('tokens are bound to the nonce and expire; a second API process with the same master key accepts them', async () => {
    const csrf = createTrialCsrf(t.ctx.secretBox.deriveKey('trial-form-csrf'), { secureCookie: false, path: '/saas/trial' });
    const nonce = csrf.newNonce();
    const now = Date.now();
    const token = csrf.issue(nonce, now);
    expect(csrf.check(nonce, token, now)).toBe(true);
    expect(csrf.check(csrf.newNonce(), token, now)).toBe(false);
    expect(csrf.check(nonce, token, now + 2 * 3600_000 + 1000)).toBe(false);
    expect(csrf.check(null, token, now)).toBe(false);
    // Any changed character is refused, the last one included (its low bits are padding in base64).
    for (const at of [token.length - 1, token.length - 10, 0]) {
      const c = token[at]!;
      const tampered = token.slice(0, at) + (c === 'B' ? 'C' : c === '1' ? '2' : 'B') + token.slice(at + 1);
      expect(csrf.check(nonce, tampered, now)).toBe(false);
    }

    // Another process: its own context on the same master key file and database.
    const second = await buildApp({ ...t.ctx, log: t.ctx.log });
    try {
      const v = visitor();
      await v.open(); // form served by the first process
      const address = email('two-processes');
      const res = await second.inject({
        method: 'POST',
        url: '/saas/trial/submit',
        remoteAddress: '10.9.9.9',
        headers: { cookie: v.cookie!, 'content-type': 'application/x-www-form-urlencoded' },
        payload: new URLSearchParams({ _csrf: v.csrf!, ...signupFields(address, pkg.id) }).toString(),
      });
      expect(res.statusCode).toBe(200);
    } finally {
      await second.close();
    }
  });
});

describe('submit and verify', () => {
  it('sends the code mail (text and HTML), shows the masked address, stores only the hash; the right code creates the request', async () => {
    const v = visitor();
    const address = email('jane');
    const { token, code, page, mail } = await startVerification(v, address);
    expect(page.html).toContain(`<strong>${address[0]}***@example.com</strong>`);
    expect(page.html).toContain('5 attempts left');
    expect(page.html).toContain('action="/saas/trial/resend"');
    expect(page.html).toContain('autocomplete="one-time-code"');
    expect(token).toMatch(/^[0-9a-f]{64}$/);
    expect(code).toMatch(/^\d{6}$/);
    expect(mail.raw).toMatch(/Content-Type: text\/plain/i);
    expect(mail.raw).toMatch(/Content-Type: text\/html/i);
    expect(mail.raw).toContain('valid for 10 minutes');
    expect(mail.raw).toContain('Odoo CRM');

    const row = await verification(token);
    expect(row).toMatchObject({
      state: 'pending',
      codes_sent: 1,
      failed_attempts: 0,
      email: address,
      ip_address: expect.stringMatching(/^10\.0\./),
    });
    expect(row.code_hash).toBe(
      createHash('sha256')
        .update(token + code)
        .digest('hex'),
    );
    expect(JSON.stringify(row)).not.toContain(`"${code}"`);
    const validity = await t.ctx.db.$queryRaw<{ minutes: number }[]>`
      SELECT round(extract(epoch FROM code_expiry - created_at) / 60)::int AS minutes FROM trial_verifications WHERE id = ${row.id}`;
    expect(validity).toEqual([{ minutes: 10 }]);
    expect(await t.ctx.db.trialRequest.count({ where: { email: address } })).toBe(0); // never before verification

    const done = await v.verify(token, code);
    expect(done.status).toBe(200);
    expect(done.html).toContain('Thank you!');
    const request = await t.ctx.db.trialRequest.findUniqueOrThrow({
      where: { email_trial_package_id: { email: address, trial_package_id: pkg.id } },
    });
    expect(request).toMatchObject({
      name: 'Jane Doe',
      company_name: 'Acme GmbH',
      mobile: '+49 170 1234567',
      company_size: 's6_10',
      state: 'new',
    });
    expect(await verification(token)).toMatchObject({ state: 'verified', trial_request_id: request.id });
    const tracking = await t.ctx.db.message.findFirst({
      where: { model_name: 'svc.subscription.trial.request', rec_id: request.id, message_type: 'tracking' },
      include: { tracking_values: true },
    });
    expect(tracking!.tracking_values.map((v) => [v.field, v.new_value])).toEqual(
      expect.arrayContaining([
        ['email', address],
        ['company_size', '6-10'],
        ['state', 'new'],
        ['name', 'Jane Doe'],
      ]),
    );

    // The same token again: the verification is no longer pending.
    expect((await v.verify(token, code)).status).toBe(410);
  });

  it('a wrong code: 400 with attempts left; a non-6-digit code is not counted; the 5th failure → 429 and cancelled; then 410', async () => {
    const v = visitor();
    const { token, code } = await startVerification(v, email('wrong'));
    const malformed = await v.verify(token, '12ab');
    expect(malformed.status).toBe(400);
    expect(malformed.html).toContain('The code has 6 digits.');
    expect((await verification(token)).failed_attempts).toBe(0);

    for (let i = 1; i <= 4; i++) {
      const page = await v.verify(token, otherCode(code));
      expect(page.status).toBe(400);
      // Said once, in the error next to the field.
      expect(page.html.match(/attempts? left/g)).toHaveLength(1);
      expect(page.html).toContain(`${5 - i} ${5 - i === 1 ? 'attempt' : 'attempts'} left`);
      expect(page.token).toBe(token);
    }
    const fifth = await v.verify(token, otherCode(code));
    expect(fifth.status).toBe(429);
    expect(await verification(token)).toMatchObject({ state: 'cancelled', failed_attempts: 5 });
    // Even the right code is refused now.
    expect((await v.verify(token, code)).status).toBe(410);
  });

  it('an expired code: 410 offering a resend; with no code left to send, 410 and the verification is cancelled', async () => {
    const v = visitor();
    const { token, code } = await startVerification(v, email('expired'));
    await t.ctx.db.$executeRaw`UPDATE trial_verifications SET code_expiry = now() - interval '1 second' WHERE access_token = ${token}`;
    const page = await v.verify(token, code);
    expect(page.status).toBe(410);
    expect(page.html).toContain('The code has expired');
    expect(page.html).toContain('action="/saas/trial/resend"');
    expect((await verification(token)).state).toBe('pending');

    await t.ctx.db.$executeRaw`UPDATE trial_verifications SET codes_sent = 3 WHERE access_token = ${token}`;
    const last = await v.verify(token, code);
    expect(last.status).toBe(410);
    expect(last.html).toContain('no more codes can be sent');
    expect((await verification(token)).state).toBe('cancelled');
  });

  it('an unknown or malformed token → 404 page', async () => {
    const v = visitor();
    await v.open();
    expect((await v.verify('f'.repeat(64), '123456')).status).toBe(404);
    expect((await v.verify('nope', '123456')).status).toBe(404);
    expect((await v.resend('0'.repeat(64))).status).toBe(404);
  });

  it('no enumeration at submit: an address that already has a request gets a code; the duplicate is answered after the code (409)', async () => {
    const address = email('dup');
    const first = visitor();
    const a = await startVerification(first, address);
    expect((await first.verify(a.token, a.code)).status).toBe(200);

    const second = visitor();
    const b = await startVerification(second, address.toUpperCase());
    expect(b.page.html).toContain('Check your e-mail');
    const page = await second.verify(b.token, b.code);
    expect(page.status).toBe(409);
    expect(page.html).toContain('already requested');
    expect(await t.ctx.db.trialRequest.count({ where: { email: address } })).toBe(1);
    expect((await verification(b.token)).state).toBe('cancelled');
  });

  it('a new verification cancels the pending ones for the same e-mail and package (not for another package)', async () => {
    const address = email('cancel');
    const v = visitor();
    const old = await startVerification(v, address, pkg.id);
    const otherPackage = await startVerification(v, address, pkg2.id);
    const fresh = await startVerification(v, address, pkg.id);
    expect((await verification(old.token)).state).toBe('cancelled');
    expect((await verification(otherPackage.token)).state).toBe('pending');
    expect((await v.verify(old.token, old.code)).status).toBe(410);
    expect((await v.verify(fresh.token, fresh.code)).status).toBe(200);
    expect((await v.verify(otherPackage.token, otherPackage.code)).status).toBe(200);
  });
  it('with Auto Run Subscription, the verified request is queued for processing (job process_trial_request)', async () => {
    const auto = await createTrialPackage(t.ctx, { auto_run_subscription: true });
    const v = visitor();
    const { token, code } = await startVerification(v, email('auto'), auto.id);
    expect((await v.verify(token, code)).status).toBe(200);
    const { trial_request_id } = await verification(token);
    const jobs = await t.ctx.queues.queue('trials').getJobs(['waiting']);
    expect(jobs.map((j) => [j.name, j.data.trial_request_id])).toContainEqual(['process_trial_request', trial_request_id]);
  });
});

describe('resend', () => {
  it('60 s cooldown (429 with Retry-After), a new code replaces the old one, at most 3 codes (then 429 without Retry-After)', async () => {
    const v = visitor();
    const address = email('resend');
    const { token, code: first } = await startVerification(v, address);

    const tooSoon = await v.resend(token);
    expect(tooSoon.status).toBe(429);
    const retry = Number(tooSoon.headers['retry-after']);
    expect(retry).toBeGreaterThan(0);
    expect(retry).toBeLessThanOrEqual(60);
    expect(tooSoon.html).toContain('Please wait');
    expect(tooSoon.token).toBe(token); // the code can still be entered

    const backdate = () =>
      t.ctx.db.$executeRaw`UPDATE trial_verifications SET last_code_sent = now() - interval '61 seconds' WHERE access_token = ${token}`;
    await backdate();
    const second = await v.resend(token);
    expect(second.status).toBe(200);
    expect(second.html).toContain('A new code is on its way');
    const code2 = codeFrom(await smtp.waitFor(address, 2));
    expect((await verification(token)).codes_sent).toBe(2);

    await backdate();
    expect((await v.resend(token)).status).toBe(200);
    const code3 = codeFrom(await smtp.waitFor(address, 3));

    await backdate();
    const fourth = await v.resend(token);
    expect(fourth.status).toBe(429);
    expect(fourth.headers['retry-after']).toBeUndefined();
    expect(fourth.html).toContain('No more codes can be sent');
    expect((await verification(token)).codes_sent).toBe(3);
    expect(smtp.messages.filter((m) => m.to.includes(address))).toHaveLength(3);

    // Only the newest code is valid (older ones count as wrong attempts).
    for (const old of new Set([first, code2].filter((c) => c !== code3))) expect((await v.verify(token, old)).status).toBe(400);
    expect((await v.verify(token, code3)).status).toBe(200);
    expect((await v.resend(token)).status).toBe(410);
  });
});

describe('limits per e-mail and per IP (one hour)', () => {
  it('3 verifications per e-mail per hour, whatever the case of the address; the window slides', async () => {
    const address = email('limit');
    for (let i = 0; i < 3; i++)
      expect((await visitor().submit(i === 1 ? address.toUpperCase() : address, i % 2 ? pkg.id : pkg2.id)).status).toBe(200);
    const fourth = await visitor().submit(address, pkg.id);
    expect(fourth.status).toBe(429);
    expect(Number(fourth.headers['retry-after'])).toBeGreaterThan(3000);
    // The page says when to come back, and offers no "Start again" that would meet the same limit.
    expect(fourth.html).toMatch(/Please come back in (5\d|60) minutes\./);
    expect(fourth.html).not.toContain('Start again');
    expect(await t.ctx.db.trialVerification.count({ where: { email: address } })).toBe(3);

    await t.ctx.db.$executeRaw`UPDATE trial_verifications SET created_at = created_at - interval '61 minutes' WHERE email = ${address}`;
    expect((await visitor().submit(address, pkg.id)).status).toBe(200);
  });

  it('10 verifications per IP per hour; another IP is not affected', async () => {
    const ip = '192.0.2.77';
    for (let i = 0; i < 10; i++) expect((await visitor(ip).submit(email('ip'), pkg.id)).status).toBe(200);
    const eleventh = await visitor(ip).submit(email('ip'), pkg.id);
    expect(eleventh.status).toBe(429);
    expect(eleventh.html).toContain('Too many trial requests came from your network');
    expect((await visitor('192.0.2.78').submit(email('ip'), pkg.id)).status).toBe(200);
  });
});

describe('mail delivery failure', () => {
  it('the SMTP server refuses the address: 502 page, verification cancelled and not counted against the visitor', async () => {
    const address = email('refused');
    smtp.refuse((to) => to === address);
    for (let i = 0; i < 4; i++) {
      const page = await visitor().submit(address, pkg.id);
      expect(page.status).toBe(502);
      expect(page.html).toContain('The code could not be sent');
    }
    const rows = await t.ctx.db.trialVerification.findMany({ where: { email: address } });
    expect(rows).toHaveLength(4);
    expect(rows.every((r) => r.state === 'cancelled' && r.codes_sent === 0)).toBe(true);

    smtp.refuse(() => false); // delivery works again: the failures did not use up the hourly limit
    const v = visitor();
    const { token, code } = await startVerification(v, address);
    expect((await v.verify(token, code)).status).toBe(200);
  });

  it('nothing listening on the SMTP port: the service reports mail_failed and cancels the verification', async () => {
    const url = `smtp://127.0.0.1:${await freePort()}`;
    const service = createTrialVerificationService({
      ...t.ctx,
      mailer: createMailer(url, 'svc <no-reply@localhost>', pino({ level: 'silent' })),
    });
    const address = email('nolistener');
    const outcome = await service.submit(signupFields(address, pkg.id), '10.200.0.1');
    expect(outcome).toEqual({ kind: 'mail_failed' });
    expect(await t.ctx.db.trialVerification.findFirst({ where: { email: address } })).toMatchObject({ state: 'cancelled', codes_sent: 0 });
  });

  it('resend that cannot be delivered: 502 and the verification is cancelled', async () => {
    const address = email('resend-fail');
    const v = visitor();
    const { token } = await startVerification(v, address);
    await t.ctx.db.$executeRaw`UPDATE trial_verifications SET last_code_sent = now() - interval '61 seconds' WHERE access_token = ${token}`;
    smtp.refuse((to) => to === address);
    const page = await v.resend(token);
    expect(page.status).toBe(502);
    expect(await verification(token)).toMatchObject({ state: 'cancelled', codes_sent: 1 });
  });
});

describe('client IP', () => {
  const submitWith = async (target: FastifyInstance, address: string, headers: Record<string, string>) => {
    const v = new Visitor(injectTransport(target, '127.0.0.1'));
    await v.open();
    const page = await v.post('/saas/trial/submit', signupFields(address, pkg.id), { headers });
    expect(page.status).toBe(200);
    return (await verification(page.token!)).ip_address;
  };

  it('is the socket address: X-Forwarded-For is ignored without TRUST_PROXY', async () => {
    expect(await submitWith(t.app, email('xff'), { 'x-forwarded-for': '203.0.113.9' })).toBe('127.0.0.1');
  });

  it('comes from X-Forwarded-For when the socket peer is a trusted proxy', async () => {
    const proxied = await buildApp({ ...t.ctx, config: { ...t.ctx.config, TRUST_PROXY: ['127.0.0.1'] } });
    try {
      expect(await submitWith(proxied, email('xff-trusted'), { 'x-forwarded-for': '203.0.113.9' })).toBe('203.0.113.9');
    } finally {
      await proxied.close();
    }
  });
});
