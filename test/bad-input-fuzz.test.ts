// Bad input is a client error, never a 5xx. Real parts: PostgreSQL, Redis, the whole app over
// inject(). The REST operations are walked from the OpenAPI document: every path id, query
// parameter and body field gets integers past PostgreSQL's range (2^31, 2^63), id spellings that
// are not ids (`0x1`, ` 1`, `1e0`), and NUL characters in strings, one bad value per request on an
// otherwise plausible request. The public routes (trial pages, webhook endpoint) are sent the same.
import { describe, expect, it } from 'vitest';
import { request } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';
import { createTrialPackage, injectTransport, signupFields, Visitor } from './helpers/trial.js';

interface JsonSchema {
  type?: string | string[];
  enum?: unknown[];
  properties?: Record<string, JsonSchema>;
  items?: JsonSchema;
  additionalProperties?: JsonSchema | boolean;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  minimum?: number;
  minLength?: number;
  format?: string;
}
interface Operation {
  parameters?: { in: string; name: string; schema: JsonSchema }[];
  requestBody?: { content: Record<string, { schema: JsonSchema }> };
}

const BIG_INTEGERS = [2 ** 31, 2 ** 63];
const NUL = 'a\u0000b';
const NOT_IDS = ['2147483648', '9223372036854775808', '0x1', '%201', '1e0', '%00', '1.5', '-1'];

// Record 1 of each family would be what `0x1` or ` 1` reach if they were taken for ids: the first
// user (and token) is useTestApp's user-group caller, not the administrator the requests are sent
// as, so a request that slipped through cannot lock the test out.
const t = useTestApp();

function typeOf(s: JsonSchema): string | undefined {
  const variant = s.anyOf?.find((v) => v.type !== 'null') ?? s.oneOf?.find((v) => v.type !== 'null');
  if (variant) return typeOf(variant);
  return Array.isArray(s.type) ? s.type.find((t) => t !== 'null') : s.type;
}

function plausible(s: JsonSchema): unknown {
  if (s.enum) return s.enum[0];
  switch (typeOf(s)) {
    case 'integer':
    case 'number':
      return Math.max(1, s.minimum ?? 1);
    case 'boolean':
      return false;
    case 'array':
      return [];
    case 'object':
      return Object.fromEntries(Object.entries(s.properties ?? {}).map(([k, v]) => [k, plausible(v)]));
    default:
      return s.format === 'email' ? 'someone@example.com' : 'x'.repeat(Math.max(1, s.minLength ?? 1));
  }
}

/** One bad value per field: [description, value]. */
function badValues(s: JsonSchema): [string, unknown][] {
  const variant = s.anyOf?.find((v) => v.type !== 'null') ?? s.oneOf?.find((v) => v.type !== 'null') ?? s;
  switch (typeOf(variant)) {
    case 'integer':
    case 'number':
      return BIG_INTEGERS.map((n) => [String(n), n]);
    case 'string':
      return [['NUL', NUL]];
    case 'array':
      return variant.items ? badValues(variant.items).map(([d, v]) => [`[${d}]`, [v]]) : [];
    case 'object': {
      const extra = typeof variant.additionalProperties === 'object' ? variant.additionalProperties : null;
      const out: [string, unknown][] = extra
        ? [['NUL key', { [NUL]: plausible(extra) }], ...badValues(extra).map(([d, v]) => [`{${d}}`, { k: v }] as [string, unknown])]
        : [];
      return out;
    }
    default:
      return [];
  }
}

interface Case {
  what: string;
  method: string;
  url: string;
  payload?: unknown;
}

function casesOf(path: string, method: string, op: Operation): Case[] {
  const params = op.parameters ?? [];
  const pathWith = (overrides: Record<string, string> = {}) =>
    path.replace(/\{(\w+)\}/g, (_m, name: string) => overrides[name] ?? (name.endsWith('id') ? '999999' : 'x'));
  const body = op.requestBody?.content['application/json']?.schema;
  const baseBody = body ? plausible(body) : undefined;
  const cases: Case[] = [];
  const m = method.toUpperCase();

  for (const p of params.filter((x) => x.in === 'path')) {
    const values = typeOf(p.schema) === 'integer' || p.name.endsWith('id') ? NOT_IDS : ['%00'];
    for (const v of values) cases.push({ what: `path ${p.name}=${v}`, method: m, url: pathWith({ [p.name]: v }), payload: baseBody });
  }
  for (const p of params.filter((x) => x.in === 'query')) {
    for (const [d, v] of badValues(p.schema)) {
      cases.push({
        what: `query ${p.name}=${d}`,
        method: m,
        url: `${pathWith()}?${p.name}=${encodeURIComponent(String(v))}`,
        payload: baseBody,
      });
    }
  }
  if (body && typeOf(body) === 'object') {
    for (const [field, schema] of Object.entries(body.properties ?? {})) {
      for (const [d, v] of badValues(schema)) {
        cases.push({ what: `body ${field}=${d}`, method: m, url: pathWith(), payload: { ...(baseBody as object), [field]: v } });
      }
    }
  }
  return cases;
}

describe('the REST API', () => {
  it('answers 400 validation_error, never 5xx, to out-of-range integers, non-ids and NUL characters', async () => {
    const doc = (await t.app.inject({ method: 'GET', url: '/api/v1/openapi.json' })).json() as {
      paths: Record<string, Record<string, Operation>>;
    };
    const failures: string[] = [];
    let sent = 0;
    let operations = 0;
    // The REST API here; the public routes (pages, webhook endpoint) have their own test below.
    for (const [path, ops] of Object.entries(doc.paths).filter(([p]) => p.startsWith('/api/v1/'))) {
      for (const [method, op] of Object.entries(ops)) {
        operations += 1;
        for (const c of casesOf(path, method, op)) {
          sent += 1;
          const res = await request(t.app, t.as.admin, { method: c.method as 'GET', url: c.url, payload: c.payload as object });
          const code = res.headers['content-type']?.toString().includes('json') ? res.json()?.error?.code : undefined;
          if (res.statusCode !== 400 || code !== 'validation_error') {
            failures.push(`${c.method} ${path} ${c.what} → ${res.statusCode} ${res.body.slice(0, 160)}`);
          }
        }
      }
    }
    expect(operations).toBeGreaterThan(150);
    expect(sent).toBeGreaterThan(1000);
    expect(failures).toEqual([]);
  });
  it('answers 400 validation_error to a query parameter or body field it does not know', async () => {
    const doc = (await t.app.inject({ method: 'GET', url: '/api/v1/openapi.json' })).json() as {
      paths: Record<string, Record<string, Operation>>;
    };
    const failures: string[] = [];
    let operations = 0;
    for (const [path, ops] of Object.entries(doc.paths).filter(([p]) => p.startsWith('/api/v1/'))) {
      for (const [method, op] of Object.entries(ops)) {
        operations += 1;
        const url = path.replace(/\{(\w+)\}/g, (_m, name: string) => (name.endsWith('id') ? '999999' : 'x'));
        const body = op.requestBody?.content['application/json']?.schema;
        const baseBody = body ? plausible(body) : undefined;
        const m = method.toUpperCase();
        // The answer must name the unknown field: a body that fails for another reason (plausible()
        // values are not always valid) must not hide a schema that lets unknown fields through. The
        // query string is validated after the path and the body, so an error there stands for it.
        const cases: [Case, (field: string) => boolean][] = [
          [
            { what: 'query zz_unknown=1', method: m, url: `${url}?zz_unknown=1`, payload: baseBody },
            (f) => f === 'querystring.zz_unknown' || /^(params|body)\b/.test(f),
          ],
        ];
        if ((body && typeOf(body) === 'object') || (!body && m === 'POST')) {
          cases.push([
            { what: 'body zz_unknown', method: m, url, payload: { ...((baseBody as object) ?? {}), zz_unknown: 1 } },
            (f) => f === 'body.zz_unknown',
          ]);
        }
        for (const [c, names] of cases) {
          const res = await request(t.app, t.as.admin, { method: c.method as 'GET', url: c.url, payload: c.payload as object });
          const error = res.headers['content-type']?.toString().includes('json') ? res.json()?.error : undefined;
          const fields = ((error?.details?.fields ?? []) as { field: string }[]).map((f) => f.field);
          if (res.statusCode !== 400 || error?.code !== 'validation_error' || !fields.some(names)) {
            failures.push(`${c.method} ${path} ${c.what} → ${res.statusCode} ${res.body.slice(0, 160)}`);
          }
        }
      }
    }
    expect(operations).toBeGreaterThan(150);
    expect(failures).toEqual([]);
  });
});

describe('the public routes', () => {
  it('trial pages answer 400 to NUL in any form field or path, and a page rather than a crash', async () => {
    const pkg = await createTrialPackage(t.ctx);
    const visitor = new Visitor(injectTransport(t.app));
    await visitor.open();
    const fields = signupFields('nul@example.com', pkg.id);
    for (const name of Object.keys(fields)) {
      const page = await visitor.post('/saas/trial/submit', { ...fields, [name]: NUL });
      expect(page.status, name).toBe(400);
    }
    for (const [url, form] of [
      ['/saas/trial/verify', { token: NUL, code: '123456' }],
      ['/saas/trial/verify', { token: 'a'.repeat(64), code: NUL }],
      ['/saas/trial/resend', { token: NUL }],
    ] as const) {
      expect((await visitor.post(url, form)).status, `${url} ${JSON.stringify(form)}`).toBe(400);
    }
    expect((await visitor.open('/saas/trial/%00')).status).toBe(400);
    expect((await visitor.open('/saas/trial/a%00b')).status).toBe(400);
    const huge = String(2 ** 63);
    expect((await visitor.post('/saas/trial/submit', { ...fields, trial_package_id: huge })).status).toBe(400);
    expect(await t.ctx.db.trialVerification.count()).toBe(0);
  });

  it('the webhook endpoint answers 400 to NUL in the message and to an oversized body, and posts nothing', async () => {
    const partner = await t.ctx.db.partner.create({ data: { name: 'P', email: 'p@example.com' } });
    const hook = (
      await request(t.app, t.as.admin, {
        method: 'POST',
        url: '/api/v1/webhooks',
        payload: { model_name: 'res.partner', rec_id: partner.id },
      })
    ).json();
    const post = (url: string, payload: string) =>
      t.app.inject({ method: 'POST', url, headers: { 'content-type': 'application/json' }, payload });
    for (const payload of [JSON.stringify({ message: NUL }), JSON.stringify({ message: 'ok', message_type: NUL })]) {
      expect((await post(`/svc/webhook/${hook.token}`, payload)).statusCode).toBe(400);
    }
    const big = JSON.stringify({ message: 'x'.repeat(2 * 1024 * 1024) });
    expect((await post(`/svc/webhook/${'0'.repeat(64)}`, big)).statusCode).toBe(400);
    expect((await post(`/svc/webhook/${hook.token}`, big)).statusCode).toBe(400);
    expect((await post('/svc/webhook/%00', '{}')).statusCode).toBe(400);
    expect(
      await t.ctx.db.message.count({ where: { model_name: 'res.partner', rec_id: partner.id, message_type: { not: 'tracking' } } }),
    ).toBe(0);
  });
});
