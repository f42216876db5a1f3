// What keeps an Odoo host's loopback out of a tenant's reach, as svc writes it: Caddy's admin API
// on a Unix socket (the main Caddyfile, and the reload that finds it or, on a host set up before
// it, Caddy's default address), and the host's secret in Odoo's configuration file. The reload
// (host/caddy.sh) runs here in sh with a stand-in `caddy` that prints the address it was given. Needs no service:
// the real Caddy is in test/domains.test.ts, the real Odoo in test-odoo/odoo-routing.test.ts.
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { odooConfig, sizeWorkers } from '../../src/odoo/odoo-config.js';
import { odooLayout } from '../../src/odoo/odoo-layout.js';
import { CADDY_ADMIN_SOCKET, mainCaddyfile } from '../../src/servers/caddy.js';

const caddyProgram = readFileSync(new URL('../../src/servers/host/caddy.sh', import.meta.url), 'utf8');

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
      // The same program, with the socket's directory one this test can make (the paths are its arguments).
      const args = ['/etc/caddy/Caddyfile', path.join(dir, 'svc.d'), path.join(dir, 'svc.log'), dir, 'reload'];
      const run = () =>
        execFileSync('sh', ['-c', caddyProgram, 'svc-caddy', ...args], { env: { PATH: `${dir}:/usr/bin:/bin` }, encoding: 'utf8' }).trim();
      expect(run()).toBe('reload --config /etc/caddy/Caddyfile --adapter caddyfile --address localhost:2019');
      const socket = path.join(dir, 'admin.sock');
      execFileSync('python3', ['-c', `import socket; socket.socket(socket.AF_UNIX).bind(${JSON.stringify(socket)})`]);
      expect(run()).toBe(`reload --config /etc/caddy/Caddyfile --adapter caddyfile --address unix/${socket}`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a site change on a host without setup_proxy is refused in words (exit code 3), not with the shell's own error", () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'svc-caddy-lock-'));
    try {
      const sites = path.join(dir, 'svc.d');
      const res = spawnSync(
        'sh',
        ['-c', caddyProgram, 'svc-caddy', '/etc/caddy/Caddyfile', sites, path.join(dir, 'svc.log'), dir, 'write-site', `${sites}/x.caddy`],
        {
          input: 'x {\n}\n',
          encoding: 'utf8',
        },
      );
      expect(res.status).toBe(3);
      expect(res.stderr).toBe(`Cannot open ${sites}/.lock: run setup_proxy on the root server first\n`);
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
