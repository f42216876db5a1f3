// Caddy's on-demand TLS question (GET /svc/tls/ask?domain=…, public): yes (200) only for a live
// tenant's own address or a verified customer domain of a live tenant; no (404) for everything else,
// answered from unique-index lookups only (none at all for a malformed name), changing no row.
import { describe, expect, it, beforeAll } from 'vitest';
import { createTlsAsk } from '../src/domains/tls-ask.js';
import { useTestApp } from './helpers/app.js';

const t = useTestApp({
  env: { SUBSCRIPTION_URL: 'https://{database_name}.tenants.test', STAGING_URL: 'https://{database_name}.staging.tenants.test' },
});

const ask = (domain: string) => t.app.inject({ method: 'GET', url: `/svc/tls/ask?domain=${encodeURIComponent(domain)}` });

let n = 0;
async function subscription(data: { database_name: string | null; created?: boolean; dropped?: boolean; state?: 'running' | 'cancelled' }) {
  n += 1;
  const partner = await t.ctx.db.partner.create({ data: { name: `P ${n}`, email: `p${n}-${Date.now()}@example.com` } });
  return t.ctx.db.subscription.create({
    data: {
      name: `S ${n}`,
      partner_id: partner.id,
      state: data.state ?? 'running',
      database_name: data.database_name,
      database_created_at: data.created === false ? null : new Date(),
      database_dropped_at: data.dropped ? new Date() : null,
    },
  });
}

/** Every row the answers could change, as text. */
async function snapshot() {
  const [subs, domains, staging, logs] = await Promise.all([
    t.ctx.db.subscription.findMany({ orderBy: { id: 'asc' } }),
    t.ctx.db.domain.findMany({ orderBy: { id: 'asc' } }),
    t.ctx.db.stagingInstance.findMany({ orderBy: { id: 'asc' } }),
    t.ctx.db.actionLog.count(),
  ]);
  return JSON.stringify({ subs, domains, staging, logs }, (_k, v) => (typeof v === 'bigint' ? String(v) : v));
}

beforeAll(async () => {
  const live = await subscription({ database_name: 'acme_1' });
  await subscription({ database_name: 'gone_2', dropped: true });
  await subscription({ database_name: 'notyet_3', created: false });
  await subscription({ database_name: 'ended_4', state: 'cancelled', dropped: true });
  const dropped = await t.ctx.db.subscription.findUniqueOrThrow({ where: { database_name: 'gone_2' } });
  const copy = (database_name: string, state: 'creating' | 'ready' | 'refreshing' | 'failed') =>
    t.ctx.db.stagingInstance.create({
      data: {
        subscription_id: live.id,
        database_name,
        state,
        url: `https://${database_name}.staging.tenants.test`,
        expires_at: new Date(Date.now() + 86_400_000),
      },
    });
  await copy('acme_1_stg_aaaa', 'ready');
  await copy('acme_1_stg_bbbb', 'refreshing');
  await copy('acme_1_stg_cccc', 'creating');
  await copy('acme_1_stg_dddd', 'failed');
  const domain = (hostname: string, subscription_id: number, verified: boolean) =>
    t.ctx.db.domain.create({
      data: { hostname, subscription_id, verified_at: verified ? new Date() : null, state: verified ? 'active' : 'pending_dns' },
    });
  await domain('erp.acme.example', live.id, true);
  await domain('pending.acme.example', live.id, false);
  await domain('erp.gone.example', dropped.id, true);
});

describe('GET /svc/tls/ask', () => {
  it.each([
    'acme_1.tenants.test',
    'ACME_1.Tenants.Test.', // as a name is compared: lower case, no trailing dot
    'acme_1_stg_aaaa.staging.tenants.test',
    'acme_1_stg_bbbb.staging.tenants.test',
    'erp.acme.example',
  ])('yes for %s', async (domain) => {
    const res = await ask(domain);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ allowed: true });
  });

  it.each([
    ['unknown tenant', 'nobody_9.tenants.test'],
    ['dropped database', 'gone_2.tenants.test'],
    ['database never made', 'notyet_3.tenants.test'],
    ['cancelled and dropped', 'ended_4.tenants.test'],
    ['a live name under the staging pattern, no such copy', 'acme_1.staging.tenants.test'],
    ['staging copy being made', 'acme_1_stg_cccc.staging.tenants.test'],
    ['staging copy failed', 'acme_1_stg_dddd.staging.tenants.test'],
    ['a copy under the live pattern', 'acme_1_stg_aaaa.tenants.test'],
    ['another domain', 'acme_1.tenants.example'],
    ['a label more', 'x.acme_1.tenants.test'],
    ['the pattern base itself', 'tenants.test'],
    ['domain not verified', 'pending.acme.example'],
    ['verified domain of a dropped tenant', 'erp.gone.example'],
    ['unknown domain', 'shop.example.org'],
    ['malformed: space', 'acme_1 .tenants.test'],
    ['malformed: slash', 'acme_1.tenants.test/x'],
    ['malformed: port', 'acme_1.tenants.test:443'],
    ['malformed: wildcard', '*.tenants.test'],
    ['malformed: IP', '127.0.0.1:443'],
    ['too long', `${'a'.repeat(250)}.tenants.test`],
    ['SQL', "acme_1.tenants.test' OR '1'='1"],
  ])('no for %s (%s), changing nothing', async (_why, domain) => {
    const before = await snapshot();
    const res = await ask(domain);
    expect(res.statusCode, res.body).toBe(404);
    expect(res.json()).toEqual({ allowed: false });
    expect(await snapshot()).toBe(before);
  });

  it('no without a name (400), and public: no token needed', async () => {
    expect((await t.app.inject({ method: 'GET', url: '/svc/tls/ask' })).statusCode).toBe(400);
    expect((await t.app.inject({ method: 'GET', url: '/svc/tls/ask?domain=' })).statusCode).toBe(400);
    // Caddy asks with `domain` only: anything else is a caller's mistake, refused.
    expect((await t.app.inject({ method: 'GET', url: '/svc/tls/ask?domain=x.localhost&extra=1' })).statusCode).toBe(400);
  });
});

describe('lookups', () => {
  /** The database as the answer sees it, recording each model call. */
  function recordingDb() {
    const calls: string[] = [];
    const db = new Proxy(t.ctx.db, {
      get(target, model: string) {
        const delegate = (target as unknown as Record<string, Record<string, (arg: unknown) => unknown>>)[model];
        if (!delegate || typeof delegate !== 'object') return delegate;
        return new Proxy(delegate, {
          get(d, method: string) {
            return (arg: { where: Record<string, unknown> }) => {
              calls.push(`${model}.${method}(${Object.keys(arg?.where ?? {}).join(',')})`);
              return d[method]!(arg);
            };
          },
        });
      },
    });
    return { db, calls };
  }

  it('are by unique keys only (database_name, hostname), at most one per pattern and one for domains; none for a malformed name', async () => {
    const { db, calls } = recordingDb();
    const allowed = createTlsAsk({ db, config: t.ctx.config });
    expect(await allowed('acme_1.tenants.test')).toBe(true);
    expect(calls).toEqual(['subscription.findUnique(database_name)']);
    calls.length = 0;
    expect(await allowed('nobody_9.tenants.test')).toBe(false);
    // A name with '_' is no customer domain: not looked up there.
    expect(calls).toEqual(['subscription.findUnique(database_name)']);
    calls.length = 0;
    expect(await allowed('shop.example.org')).toBe(false);
    expect(calls).toEqual(['domain.findUnique(hostname)']);
    calls.length = 0;
    expect(await allowed('erp.acme.example')).toBe(true);
    expect(calls).toEqual(['domain.findUnique(hostname)']);
    calls.length = 0;
    for (const bad of ['a b', '*.tenants.test', 'x'.repeat(300), '']) expect(await allowed(bad)).toBe(false);
    expect(calls).toEqual([]);
  });
});
