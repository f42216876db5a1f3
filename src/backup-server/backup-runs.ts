// The backup server's backups: asked for by POST {backup_db_path} (a pending row), taken by this
// process's runner (claimed in PostgreSQL: several backup-server processes of one record share the
// work), captured (unit-capture.ts) and stored with restic in every repository the record names.
// A running backup holds a lease it renews; one whose process died is failed when its lease runs
// out, and a snapshot it may have left is forgotten. A backup is done only once every repository
// has its snapshot; otherwise it is failed, with the cause, and the snapshots it made are forgotten.
import { rm } from 'node:fs/promises';
import path from 'node:path';
import type { AppContext } from '../context.js';
import type { TenantBackup } from '../generated/prisma/client.js';
import type { Repositories } from './repositories.js';
import type { createRestic } from './restic.js';
import { INTERRUPTED, leaseUntil, whileLeased } from './lease.js';
import { captureUnit } from './unit-capture.js';
import { tenantSource } from './tenant-source.js';

type Ctx = Pick<AppContext, 'db' | 'secretBox' | 'config' | 'log'>;
type Restic = ReturnType<typeof createRestic>;

export const dbTag = (dbName: string) => `db:${dbName}`;
export const backupTag = (id: number) => `backup:${id}`;
export const workDir = (config: { BACKUP_DIR: string }, dbName: string) => path.resolve(config.BACKUP_DIR, 'work', dbName);

export function createBackupRuns(ctx: Ctx, restic: Restic, repositories: Repositories, serverId: number) {
  const { db, log } = ctx;

  /** Takes the next pending backup whose Odoo host has no backup running (one at a time per host). */
  async function claim(): Promise<TenantBackup | null> {
    return db.$transaction(async (tx) => {
      await tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtext('svc backup server claims'), ${serverId})`;
      const rows = await tx.$queryRaw<{ id: number }[]>`
        SELECT t.id FROM tenant_backups t
          LEFT JOIN subscriptions s ON s.id = t.subscription_id
         WHERE t.backup_server_id = ${serverId} AND t.state = 'pending'
           AND (s.root_server_id IS NULL OR NOT EXISTS (
                SELECT 1 FROM tenant_backups r JOIN subscriptions rs ON rs.id = r.subscription_id
                 WHERE r.backup_server_id = ${serverId} AND r.state = 'running' AND rs.root_server_id = s.root_server_id))
         ORDER BY t.id LIMIT 1 FOR UPDATE OF t SKIP LOCKED`;
      if (rows.length === 0) return null;
      return tx.tenantBackup.update({
        where: { id: rows[0]!.id },
        data: { state: 'running', started_at: new Date(), lease_until: leaseUntil() },
      });
    });
  }

  /** Forgets whatever snapshot of backup `id` a repository holds (a partial backup is never kept). */
  async function forgetSnapshotsOf(id: number) {
    for (const repo of await db.backupRepository.findMany({ where: { backup_server_id: serverId } })) {
      try {
        const r = await repositories.toRestic(repo);
        const found = await restic.snapshots(r, { tags: [backupTag(id)] });
        if (found.length > 0)
          await restic.forget(
            r,
            found.map((s) => s.id),
            { prune: false },
          );
      } catch (err) {
        log.warn({ err, backup_id: id, repository: repo.uuid }, 'a snapshot of a failed backup could not be forgotten');
      }
    }
  }

  /** Backups whose process died: failed, and what they left forgotten. */
  async function sweep() {
    const lost = await db.tenantBackup.findMany({
      where: { backup_server_id: serverId, state: 'running', lease_until: { lt: new Date() } },
    });
    for (const row of lost) {
      const { count } = await db.tenantBackup.updateMany({
        where: { id: row.id, state: 'running', lease_until: { lt: new Date() } },
        data: { state: 'failed', error: INTERRUPTED, finished_at: new Date(), lease_until: null },
      });
      if (count > 0) await forgetSnapshotsOf(row.id);
    }
  }

  /**
   * Tenants backed up since their last pruning. restic's prune needs a repository to itself (backups
   * beside it would wait on its lock, or it on theirs), so pruning waits until nothing runs (pruneDue).
   */
  const dueForPruning = new Map<string, { keepDaily: number; keepWeekly: number; keepMonthly: number }>();

  /**
   * The retention of the tenant's subscription in every repository; rows left without a snapshot go.
   * A repository that cannot be pruned (a cloud account refusing) is tried again after the next
   * backup; the others are pruned and their rows told meanwhile (restic forgets for good: a row
   * left naming a forgotten snapshot would stay listed).
   */
  async function prune(dbName: string, retention: { keepDaily: number; keepWeekly: number; keepMonthly: number }) {
    const rows = await db.tenantBackup.findMany({ where: { backup_server_id: serverId, db_name: dbName, state: 'done' } });
    for (const repo of await db.backupRepository.findMany({ where: { backup_server_id: serverId } })) {
      let removed: string[];
      try {
        ({ removed } = await restic.applyRetention(await repositories.toRestic(repo), { tags: [dbTag(dbName)], ...retention }));
      } catch (err) {
        log.error(
          { err, db_name: dbName, repository: repo.uuid },
          'pruning old backups in a repository failed; tried again after the next backup',
        );
        continue;
      }
      if (removed.length === 0) continue;
      const gone = new Set(removed);
      for (const row of rows) {
        const snaps = row.snapshots as Record<string, string>;
        if (snaps[repo.uuid] && gone.has(snaps[repo.uuid]!)) delete snaps[repo.uuid];
      }
    }
    for (const row of rows) {
      const snaps = row.snapshots as Record<string, string>;
      if (Object.keys(snaps).length === 0) await db.tenantBackup.delete({ where: { id: row.id } });
      else await db.tenantBackup.update({ where: { id: row.id }, data: { snapshots: snaps } });
    }
  }

  async function run(row: TenantBackup) {
    const src = await tenantSource(ctx, row.db_name);
    const targets = await repositories.targets();
    const dir = workDir(ctx.config, row.db_name);
    const snapshots: Record<string, string> = {};
    try {
      const unit = await captureUnit(ctx, src, dir, { user_id: null, job_id: `backup-server:${row.id}`, operation: 'backup' });
      let size = 0;
      let added = 0;
      for (const repo of targets) {
        const made = await restic.backup(await repositories.toRestic(repo), dir, {
          tags: [dbTag(row.db_name), backupTag(row.id)],
          host: 'svc',
        });
        snapshots[repo.uuid] = made.snapshotId;
        size = made.bytesProcessed;
        added += made.bytesAdded;
      }
      await db.tenantBackup.update({
        where: { id: row.id },
        data: {
          state: 'done',
          snapshots,
          size_bytes: BigInt(size),
          added_bytes: BigInt(added),
          files: unit.files,
          finished_at: new Date(),
          lease_until: null,
          error: unit.missingFiles > 0 ? `${unit.missingFiles} files the database refers to were already missing on the host` : null,
        },
      });
    } catch (err) {
      if (Object.keys(snapshots).length > 0) await forgetSnapshotsOf(row.id);
      throw err;
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    dueForPruning.set(row.db_name, src.retention);
  }

  return {
    claim,
    sweep,

    /** Prunes the tenants backed up since; the runner calls it when no backup, restore or verify runs. */
    async pruneDue() {
      for (const [dbName, retention] of [...dueForPruning]) {
        dueForPruning.delete(dbName);
        try {
          await prune(dbName, retention);
        } catch (err) {
          log.error({ err, db_name: dbName }, 'pruning old backups failed; tried again after the next backup');
        }
      }
    },

    /** Runs one claimed backup to its end (done or failed with its cause), renewing its lease meanwhile. */
    async execute(row: TenantBackup) {
      const renew = () => db.tenantBackup.updateMany({ where: { id: row.id, state: 'running' }, data: { lease_until: leaseUntil() } });
      await whileLeased(log, `backup ${row.id}`, renew, async () => {
        try {
          await run(row);
          log.info({ backup_id: row.id, db_name: row.db_name }, 'backup done');
        } catch (err) {
          const error = (err as Error).message.slice(0, 4000);
          log.warn({ backup_id: row.id, db_name: row.db_name, error }, 'backup failed');
          await db.tenantBackup.updateMany({
            where: { id: row.id, state: 'running' },
            data: { state: 'failed', error, finished_at: new Date(), lease_until: null },
          });
        }
      });
    },
  };
}

export type BackupRuns = ReturnType<typeof createBackupRuns>;
