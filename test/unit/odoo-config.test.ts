// The Odoo configuration setup_odoo writes, its sizing from the host, and the patterns that keep
// values out of a shell and out of the configuration file's other lines.
import { describe, expect, it } from 'vitest';
import { odooConfig, sizeWorkers } from '../../src/odoo/odoo-config.js';
import { odooLayout } from '../../src/odoo/odoo-layout.js';
import { basePath, dbfilter, moduleName, osPackage, sourceUrl, versionName } from '../../src/odoo/odoo-names.js';
import { odooPasswordHash, randomSecret } from '../../src/odoo/odoo-role.js';
import { scramVerifier } from '../../src/postgresql/role-password.js';
import { parseFacts, seriesOf } from '../../src/odoo/odoo-setup-steps.js';

const GB = 1024 ** 3;

describe('sizing', () => {
  it('takes 2 workers per core plus one, as far as the memory allows', () => {
    expect(sizeWorkers({ cores: 2, memoryBytes: 24 * GB }).workers).toBe(5);
    expect(sizeWorkers({ cores: 8, memoryBytes: 4 * GB }).workers).toBe(10);
    expect(sizeWorkers({ cores: 1, memoryBytes: 1 * GB }).workers).toBe(2);
    expect(sizeWorkers({ cores: 4, memoryBytes: 256 * 1024 ** 2 }).workers).toBe(1);
    expect(sizeWorkers({ cores: 4, memoryBytes: 8 * GB }, 0).workers).toBe(0);
  });

  it('gives each process its share of the memory, between 512 MB and 2 GB, hard at 1.25 × soft', () => {
    const big = sizeWorkers({ cores: 2, memoryBytes: 64 * GB });
    expect(big.limit_memory_soft).toBe(2 * GB);
    expect(big.limit_memory_hard).toBe(2.5 * GB);
    const small = sizeWorkers({ cores: 2, memoryBytes: 2 * GB }, 4, 1);
    expect(small.limit_memory_soft).toBe(512 * 1024 ** 2);
  });
});

describe('the configuration', () => {
  const base = {
    layout: odooLayout('/opt/odoo', 8069),
    source: '/opt/odoo/versions/18.0',
    addonsDirs: ['/opt/odoo/versions/18.0/odoo/addons'],
    httpPort: 8069,
    db: { host: '10.0.0.5', port: 5432, user: 'odoo_abc', password: 'pw' },
    adminPasswdHash: '$pbkdf2-sha512$600000$salt$hash',
    dbfilter: '^%d$',
    sizing: { workers: 3, limit_memory_soft: 1, limit_memory_hard: 2 },
    maxCronThreads: 1,
    serverWideModules: ['base', 'web'],
  };

  it('holds what a hosted Odoo needs', () => {
    const text = odooConfig({ ...base, series: 18 });
    for (const line of [
      '[options]',
      'db_user = odoo_abc',
      'list_db = False',
      'http_interface = 127.0.0.1',
      'http_port = 8069',
      'gevent_port = 8072',
      'proxy_mode = True',
      'data_dir = /opt/odoo/data',
      'dbfilter = ^%d$',
      'without_demo = all',
      'workers = 3',
      // svc's own addons: on the addons path, and its addon loaded by every process (request routing).
      'addons_path = /opt/odoo/versions/18.0/odoo/addons,/opt/odoo/svc-addons',
      'server_wide_modules = base,web,svc_instance',
    ]) {
      expect(text.split('\n')).toContain(line);
    }
    expect(odooConfig({ ...base, series: 19 }).split('\n')).toContain('without_demo = True');
  });

  it('reads the facts and the series the host reports', () => {
    expect(parseFacts('cores=4\nmemory=8589934592\nsystemd=no\n')).toEqual({ cores: 4, memoryBytes: 8 * GB, systemd: false });
    expect(seriesOf('Odoo Server 18.0+e-20241005')).toBe(18);
    expect(seriesOf('Odoo Server saas~19.1')).toBe(19);
    expect(() => seriesOf('Python 3.11')).toThrow(/not an Odoo server/);
  });
});

describe('values that reach a shell or the configuration', () => {
  it('refuses line breaks, spaces, quotes and shell characters', () => {
    for (const bad of ['^%d$\nlist_db = True', 'a b', "'", '`id`', '(']) expect(dbfilter.safeParse(bad).success, bad).toBe(false);
    for (const good of ['^%d$', '^%h$', '.*', '^(a|b)_[0-9]+$']) expect(dbfilter.safeParse(good).success, good).toBe(true);
    for (const bad of ['18.0;id', '../x', '.x', '-x', 'a b', 'a..b']) expect(versionName.safeParse(bad).success, bad).toBe(false);
    for (const bad of ['web,x', 'Web', 'a-b', '']) expect(moduleName.safeParse(bad).success, bad).toBe(false);
    for (const bad of ['-oX=y', 'a;b', 'A', 'a']) expect(osPackage.safeParse(bad).success, bad).toBe(false);
    for (const bad of ['http://x/a.tgz', 'https://u:p@x/a.tgz', "file:///a'b", 'file:///a/../b', 'file://host/a', 'ftp://x/a'])
      expect(sourceUrl.safeParse(bad).success, bad).toBe(false);
    for (const good of ['https://x.example/odoo-18.0.tar.gz?sig=1', 'file:///srv/odoo-18.0.tar.gz'])
      expect(sourceUrl.safeParse(good).success, good).toBe(true);
  });

  it('a base path is absolute and plain, never a system directory itself, nor inside one whose content does not last', () => {
    for (const bad of [
      'srv/odoo',
      '/srv/../etc',
      '/srv//odoo',
      '/srv/od oo',
      '/tmp',
      '/root',
      '/etc',
      '/usr',
      '/var',
      '/opt',
      '/proc/1',
      '/dev/shm/odoo',
      '/run/odoo',
    ])
      expect(basePath.safeParse(bad).success, bad).toBe(false);
    for (const good of ['/opt/odoo', '/srv/odoo-a', '/odoo', '/home/odoo', '/usr/local/odoo', '/var/lib/odoo', '/tmp/svc-odoo-x1'])
      expect(basePath.safeParse(good).success, good).toBe(true);
  });
});

describe('secrets', () => {
  it('are letters and digits, and reach PostgreSQL only as a SCRAM verifier', () => {
    const secret = randomSecret();
    expect(secret).toMatch(/^[A-Za-z0-9]{32}$/);
    const verifier = scramVerifier(secret);
    expect(verifier).toMatch(/^SCRAM-SHA-256\$4096:[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+$/);
    expect(verifier).not.toContain(secret);
  });

  it('hash the master password the way Odoo reads it, the same line for the same password', async () => {
    const a = await odooPasswordHash('master-pw', 1000);
    expect(a).toMatch(/^\$pbkdf2-sha512\$1000\$[A-Za-z0-9./]+\$[A-Za-z0-9./]+$/);
    expect(await odooPasswordHash('master-pw', 1000)).toBe(a);
    expect(await odooPasswordHash('other-pw', 1000)).not.toBe(a);
  });
});
