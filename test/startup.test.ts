// Starting the service as a user does (`npm start` = src/main.ts as a child process), with
// PostgreSQL or Redis out of reach: one line naming the variable and the address, exit status 1,
// no stack trace. Real PostgreSQL for the Redis case (its database is created and migrated first).
import { describe, expect, it } from 'vitest';
import { databaseUrl, dropDatabase } from './helpers/pg.js';
import { runEntry } from './helpers/spawn.js';

describe('start-up with a service out of reach', () => {
  it('PostgreSQL refused: one line naming DATABASE_URL and the address', () => {
    const result = runEntry('src/main.ts', [], { DATABASE_URL: 'postgresql://svc:secret-pw@127.0.0.1:1/svc', LOG_LEVEL: 'silent' });
    expect(result.status).toBe(1);
    const lines = result.stderr.trim().split('\n');
    expect(lines).toEqual([expect.stringMatching(/^Cannot use PostgreSQL at 127\.0\.0\.1:1 \(DATABASE_URL\): .*ECONNREFUSED/)]);
    expect(result.stderr).not.toContain('secret-pw');
  });

  it('Redis refused: one line naming REDIS_URL and the address, once (not per queue)', async () => {
    const name = `svc_startup_${process.pid}_${Date.now().toString(36)}`;
    try {
      const result = runEntry('src/main.ts', [], {
        DATABASE_URL: databaseUrl(name),
        REDIS_URL: 'redis://127.0.0.1:1',
        LOG_LEVEL: 'silent',
      });
      expect(result.status).toBe(1);
      expect(result.stderr.trim().split('\n')).toEqual([
        expect.stringMatching(/^Cannot reach Redis at 127\.0\.0\.1:1 \(REDIS_URL\): .*ECONNREFUSED/),
      ]);
    } finally {
      await dropDatabase(name);
    }
  });

  it('the CLI says the same', () => {
    const result = runEntry('src/cli.ts', ['migrate'], { DATABASE_URL: 'postgresql://postgres@127.0.0.1:1/svc' });
    expect(result.status).toBe(1);
    expect(result.stderr.trim()).toMatch(/^Cannot use PostgreSQL at 127\.0\.0\.1:1 \(DATABASE_URL\): /);
  });
});
