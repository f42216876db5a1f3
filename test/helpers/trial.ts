// Trial fixtures and a "visitor": a browser-like client of the trial pages that keeps the CSRF
// cookie and reads the hidden fields of each page, over app.inject() or real HTTP.
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../../src/context.js';
import { expect } from 'vitest';
import { request } from './api.js';
import type { TestApp } from './app.js';

let seq = 0;

export async function createTrialPackage(ctx: AppContext, data: Record<string, unknown> = {}) {
  seq += 1;
  return ctx.db.trialPackage.create({
    data: { name: `Package ${seq}`, url_string: `package-${seq}-${Date.now().toString(36)}`, packages: ['crm', 'sales'], ...data },
  });
}

export interface Page {
  status: number;
  html: string;
  headers: Record<string, string | string[] | undefined>;
  /** The verification token carried by the page's forms, if any. */
  token: string | null;
}

type Transport = (req: { method: string; url: string; headers: Record<string, string>; body?: string }) => Promise<{
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}>;

export function injectTransport(app: FastifyInstance, remoteAddress = '127.0.0.1'): Transport {
  return async (req) => {
    const res = await app.inject({ method: req.method as 'GET', url: req.url, headers: req.headers, payload: req.body, remoteAddress });
    return { status: res.statusCode, headers: res.headers as Record<string, string | string[] | undefined>, body: res.body };
  };
}

export function httpTransport(baseUrl: string): Transport {
  return async (req) => {
    const res = await fetch(baseUrl + req.url, { method: req.method, headers: req.headers, body: req.body });
    return {
      status: res.status,
      headers: { ...Object.fromEntries(res.headers), 'set-cookie': res.headers.getSetCookie() },
      body: await res.text(),
    };
  };
}

export const signupFields = (email: string, packageId: number, extra: Record<string, string> = {}) => ({
  contact_name: 'Jane Doe',
  company_name: 'Acme GmbH',
  email,
  mobile: '+49 170 1234567',
  company_size: '6-10',
  trial_package_id: String(packageId),
  ...extra,
});

export class Visitor {
  /** The cookies the site set, by name (the CSRF nonce, the visitor cookie of a verified trial). */
  private readonly jar = new Map<string, string>();
  csrf: string | null = null;

  /** The Cookie header this visitor sends (null: none yet); set to act as another browser with the same cookies. */
  get cookie(): string | null {
    return this.jar.size === 0 ? null : [...this.jar].map(([name, value]) => `${name}=${value}`).join('; ');
  }

  set cookie(header: string | null) {
    this.jar.clear();
    for (const part of (header ?? '').split(';')) {
      const [name, ...rest] = part.trim().split('=');
      if (name) this.jar.set(name, rest.join('='));
    }
  }

  constructor(private readonly transport: Transport) {}

  private async send(
    method: string,
    url: string,
    fields?: Record<string, string>,
    extraHeaders: Record<string, string> = {},
  ): Promise<Page> {
    const headers: Record<string, string> = { ...extraHeaders };
    if (this.cookie) headers.cookie = this.cookie;
    let body: string | undefined;
    if (fields) {
      headers['content-type'] = 'application/x-www-form-urlencoded';
      body = new URLSearchParams(fields).toString();
    }
    const res = await this.transport({ method, url, headers, body });
    const setCookie = res.headers['set-cookie'];
    for (const line of Array.isArray(setCookie) ? setCookie : setCookie ? [setCookie] : []) {
      const [name, ...rest] = line.split(';')[0]!.split('=');
      this.jar.set(name!.trim(), rest.join('='));
    }
    this.csrf = /name="_csrf" value="([^"]+)"/.exec(res.body)?.[1] ?? this.csrf;
    return {
      status: res.status,
      html: res.body,
      headers: res.headers,
      token: /name="token" value="([0-9a-f]{64})"/.exec(res.body)?.[1] ?? null,
    };
  }

  open(url = '/saas/trial') {
    return this.send('GET', url);
  }

  /** Posts a form with the current CSRF field (unless `csrf` is given, e.g. null to leave it out). */
  post(url: string, fields: Record<string, string>, opts: { csrf?: string | null; headers?: Record<string, string> } = {}) {
    const csrf = opts.csrf === undefined ? this.csrf : opts.csrf;
    return this.send('POST', url, csrf === null ? fields : { _csrf: csrf, ...fields }, opts.headers);
  }

  /** Opens the form and submits it; the page carries the token. */
  async submit(email: string, packageId: number, extra: Record<string, string> = {}) {
    if (!this.csrf) await this.open();
    return this.post('/saas/trial/submit', signupFields(email, packageId, extra));
  }

  verify(token: string, code: string) {
    return this.post('/saas/trial/verify', { token, code });
  }

  resend(token: string) {
    return this.post('/saas/trial/resend', { token });
  }
}

/** A code that is not `code` (for wrong guesses). */
export function otherCode(code: string): string {
  return String((Number(code) + 1) % 1_000_000).padStart(6, '0');
}

let visitors = 0;

/** A trial request of the package, processed by an operator: answers its subscription id and deployment job. */
export async function processedTrial(t: TestApp, packageId: number) {
  const n = ++visitors;
  const created = await request(t.app, t.as.operator, {
    method: 'POST',
    url: '/api/v1/trial-requests',
    payload: {
      name: `Visitor ${n}`,
      company_name: `${t.ctx.dbName} Co ${n}`,
      email: `visitor-${n}-${Date.now()}@example.com`,
      mobile: '+49 170 1234567',
      company_size: '1-5',
      trial_package_id: packageId,
    },
  });
  expect(created.statusCode, created.body).toBe(201);
  const processed = await request(t.app, t.as.operator, {
    method: 'POST',
    url: `/api/v1/trial-requests/${created.json().id}/actions/create_subscription`,
  });
  expect(processed.statusCode, processed.body).toBe(200);
  return processed.json() as { subscription_id: number; deployment_job_id: string };
}
