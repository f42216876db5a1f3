// svc's own backup server: a role of svc (npm run backup-server) that is one backup_servers
// record (BACKUP_SERVER_ID). It serves the backup API svc calls, stores each tenant (database and
// filestore as one unit) with restic in its local repository and its cloud accounts, and restores
// them. It shares svc's database and master key; it needs no Redis.
import type { FastifyInstance } from 'fastify';
import path from 'node:path';
import type { AppContext } from '../context.js';
import { buildBackupServerApp } from './backup-server-app.js';
import { createBackupRuns } from './backup-runs.js';
import { createDownloadLinks } from './download-links.js';
import { createRepositories } from './repositories.js';
import { createRestic } from './restic.js';
import { createRestoreRuns } from './restore-runs.js';
import { startRunner } from './runner.js';
import { createVerifies } from './verify.js';

type Ctx = Pick<AppContext, 'db' | 'secretBox' | 'config' | 'log'>;

export interface BackupServer {
  app: FastifyInstance;
  close(): Promise<void>;
}

/** The backup server of record `serverId`: its API (not listening yet) and its runner (running). */
export async function startBackupServer(ctx: Ctx, serverId: number): Promise<BackupServer> {
  const server = await ctx.db.backupServer.findUnique({ where: { id: serverId } });
  if (!server) throw new Error(`BACKUP_SERVER_ID ${serverId} names no backup server record: create it first (POST /api/v1/backup-servers)`);
  const restic = createRestic({ cacheDir: path.resolve(ctx.config.BACKUP_DIR, 'cache'), PATH: ctx.config.PATH });
  const repositories = createRepositories(ctx, restic, serverId);
  if (server.enable_local_backup) await repositories.ensureLocal();
  const restores = createRestoreRuns(ctx, restic, repositories, serverId);
  const verifies = createVerifies(ctx, restic, repositories, restores, serverId);
  const runner = startRunner(
    ctx.log,
    ctx.config.BACKUP_CONCURRENCY,
    createBackupRuns(ctx, restic, repositories, serverId),
    restores,
    verifies,
  );
  const links = createDownloadLinks(ctx.secretBox, serverId, ctx.config.BACKUP_LINK_TTL_SECONDS);
  const app = await buildBackupServerApp(ctx, { serverId, restic, repositories, links, kick: runner.kick, verify: verifies.now });
  return {
    app,
    async close() {
      await app.close();
      await runner.close();
    },
  };
}
