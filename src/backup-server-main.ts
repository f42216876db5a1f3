// Process entry of svc's backup server: `npm run backup-server`. Applies pending migrations, then
// serves the backup API of the record BACKUP_SERVER_ID on BACKUP_SERVER_HOST:BACKUP_SERVER_PORT and
// runs its backups and restores. It needs svc's database and master key, not Redis.
import pino from 'pino';
import { ConfigError, loadConfig } from './core/config.js';
import { loggerOptions } from './core/logger.js';
import { applyMigrations } from './core/migrate.js';
import { checkPostgres, UnreachableError } from './core/reachability.js';
import { createContext } from './context.js';
import { startBackupServer } from './backup-server/index.js';

const SHUTDOWN_GRACE_MS = 10 * 60_000; // a backup or a restore running is let finish

async function main() {
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) throw new UnreachableError(err.message);
    throw err;
  }
  if (!config.BACKUP_SERVER_ID)
    throw new UnreachableError(
      'BACKUP_SERVER_ID is not set: the id of the backup server record (POST /api/v1/backup-servers) this process is',
    );
  const log = pino(loggerOptions(config.LOG_LEVEL));
  await checkPostgres(config.DATABASE_URL);
  await applyMigrations(config.DATABASE_URL);
  const ctx = await createContext(config, log, { lazy: true });
  const server = await startBackupServer(ctx, config.BACKUP_SERVER_ID).catch((err: Error) => {
    throw new UnreachableError(err.message);
  });
  try {
    await server.app.listen({ port: config.BACKUP_SERVER_PORT, host: config.BACKUP_SERVER_HOST });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
    throw new UnreachableError(`Port ${config.BACKUP_SERVER_PORT} on ${config.BACKUP_SERVER_HOST} is already in use (BACKUP_SERVER_PORT)`);
  }
  log.info({ backup_server_id: config.BACKUP_SERVER_ID, port: config.BACKUP_SERVER_PORT }, 'backup server started');
  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'backup server shutting down: finishing running backups and restores');
    setTimeout(() => process.exit(1), SHUTDOWN_GRACE_MS).unref();
    await server.close();
    await ctx.close();
    process.exit(0);
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
}

main().catch((err) => {
  console.error(err instanceof UnreachableError ? err.message : err);
  process.exit(1);
});
