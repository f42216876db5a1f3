// The host name rule of customer domains (src/domains/hostname.ts) and the Caddy site files made
// from it (src/domains/caddy-sites.ts), which check again what reaches a file name or the config.
// Needs no service: the domains on real Caddy are in test/domains.test.ts.
import { describe, expect, it } from 'vitest';
import { siteConfig, siteFileOf } from '../../src/domains/caddy-sites.js';
import { normalizeHostname } from '../../src/domains/hostname.js';

const refusal = (input: string) => {
  try {
    normalizeHostname(input, 'svc.example.com');
    return null;
  } catch (err) {
    return (err as { details: { fields: { field: string; message: string }[] } }).details.fields;
  }
};

describe('normalizeHostname', () => {
  it('stores lower-case IDNA ASCII, without the trailing dot', () => {
    expect(normalizeHostname(' Shop.Example.COM. ', 'svc.example.com')).toBe('shop.example.com');
    expect(normalizeHostname('bücher.example', 'svc.example.com')).toBe('xn--bcher-kva.example');
    expect(normalizeHostname('example.com', 'svc.example.com')).toBe('example.com');
  });

  it.each([
    ['203.0.113.5', 'is an IP address, not a host name'],
    ['[2001:db8::1]', 'is an IP address, not a host name'],
    ['::ffff:127.0.0.1', 'is an IP address, not a host name'],
    ['1.2.3.4.5', 'is an IP address, not a host name'],
    ['*.example.com', 'is a wildcard: give each host name on its own'],
    ['shop.*.example.com', 'is a wildcard: give each host name on its own'],
    ['SVC.example.com', "is the service's own host (BASE_URL)"],
    ['localhost', 'must be a fully qualified name (example.com or shop.example.com)'],
    [`${'a'.repeat(64)}.com`, 'has an invalid label (1 to 63 letters, digits or "-", not starting or ending with "-")'],
    ['a..com', 'has an invalid label (1 to 63 letters, digits or "-", not starting or ending with "-")'],
    ['-a.com', 'has an invalid label (1 to 63 letters, digits or "-", not starting or ending with "-")'],
    ['a_b.com', 'may hold only letters, digits, "-" and "."'],
    ['0x7f.1', 'is an IP address, not a host name'],
    ['a b.com', 'may hold only letters, digits, "-" and "."'],
    ['a.com/x', 'may hold only letters, digits, "-" and "."'],
    ['a.com:80', 'may hold only letters, digits, "-" and "."'],
    ['a.com#x', 'may hold only letters, digits, "-" and "."'],
    ['a@b.com', 'may hold only letters, digits, "-" and "."'],
    [`${'abcdefgh.'.repeat(28)}com`, 'is longer than 253 characters'],
  ])('%s: 400 naming hostname', (input, message) => {
    expect(refusal(input)).toEqual([{ field: 'hostname', message }]);
  });
});

describe('site files', () => {
  const site = { hostname: 'erp.example.com', database: 'acme_42', odooPort: 8069 };

  it("proxy to Odoo on loopback with the tenant's database in X-Odoo-Database (its other spellings removed), one file per database and name", () => {
    expect(siteFileOf(site)).toBe('/etc/caddy/svc.d/acme_42--erp.example.com.caddy');
    expect(siteConfig(site)).toBe(
      [
        '# acme_42: written by svc',
        'erp.example.com {',
        // The web client's websocket: Odoo's evented port (workers), else its HTTP port (no workers).
        '\treverse_proxy /websocket 127.0.0.1:8072 127.0.0.1:8069 {',
        '\t\tlb_policy first',
        '\t\tlb_try_duration 2s',
        '\t\tfail_duration 30s',
        // The header's other spellings a client could send (Caddy passes them; a WSGI server may read
        // them as it), and the host's secret (svc's own calls on the host only).
        '\t\theader_up -X_Odoo_Database',
        '\t\theader_up -X-Odoo_Database',
        '\t\theader_up -X_Odoo-Database',
        '\t\theader_up -X-Svc-Host-Secret',
        '\t\theader_up X-Odoo-Database acme_42',
        '\t}',
        '\treverse_proxy 127.0.0.1:8069 {',
        '\t\theader_up -X_Odoo_Database',
        '\t\theader_up -X-Odoo_Database',
        '\t\theader_up -X_Odoo-Database',
        '\t\theader_up -X-Svc-Host-Secret',
        '\t\theader_up X-Odoo-Database acme_42',
        '\t}',
        '}',
        '',
      ].join('\n'),
    );
  });

  it.each([
    { ...site, hostname: 'erp.example.com {\n}\n:80' },
    { ...site, hostname: '../../etc/passwd' },
    { ...site, database: '../x' },
    { ...site, database: 'a$b' },
    { ...site, database: 'Acme' },
    { ...site, odooPort: 0 },
  ])('refuse what was not checked: %j', (bad) => {
    expect(() => siteFileOf(bad)).toThrow();
    expect(() => siteConfig(bad)).toThrow();
  });
});
