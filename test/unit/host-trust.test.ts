// What keeps an Odoo host's loopback out of a tenant's reach, as svc writes it: Caddy's admin API
// on a Unix socket (the main Caddyfile, and the reload that finds it or, on a host set up before
// it, Caddy's default address), and the host's secret in Odoo's configuration file. The reload
// runs here in sh with a stand-in `caddy` that prints the address it was given. Needs no service:
// the real Caddy is in test/domains.test.ts, the real Odoo in test-odoo/odoo-routing.test.ts.
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { odooConfig, sizeWorkers } from '../../src/odoo/odoo-config.js';
import { odooLayout } from '../../src/odoo/odoo-layout.js';
import { CADDY_ADMIN_SOCKET, CADDY_RELOAD, mainCaddyfile } from '../../src/servers/caddy.js';

describe("Caddy's admin API", () => {
  it('the main Caddyfile puts it on the Unix socket, first of the global options', () => {
    const text = mainCaddyfile({ acmeCaUrl: 'https://acme.example/directory', acmeRoot: false });
    expect(text.split('\n').slice(1, 3)).toEqual(['{', `\tadmin unix/${CADDY_ADMIN_SOCKET}`]);
    expect(CADDY_ADMIN_SOCKET).toBe('/var/lib/caddy/svc-admin/admin.sock');
  });

  it('a reload goes through the socket when there is one, else through the address a host set up before still listens on', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'svc-caddy-reload-'));
    try {
      writeFileSync(path.join(dir, 'caddy'), '#!/bin/sh\necho "$@"\n');
      chmodSync(path.join(dir, 'caddy'), 0o755);
      const socket = path.join(dir, 'admin.sock');
      // The same command, with the socket's path swapped for one this test can make.
      const script = CADDY_RELOAD.replaceAll(CADDY_ADMIN_SOCKET, socket);
      const run = () => execFileSync('sh', ['-c', script], { env: { PATH: `${dir}:/usr/bin:/bin` }, encoding: 'utf8' }).trim();
      expect(run()).toBe('reload --config /etc/caddy/Caddyfile --adapter caddyfile --address localhost:2019');
      execFileSync('python3', ['-c', `import socket; socket.socket(socket.AF_UNIX).bind(${JSON.stringify(socket)})`]);
      expect(run()).toBe(`reload --config /etc/caddy/Caddyfile --adapter caddyfile --address unix/${socket}`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("the host's secret in Odoo's configuration file", () => {
  const input = {
    layout: odooLayout('/opt/odoo', 8069),
    source: '/opt/odoo/versions/18.0',
    series: 18,
    addonsDirs: ['/opt/odoo/versions/18.0/odoo/addons'],
    httpPort: 8069,
    db: { host: '10.0.0.2', port: 5432, user: 'odoo_x', password: 'pw' },
    adminPasswdHash: 'hash',
    dbfilter: '^%d$',
    sizing: sizeWorkers({ cores: 2, memoryBytes: 4 * 1024 ** 3 }),
    maxCronThreads: 1,
    serverWideModules: ['base', 'web'],
  };

  it("is a section of svc's own after Odoo's options (Odoo reads only [options])", () => {
    const text = odooConfig({ ...input, hostSecret: 'S3cr3t' });
    expect(text.endsWith('\n[svc]\nhost_secret = S3cr3t\n')).toBe(true);
    expect(text.indexOf('[options]')).toBeLessThan(text.indexOf('[svc]'));
    expect(odooConfig(input)).not.toContain('[svc]');
  });
});
