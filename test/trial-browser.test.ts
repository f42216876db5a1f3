// End to end in a real headless browser: Debian's chromium driven by playwright-core, with
// JavaScript disabled and a phone-sized viewport, against the service listening on loopback with
// real PostgreSQL, Redis and SMTP server (smtp-server). Fields are found by their labels.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type Browser } from 'playwright-core';
import { codeFrom, useSmtpServer, textOf } from './helpers/smtp.js';
import { createTrialPackage, otherCode } from './helpers/trial.js';
import { request } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';

const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];

const smtp = useSmtpServer();
let browser: Browser;
let baseUrl: string;

const t = useTestApp({ env: () => ({ SMTP_URL: smtp.url }) });

beforeAll(async () => {
  baseUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
  browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: CHROMIUM_ARGS });
});
afterAll(async () => {
  await browser?.close();
});

describe('trial signup in a browser', () => {
  it('fill the form, read the code from the mail, enter it, see the confirmation (no JavaScript, phone viewport)', async () => {
    const pkg = await createTrialPackage(t.ctx, { name: 'Odoo Starter' });
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
      await expect.poll(() => page.locator('#email-error').textContent(), { timeout: 15_000 }).toBe('Enter a valid e-mail address');
      expect(await page.getByLabel('E-mail address').getAttribute('aria-invalid')).toBe('true');
      expect(await page.getByLabel('Your name').inputValue()).toBe('Jane Doe');
      await page.getByLabel('E-mail address').fill('jane.browser@example.com');
      await page.getByRole('button', { name: 'Send me the code' }).click();

      await expect.poll(() => page.locator('h1').textContent(), { timeout: 15_000 }).toBe('Check your e-mail');
      expect(await page.locator('main').textContent()).toContain('j***@example.com');
      const code = codeFrom(await smtp.waitFor('jane.browser@example.com'));

      await page.getByLabel('Verification code').fill(otherCode(code));
      await page.getByRole('button', { name: 'Confirm' }).click();
      await expect.poll(() => page.locator('#code-error').textContent(), { timeout: 15_000 }).toContain('4 attempts left');
      expect((await page.locator('main').textContent())!.match(/attempts? left/g)).toHaveLength(1);

      await page.getByLabel('Verification code').fill(code);
      await page.getByRole('button', { name: 'Confirm' }).click();
      await expect.poll(() => page.locator('h1').textContent(), { timeout: 15_000 }).toBe('Thank you!');
      expect(await page.locator('main').textContent()).toContain('Odoo Starter');

      const request = await t.ctx.db.trialRequest.findFirstOrThrow({ where: { email: 'jane.browser@example.com' } });
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

  it("shows the operator's brand in titles and mails, the privacy link under the form and each package's trial length", async () => {
    const setSettings = (payload: object) => request(t.app, t.as.admin, { method: 'PATCH', url: '/api/v1/settings', payload });
    for (const [bad, field] of [
      [{ brand_name: '  ' }, 'brand_name'],
      [{ privacy_url: 'javascript:alert(1)' }, 'privacy_url'],
      [{ privacy_url: 'not a url' }, 'privacy_url'],
    ] as const) {
      const res = await setSettings(bad);
      expect(res.statusCode, JSON.stringify(bad)).toBe(400);
      expect(res.json().error.details.fields.map((f: { field: string }) => f.field)).toEqual([`body.${field}`]);
    }
    const saved = await setSettings({ brand_name: 'Acme Cloud', privacy_url: 'https://acme.example/privacy' });
    expect(saved.json()).toMatchObject({ brand_name: 'Acme Cloud', privacy_url: 'https://acme.example/privacy' });

    const pkg = await createTrialPackage(t.ctx, { name: 'Odoo Branded', trial_duration_days: 30 });
    const context = await browser.newContext({ javaScriptEnabled: false });
    const page = await context.newPage();
    try {
      await page.goto(`${baseUrl}/saas/trial/${pkg.url_string}`);
      expect(await page.title()).toBe('Start your Odoo Branded trial · Acme Cloud');
      expect(await page.locator('main').textContent()).toContain('Trial package: Odoo Branded, free for 30 days.');
      const privacy = page.getByRole('link', { name: 'privacy notice' });
      expect(await privacy.getAttribute('href')).toBe('https://acme.example/privacy');
      // The form of every package names each one's trial length.
      await page.goto(`${baseUrl}/saas/trial`);
      expect(await page.getByLabel('Trial package').locator('option', { hasText: 'Odoo Branded' }).textContent()).toBe(
        'Odoo Branded (30 days free)',
      );

      await page.goto(`${baseUrl}/saas/trial/${pkg.url_string}`);
      await page.getByLabel('Your name').fill('Bo Brand');
      await page.getByLabel('Company name').fill('Brand GmbH');
      await page.getByLabel('E-mail address').fill('bo.brand@example.com');
      await page.getByLabel('Mobile number').fill('+49 170 7654321');
      await page.getByLabel('Company size').selectOption('1-5');
      await page.getByRole('button', { name: 'Send me the code' }).click();
      await expect.poll(() => page.title(), { timeout: 15_000 }).toBe('Enter your code · Acme Cloud');
      const mail = await smtp.waitFor('bo.brand@example.com');
      expect(textOf(mail).replace(/\r\n/g, '\n')).toMatch(/\n-- \nAcme Cloud\n*$/);

      // Without a privacy_url there is no link.
      await setSettings({ privacy_url: null });
      await page.goto(`${baseUrl}/saas/trial/${pkg.url_string}`);
      expect(await page.getByRole('link', { name: 'privacy notice' }).count()).toBe(0);
    } finally {
      await context.close();
      await setSettings({ brand_name: 'svc', privacy_url: null });
    }
  });
});
