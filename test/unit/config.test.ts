// Configuration parsing, and a real start-up refusing a bad value (spawned process).
import { describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ConfigError, environment, loadConfig } from '../../src/core/config.js';
import { runEntry } from '../helpers/spawn.js';

describe('config', () => {
  it('has the documented defaults', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      DATABASE_URL: 'postgresql://postgres@127.0.0.1:5432/svc',
      REDIS_URL: 'redis://127.0.0.1:6379',
      PORT: 3000,
      HOST: '0.0.0.0',
      BASE_URL: 'http://localhost:3000',
      MAIL_FROM: 'svc <no-reply@localhost>',
      SVC_MASTER_KEY_FILE: './data/master.key',
      GIT_API_URL: 'https://api.github.com',
      SVC_ROLE: 'all',
      LOG_LEVEL: 'info',
      TRUST_PROXY: false,
      FCM_API_URL: 'https://fcm.googleapis.com',
      JOB_LOCK_MS: 30_000,
      JOB_STALLED_INTERVAL_MS: 30_000,
      SUBSCRIPTION_URL: 'http://{database_name}.localhost',
      BACKUP_WAIT_MS: 3_600_000,
      BACKUP_POLL_MS: 2_000,
    });
    expect(config.SMTP_URL).toBeUndefined();
    expect(loadConfig({ SUBSCRIPTION_URL: 'https://odoo.example.com/web?db={database_name}' }).SUBSCRIPTION_URL).toBe(
      'https://odoo.example.com/web?db={database_name}',
    );
  });

  it('parses values', () => {
    const config = loadConfig({ PORT: '8080', SVC_ROLE: 'worker', TRUST_PROXY: '10.0.0.1, 192.168.0.0/16', BASE_URL: 'https://x.io/' });
    expect(config.PORT).toBe(8080);
    expect(config.SVC_ROLE).toBe('worker');
    expect(config.TRUST_PROXY).toEqual(['10.0.0.1', '192.168.0.0/16']);
    expect(config.BASE_URL).toBe('https://x.io');
  });

  it.each([
    ['PORT', 'eighty'],
    ['PORT', '70000'],
    ['DATABASE_URL', 'mysql://x/y'],
    ['REDIS_URL', 'not a url'],
    ['SVC_ROLE', 'both'],
    ['LOG_LEVEL', 'loud'],
    ['SMTP_URL', 'http://mail'],
    ['BASE_URL', 'ftp://x'],
    ['JOB_LOCK_MS', '100'],
    ['JOB_STALLED_INTERVAL_MS', '0'],
    ['SUBSCRIPTION_URL', 'https://odoo.example.com'],
    ['SUBSCRIPTION_URL', 'ftp://{database_name}.example.com'],
    ['TENANT_TLS_DNS', 'cloudflare x\n}\nhttp://evil {'],
    ['TENANT_TLS_DNS', 'cloudflare "token"'],
    ['BACKUP_WAIT_MS', '0'],
  ])('refuses %s=%s naming the variable', (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(ConfigError);
    expect(() => loadConfig({ [name]: value })).toThrow(new RegExp(`\\b${name}\\b`));
  });

  it('REDIS_SENTINELS: host:port pairs (IPv6 bracketed); anything else names the bad item', () => {
    expect(loadConfig({}).REDIS_SENTINELS).toBeUndefined();
    const config = loadConfig({ REDIS_SENTINELS: ' 10.0.0.1:26379, sentinel-b:26380,[::1]:26381 ', REDIS_SENTINEL_NAME: 'svc-primary' });
    expect(config.REDIS_SENTINELS).toEqual([
      { host: '10.0.0.1', port: 26379 },
      { host: 'sentinel-b', port: 26380 },
      { host: '::1', port: 26381 },
    ]);
    expect(config.REDIS_SENTINEL_NAME).toBe('svc-primary');
    expect(loadConfig({}).REDIS_SENTINEL_NAME).toBe('mymaster');
    expect(() => loadConfig({ REDIS_SENTINELS: '10.0.0.1:26379,10.0.0.2' })).toThrow(/REDIS_SENTINELS: not host:port: 10\.0\.0\.2/);
    expect(() => loadConfig({ REDIS_SENTINELS: ',' })).toThrow(/REDIS_SENTINELS: names no host:port/);
  });

  it('an empty number (PORT= in .env) is unset, not 0', () => {
    const config = loadConfig({ PORT: '', WORKER_CONCURRENCY: '', JOB_LOCK_MS: '' });
    expect(config).toMatchObject({ PORT: 3000, WORKER_CONCURRENCY: 10, JOB_LOCK_MS: 30_000 });
  });

  it('reads .env of the working directory; a variable already set wins; no file, no change', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'svc-env-'));
    try {
      expect(environment(dir, { PORT: '1' })).toEqual({ PORT: '1' });
      writeFileSync(path.join(dir, '.env'), '# comment\nPORT=4000\nBASE_URL="https://svc.example.com"\nLOG_LEVEL=warn\n');
      const config = loadConfig(environment(dir, { LOG_LEVEL: 'debug' }));
      expect(config).toMatchObject({ PORT: 4000, BASE_URL: 'https://svc.example.com', LOG_LEVEL: 'debug' });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('npm start stops with a message naming the bad variable', () => {
    const result = runEntry('src/main.ts', [], { PORT: 'eighty' });
    expect(result.status).toBe(1);
    expect(result.stderr.trim().split('\n')).toEqual(['Invalid configuration:', expect.stringMatching(/^ {2}PORT: /)]);
  });
});
