// The tenants' own addresses as Caddy serves them (src/servers/tenant-sites.ts): the host pattern of
// SUBSCRIPTION_URL / STAGING_URL, the site setup_proxy writes for it and the names it stands for.
// Needs no service: the site on a real Caddy is in test/tenant-sites-caddy.test.ts.
import { describe, expect, it } from 'vitest';
import { mainCaddyfile } from '../../src/servers/caddy.js';
import { hostPatternOf, tenantHostPatterns, tenantSitesConfig, tenantsOfHostname, tlsAskUrl } from '../../src/servers/tenant-sites.js';

const config = (SUBSCRIPTION_URL: string, STAGING_URL = 'http://{database_name}.staging.localhost') => ({ SUBSCRIPTION_URL, STAGING_URL });

describe('host patterns', () => {
  it('reads the part around {database_name}, the port Caddy listens on and the site address', () => {
    expect(hostPatternOf('SUBSCRIPTION_URL', 'http://{database_name}.localhost')).toMatchObject({
      kind: 'subscription',
      before: '',
      after: '.localhost',
      https: false,
      port: 80,
      explicitPort: false,
      siteHost: '*.localhost',
    });
    expect(hostPatternOf('STAGING_URL', 'https://odoo-{database_name}.Example.com:8443/web')).toMatchObject({
      kind: 'staging',
      before: 'odoo-',
      after: '.example.com',
      https: true,
      port: 8443,
      explicitPort: true,
      siteHost: '*.example.com',
    });
    // The database in the path or query: nothing to serve by host name.
    expect(hostPatternOf('SUBSCRIPTION_URL', 'https://odoo.example.com/web?db={database_name}')).toBeNull();
  });

  it('names the database a host name stands for, only a database name', () => {
    const patterns = tenantHostPatterns(config('https://{database_name}.example.com', 'https://{database_name}.staging.example.com'));
    expect(tenantsOfHostname(patterns, 'acme_7.example.com')).toEqual([{ kind: 'subscription', database: 'acme_7' }]);
    expect(tenantsOfHostname(patterns, 'acme_7_stg_0a1b2c3d.staging.example.com')).toEqual([
      { kind: 'staging', database: 'acme_7_stg_0a1b2c3d' },
    ]);
    for (const name of [
      'example.com',
      '.example.com',
      'a.b.example.com',
      '7acme.example.com',
      'acme-7.example.com',
      'acme_7.example.org',
      'x.acme_7.example.com',
    ]) {
      expect(tenantsOfHostname(patterns, name), name).toEqual([]);
    }
    // The same pattern twice is one.
    expect(tenantHostPatterns(config('http://{database_name}.localhost', 'http://{database_name}.localhost'))).toHaveLength(1);
  });
});

describe('the site', () => {
  it('plain HTTP for *.localhost: the database from the host name, /websocket to the evented port, the client header removed in every spelling', () => {
    const site = tenantSitesConfig(
      tenantHostPatterns(config('http://{database_name}.localhost', 'http://{database_name}.localhost')),
      8069,
      'root server 1',
    );
    expect(site).toBe(
      [
        "# The tenants' own addresses (SUBSCRIPTION_URL): written by svc",
        'http://*.localhost {',
        '\t@subscription header_regexp subscription Host ^([a-z_][a-z0-9_]*)\\.localhost(?::[0-9]+)?$',
        '\thandle @subscription {',
        '\t\treverse_proxy /websocket 127.0.0.1:8072 127.0.0.1:8069 {',
        '\t\t\tlb_policy first',
        '\t\t\tlb_try_duration 2s',
        '\t\t\tfail_duration 30s',
        '\t\t\theader_up -X_Odoo_Database',
        '\t\t\theader_up -X-Odoo_Database',
        '\t\t\theader_up -X_Odoo-Database',
        '\t\t\theader_up -X-Svc-Host-Secret',
        '\t\t\theader_up X-Odoo-Database {re.subscription.1}',
        '\t\t}',
        '\t\treverse_proxy 127.0.0.1:8069 {',
        '\t\t\theader_up -X_Odoo_Database',
        '\t\t\theader_up -X-Odoo_Database',
        '\t\t\theader_up -X_Odoo-Database',
        '\t\t\theader_up -X-Svc-Host-Secret',
        '\t\t\theader_up X-Odoo-Database {re.subscription.1}',
        '\t\t}',
        '\t}',
        '\thandle {',
        '\t\trespond "No instance at this address" 404',
        '\t}',
        '}',
        '',
      ].join('\n'),
    );
  });

  it('HTTPS by on-demand TLS; two patterns of one address share its block; the main Caddyfile asks svc', () => {
    const patterns = tenantHostPatterns(config('https://{database_name}.example.com', 'https://stg-{database_name}.example.com'));
    const site = tenantSitesConfig(patterns, 18069, 'root server 1');
    expect(site.match(/^https:\/\/\*\.example\.com \{$/gm)).toHaveLength(1);
    expect(site).toContain('\ttls {\n\t\ton_demand\n\t}');
    expect(site).toContain('\t@subscription header_regexp subscription Host ^([a-z_][a-z0-9_]*)\\.example\\.com(?::[0-9]+)?$');
    expect(site).toContain('\t@staging header_regexp staging Host ^stg-([a-z_][a-z0-9_]*)\\.example\\.com(?::[0-9]+)?$');
    expect(site).toContain('reverse_proxy /websocket 127.0.0.1:18072 127.0.0.1:18069 {');
    expect(site).toContain('header_up X-Odoo-Database {re.staging.1}');
    const main = mainCaddyfile({
      acmeCaUrl: 'https://acme.test/dir',
      acmeRoot: false,
      tenantSites: site,
      onDemandAsk: tlsAskUrl({ BASE_URL: 'https://svc.example.com' }),
    });
    expect(main).toContain('\ton_demand_tls {\n\t\task https://svc.example.com/svc/tls/ask\n\t}');
    expect(main.endsWith(site)).toBe(true);
  });

  it("refuses a pattern on Odoo's own port (Caddy could not listen there), saying what to do", () => {
    for (const port of [8069, 8072]) {
      expect(() =>
        tenantSitesConfig(tenantHostPatterns(config(`http://{database_name}.localhost:${port}`)), 8069, 'root server 3'),
      ).toThrow(
        `SUBSCRIPTION_URL's port ${port} is one Odoo listens on on root server 3 (8069 and 8072): Caddy cannot serve the tenants' addresses there. Leave the port out of SUBSCRIPTION_URL`,
      );
    }
    expect(tenantSitesConfig(tenantHostPatterns(config('http://{database_name}.localhost:8080')), 8069, 'root server 3')).toContain(
      'http://*.localhost:8080 {',
    );
  });

  it('TENANT_TLS_DNS: one wildcard certificate through the DNS provider instead of on-demand TLS', () => {
    const patterns = tenantHostPatterns(config('https://{database_name}.example.com'));
    const site = tenantSitesConfig(patterns, 8069, 'root server 1', 'cloudflare {env.CF_API_TOKEN}');
    expect(site).toContain('https://*.example.com {\n\ttls {\n\t\tdns cloudflare {env.CF_API_TOKEN}\n\t}');
    expect(site).not.toContain('on_demand');
    // Plain HTTP patterns stay without TLS.
    expect(tenantSitesConfig(tenantHostPatterns(config('http://{database_name}.localhost')), 8069, 'x', 'cloudflare x')).not.toContain(
      'tls',
    );
  });

  it('no pattern, no site', () => {
    expect(tenantSitesConfig([], 8069, 'root server 1')).toBe('');
  });
});
