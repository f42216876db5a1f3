// End to end in a real headless browser: Debian's chromium driven by playwright-core, with
// JavaScript disabled and a phone-sized viewport, against the service listening on loopback with
// real PostgreSQL, Redis and SMTP server (smtp-server). Fields are found by their labels.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { chromium, type Browser } from 'playwright-core';
import { buildApp } from '../src/app.js';
import { createTestContext, type TestContext } from './helpers/context.js';
import { codeFrom, startSmtpServer, type TestSmtpServer } from './helpers/smtp.js';
import { createTrialPackage, otherCode } from './helpers/trial.js';

const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];

let ctx: TestContext;
let app: FastifyInstance;
let smtp: TestSmtpServer;
let browser: Browser;
let baseUrl: string;

beforeAll(async () => {
  smtp = await startSmtpServer();
  ctx = await createTestContext({ SMTP_URL: smtp.url });
  app = await buildApp(ctx);
  baseUrl = await app.listen({ port: 0, host: '127.0.0.1' });
  browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: CHROMIUM_ARGS });
});
afterAll(async () => {
  await browser?.close();
  await app.close();
  await ctx.cleanup();
  await smtp.close();
});

describe('trial signup in a browser', () => {
  it('fill the form, read the code from the mail, enter it, see the confirmation (no JavaScript, phone viewport)', async () => {
    const pkg = await createTrialPackage(ctx, { name: 'Odoo Starter' });
    const context = await browser.newContext({ javaScriptEnabled: false, viewport: { width: 375, height: 740 } });
    const page = await context.newPage();
    try {
      await page.goto(`${baseUrl}/saas/trial/${pkg.url_string}`);
      expect(await page.title()).toBe('Start your Odoo Starter trial · svc');
      await page.getByLabel('Your name').fill('Jane Doe');
      await page.getByLabel('Company name').fill('Acme Browser GmbH');
      await page.getByLabel('E-mail address').fill('not-an-email');
      await page.getByLabel('Mobile number').fill('+49 170 1234567');
      await page.getByLabel('Company size').selectOption('11-30');
      await page.getByRole('button', { name: 'Send me the code' }).click();

      // Server-side validation: the message is next to the field, the other values are kept.
      await expect.poll(() => page.locator('#email-error').textContent()).toBe('Enter a valid e-mail address');
      expect(await page.getByLabel('E-mail address').getAttribute('aria-invalid')).toBe('true');
      expect(await page.getByLabel('Your name').inputValue()).toBe('Jane Doe');
      await page.getByLabel('E-mail address').fill('jane.browser@example.com');
      await page.getByRole('button', { name: 'Send me the code' }).click();

      await expect.poll(() => page.locator('h1').textContent()).toBe('Check your e-mail');
      expect(await page.locator('main').textContent()).toContain('j***@example.com');
      const code = codeFrom(await smtp.waitFor('jane.browser@example.com'));

      await page.getByLabel('Verification code').fill(otherCode(code));
      await page.getByRole('button', { name: 'Confirm' }).click();
      await expect.poll(() => page.locator('#code-error').textContent()).toContain('4 attempts left');
      expect((await page.locator('main').textContent())!.match(/attempts? left/g)).toHaveLength(1);

      await page.getByLabel('Verification code').fill(code);
      await page.getByRole('button', { name: 'Confirm' }).click();
      await expect.poll(() => page.locator('h1').textContent()).toBe('Thank you!');
      expect(await page.locator('main').textContent()).toContain('Odoo Starter');

      const request = await ctx.db.trialRequest.findFirstOrThrow({ where: { email: 'jane.browser@example.com' } });
      expect(request).toMatchObject({
        name: 'Jane Doe',
        company_name: 'Acme Browser GmbH',
        company_size: 's11_30',
        trial_package_id: pkg.id,
        state: 'new',
      });
      // The layout's style block is allowed by the page's Content-Security-Policy (its hash).
      expect(await page.evaluate('getComputedStyle(document.querySelector("main")).backgroundColor')).toBe('rgb(255, 255, 255)');
      // The page fits a phone screen: no horizontal scrolling.
      const overflow = await page.evaluate('document.documentElement.scrollWidth > window.innerWidth');
      expect(overflow).toBe(false);
    } finally {
      await context.close();
    }
  });
});
