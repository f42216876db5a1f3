// The service context of a bench run on the machine's real parts: a fresh, migrated database
// svc_bench_<name>_<time>, the real Redis under a key prefix of the same name, a temporary master
// key file, LOG_LEVEL warn. close() closes the context and removes all three again, with what the
// bench made on the cluster that the database records (roles, customer databases, standbys, copies).
import { rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { loadConfig, type Config } from '../src/core/config.js';
import { applyMigrations } from '../src/core/migrate.js';
import { createContext, type AppContext } from '../src/context.js';
import { LOOPBACK_DEFAULTS } from '../test/helpers/loopback.js';
import { clusterSnapshot, dropWhatWasMade } from '../test/helpers/cluster-cleanup.js';
import { databaseUrl, REDIS_URL } from '../test/helpers/pg.js';

export interface BenchContext {
  ctx: AppContext;
  config: Config;
  /** The environment the config was loaded from (e.g. for service processes the bench starts). */
  env: Record<string, string>;
  /** Stop the workers and servers using ctx first; closes it, then drops the database, the Redis keys and the key file. */
  close(): Promise<void>;
}

/** `extraEnv` adds to or overrides the defaults (GIT_API_URL, LOG_LEVEL, ...). */
export async function createBenchContext(name: string, extraEnv: Record<string, string> = {}): Promise<BenchContext> {
  const dbName = `svc_bench_${name}_${Date.now().toString(36)}`;
  const env: Record<string, string> = {
    DATABASE_URL: databaseUrl(dbName),
    REDIS_URL,
    QUEUE_PREFIX: dbName,
    SVC_MASTER_KEY_FILE: path.join(os.tmpdir(), `${dbName}.key`),
    LOG_LEVEL: 'warn',
    // The benches' stand-ins listen on loopback, which the outbound guard refuses by default.
    OUTBOUND_ALLOW_NETS: '127.0.0.0/8,::1/128',
    ...LOOPBACK_DEFAULTS,
    ...extraEnv,
  };
  const config = loadConfig(env);
  const before = await clusterSnapshot();
  const removeData = async () => {
    const problems = await dropWhatWasMade([dbName], before);
    if (problems.length > 0) console.error(`Not dropped on PostgreSQL:\n  ${problems.join('\n  ')}`);
    await rm(config.SVC_MASTER_KEY_FILE, { force: true });
  };
  let ctx: AppContext;
  try {
    await applyMigrations(config.DATABASE_URL);
    ctx = await createContext(config);
  } catch (err) {
    await removeData();
    throw err;
  }
  return {
    ctx,
    config,
    env,
    async close() {
      const keys = await ctx.redis.keys(`${config.QUEUE_PREFIX}:*`);
      if (keys.length > 0) await ctx.redis.del(...keys);
      await ctx.close();
      await removeData();
    },
  };
}

/** Runs a bench's main, then exits: 0 when it ends, 1 with the error when it throws (open handles do not keep it alive). */
export function runBench(main: () => Promise<void>): void {
  main().then(
    () => process.exit(0),
    (err) => {
      console.error(err);
      process.exit(1);
    },
  );
}

/** The load average now, for the figures' context ("1.20 0.95 0.80"). */
export const loadavg = () =>
  os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');

/** A target's line: met or missed. */
export const verdict = (ok: boolean) => (ok ? 'met' : 'missed');
