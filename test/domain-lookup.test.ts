// The DNS Resolver setting and the domain-lookup helper over the real API and PostgreSQL: real DNS
// queries over UDP to two local name servers (node:dgram) standing in for Cloudflare and Google
// (their addresses come from DNS_CLOUDFLARE_SERVERS / DNS_GOOGLE_SERVERS), and the machine's own
// system resolver for `local`.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDomainLookup } from '../src/settings/domain-lookup.js';
import { request } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';
import { startDnsServer, type DnsServer } from './helpers/dns-server.js';

let cloudflare: DnsServer;
let google: DnsServer;

beforeAll(async () => {
  cloudflare = await startDnsServer({ 'shop.example.com': ['203.0.113.10', '203.0.113.11'] }, ['slow.example.com']);
  google = await startDnsServer({ 'shop.example.com': ['198.51.100.7'] });
});
afterAll(async () => {
  await cloudflare?.close();
  await google?.close();
});

const t = useTestApp({
  env: () => ({ DNS_CLOUDFLARE_SERVERS: cloudflare.address, DNS_GOOGLE_SERVERS: google.address, OUTBOUND_TIMEOUT_MS: '500' }),
});

const lookup = (domain: string, caller = t.as.operator) =>
  request(t.app, caller, { method: 'POST', url: '/api/v1/settings/actions/lookup_domain', payload: { domain } });
const setResolver = (dns_resolver: string) =>
  request(t.app, t.as.admin, { method: 'PATCH', url: '/api/v1/settings', payload: { dns_resolver } });

describe('settings', () => {
  it('defaults: Keep Root Server Log Period 2, DNS Resolver cloudflare; readable by users, changed by administrators', async () => {
    const res = await request(t.app, t.as.user, { method: 'GET', url: '/api/v1/settings' });
    expect(res.json()).toMatchObject({ keep_root_server_log_period: 2, dns_resolver: 'cloudflare' });
    expect(
      (await request(t.app, t.as.operator, { method: 'PATCH', url: '/api/v1/settings', payload: { dns_resolver: 'google' } })).statusCode,
    ).toBe(403);
    expect(
      (await request(t.app, t.as.admin, { method: 'PATCH', url: '/api/v1/settings', payload: { keep_root_server_log_period: 0 } }))
        .statusCode,
    ).toBe(400);
  });
});

describe('lookup_domain', () => {
  it('cloudflare (the default) asks the Cloudflare servers, A and AAAA', async () => {
    const res = await lookup('Shop.Example.com.');
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({
      domain: 'shop.example.com',
      resolver: 'cloudflare',
      servers: [cloudflare.address],
      addresses: ['203.0.113.10', '203.0.113.11'],
    });
    expect(cloudflare.queries).toEqual(
      expect.arrayContaining([
        { name: 'shop.example.com', type: 1 },
        { name: 'shop.example.com', type: 28 },
      ]),
    );
    expect(google.queries).toEqual([]);
    const log = await t.ctx.db.actionLog.findFirst({
      where: { model_name: 'svc.settings', action_type: 'api_call' },
      orderBy: { id: 'desc' },
    });
    expect(log).toMatchObject({ status: 'success', user_id: t.as.operator.userId, output_text: '203.0.113.10\n203.0.113.11' });
    expect(log!.input_text).toBe(`DNS lookup of shop.example.com via cloudflare (${cloudflare.address})`);
  });

  it('google asks the Google servers once the setting says so', async () => {
    expect((await setResolver('google')).statusCode).toBe(200);
    const asked = cloudflare.queries.length;
    const res = await lookup('shop.example.com');
    expect(res.json()).toMatchObject({ resolver: 'google', servers: [google.address], addresses: ['198.51.100.7'] });
    expect(google.queries.map((q) => q.name)).toContain('shop.example.com');
    expect(cloudflare.queries.length).toBe(asked);
  });

  it('local uses the system resolver (localhost from /etc/hosts) and asks neither server', async () => {
    await setResolver('local');
    const asked = cloudflare.queries.length + google.queries.length;
    const res = await lookup('localhost');
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ resolver: 'local', servers: ['system'] });
    expect(res.json().addresses.some((a: string) => a === '127.0.0.1' || a === '::1')).toBe(true);
    expect(cloudflare.queries.length + google.queries.length).toBe(asked);
    await setResolver('cloudflare');
  });

  it('a domain that does not exist, and a server that does not answer, are clear 400s logged as failures', async () => {
    const missing = await lookup('nothing-here.example.com');
    expect(missing.statusCode).toBe(400);
    expect(missing.json().error).toMatchObject({
      code: 'user_error',
      message: `DNS lookup of nothing-here.example.com via cloudflare (${cloudflare.address}): the domain does not exist (NXDOMAIN)`,
    });
    const slow = await lookup('slow.example.com');
    expect(slow.statusCode).toBe(400);
    expect(slow.json().error.message).toMatch(/slow\.example\.com via cloudflare .*: no answer within 500 ms$/);
    const failures = await t.ctx.db.actionLog.count({ where: { model_name: 'svc.settings', action_type: 'api_call', status: 'failure' } });
    expect(failures).toBe(2);
  });

  it('refuses what is not a domain name, and users may not run lookups', async () => {
    for (const domain of ['not a domain', '-bad-.example.com', 'a..b', `${'x'.repeat(64)}.com`]) {
      const res = await lookup(domain);
      expect(res.statusCode, domain).toBe(400);
      expect(res.json().error.code).toBe('validation_error');
    }
    expect((await lookup('shop.example.com', t.as.user)).statusCode).toBe(403);
  });

  it('the helper is usable from other features, logging against their record', async () => {
    const helper = createDomainLookup(t.ctx);
    const result = await helper.lookup('shop.example.com', { model_name: 'svc.root.server', rec_id: 42 });
    expect(result.addresses).toEqual(['203.0.113.10', '203.0.113.11']);
    expect(await t.ctx.db.actionLog.count({ where: { model_name: 'svc.root.server', rec_id: 42 } })).toBe(1);
    // IDN names are looked up in their ASCII form.
    await expect(helper.lookup('bücher.example.com')).rejects.toThrow(/xn--bcher-kva\.example\.com .*NXDOMAIN/);
  });
});
