// Configuration parsing, and a real start-up refusing a bad value (spawned process).
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/core/config.js';
import { runEntry } from './helpers/spawn.js';

describe('config', () => {
  it('has the DESIGN §2 defaults', () => {
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
    });
    expect(config.SMTP_URL).toBeUndefined();
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
  ])('refuses %s=%s naming the variable', (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(ConfigError);
    expect(() => loadConfig({ [name]: value })).toThrow(new RegExp(`\\b${name}\\b`));
  });

  it('npm start stops with a message naming the bad variable', () => {
    const result = runEntry('src/main.ts', [], { PORT: 'eighty' });
    expect(result.status).toBe(1);
    expect(result.stderr.trim().split('\n')).toEqual(['Invalid configuration:', expect.stringMatching(/^ {2}PORT: /)]);
  });
});
