// Process entry: `npm start`. Applies pending migrations, then runs the roles SVC_ROLE asks for:
// `all` (API + workers, one machine), `api` or `worker` (many processes, one PostgreSQL and Redis).
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { ConfigError, loadConfig, type Config } from './core/config.js';
import { loggerOptions } from './core/logger.js';
import { applyMigrations } from './core/migrate.js';
import { checkPostgres, checkRedis, UnreachableError } from './core/reachability.js';
import { createContext } from './context.js';
import { buildApp } from './app.js';
import { startWorkers } from './worker.js';

const SHUTDOWN_GRACE_MS = 60_000;

function readConfig(): Config {
  try {
    return loadConfig();
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    console.error(err.message);
    process.exit(1);
  }
}

/** Something in the way of starting that the user can remove: said in one line, without a stack. */
class StartError extends Error {}

async function listen(app: FastifyInstance, config: Config) {
  try {
    await app.listen({ port: config.PORT, host: config.HOST });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
    throw new StartError(
      `Port ${config.PORT} on ${config.HOST} is already in use (PORT, HOST): stop what listens there, or start with another PORT`,
    );
  }
}

async function main() {
  const config = readConfig();
  const log = pino(loggerOptions(config.LOG_LEVEL));
  await checkPostgres(config.DATABASE_URL);
  await checkRedis(config);
  const applied = await applyMigrations(config.DATABASE_URL);
  if (applied.length > 0) log.info({ applied }, 'migrations applied');

  const ctx = await createContext(config, log);
  const runApi = config.SVC_ROLE !== 'worker';
  const runWorkers = config.SVC_ROLE !== 'api';
  const app = runApi ? await buildApp(ctx) : null;
  // Listening comes first: a port in use stops start-up before any worker takes a job.
  if (app) await listen(app, config);
  const workers = runWorkers ? await startWorkers(ctx) : null;
  log.info({ role: config.SVC_ROLE }, 'svc started');

  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down: finishing requests and running jobs');
    setTimeout(() => {
      log.error('shutdown took too long; exiting');
      process.exit(1);
    }, SHUTDOWN_GRACE_MS).unref();
    await app?.close();
    await workers?.close();
    await ctx.close();
    process.exit(0);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
}

main().catch((err) => {
  // A service that cannot be reached is said in one line; anything else is a bug: the stack helps.
  console.error(err instanceof UnreachableError || err instanceof StartError ? err.message : err);
  process.exit(1);
});
