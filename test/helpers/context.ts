// A service context for one test file, on real parts: a fresh PostgreSQL database cloned from the
// run's migrated template, the real Redis under a key prefix of its own, a temporary master key,
// and a logger whose lines are kept in memory so tests can read them.
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { inject } from 'vitest';
import { loadConfig } from '../../src/core/config.js';
import { loggerOptions } from '../../src/core/logger.js';
import { createContext, type AppContext } from '../../src/context.js';
import { clusterSnapshot, dropWhatWasMade } from './cluster-cleanup.js';
import { adminQuery, databaseUrl, REDIS_URL } from './pg.js';
import { LOOPBACK_DEFAULTS } from './loopback.js';

export interface TestContext extends AppContext {
  dbName: string;
  /** Every log line written so far, as raw JSON text. */
  logText(): string;
  cleanup(): Promise<void>;
}

export async function createTestContext(env: Record<string, string> = {}): Promise<TestContext> {
  const run = inject('dbRun');
  const before = await clusterSnapshot();
  const dbName = `${run}_${randomBytes(4).toString('hex')}`;
  await adminQuery(`CREATE DATABASE "${dbName}" TEMPLATE "${run}_tpl"`);
  const dir = await mkdtemp(path.join(tmpdir(), 'svc-test-'));

  const config = loadConfig({
    DATABASE_URL: databaseUrl(dbName),
    REDIS_URL,
    QUEUE_PREFIX: dbName,
    SVC_MASTER_KEY_FILE: path.join(dir, 'master.key'),
    // Mails without an SMTP server are files: in the test's own folder, never the project's data/.
    MAIL_DIR: path.join(dir, 'mail'),
    BASE_URL: 'http://svc.test',
    LOG_LEVEL: 'info',
    // Every stand-in of a third-party API listens on loopback, which the outbound guard refuses by default.
    OUTBOUND_ALLOW_NETS: '127.0.0.0/8,::1/128',
    ...LOOPBACK_DEFAULTS,
    ...env,
  });
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  const ctx = await createContext(config, pino(loggerOptions(config.LOG_LEVEL), sink));
  // The daily backup schedule (on by default, 01:00–07:00 UTC) would back up a file's subscriptions
  // while its tests run, at some hours of the day only: off, unless a test turns it on.
  await ctx.db.settings.update({ where: { id: 1 }, data: { backup_schedule_enabled: false } });

  return Object.assign(ctx, {
    dbName,
    logText: () => lines.join(''),
    async cleanup() {
      await deleteRedisKeys(ctx, `${config.QUEUE_PREFIX}:*`);
      await ctx.close();
      // The database, and what the file made on the cluster that it records (cluster-cleanup.ts).
      const problems = await dropWhatWasMade([dbName], before);
      if (problems.length > 0) throw new Error(`Not dropped on PostgreSQL:\n  ${problems.join('\n  ')}`);
      await rm(dir, { recursive: true, force: true });
    },
  });
}

async function deleteRedisKeys(ctx: AppContext, pattern: string) {
  let cursor = '0';
  do {
    const [next, keys] = await ctx.redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
    if (keys.length > 0) await ctx.redis.del(...keys);
    cursor = next;
  } while (cursor !== '0');
}
