// The backup server's restores (POST {restore_db_path}): a done backup of the same database, read
// back from a repository holding its snapshot, is restored BESIDE the live instance (a new
// database owned by the tenant's role, filled by psql as that role; the filestore unpacked next to
// the live one), then swapped in under the maintenance page with the instance's sessions ended: the
// live database and filestore become the safety copy, the restored ones take their names. Anything
// failing before the swap leaves the live instance untouched; a failed swap is put back. The safety
// copy is dropped once the swap is done. A restore whose process died is put right by the sweep
// (restore-recovery.ts).
import type { AppContext } from '../context.js';
import { ConflictError, UserError } from '../core/errors.js';
import { shellQuote as q } from '../core/ssh.js';
import type { BackupRestore, TenantBackup } from '../generated/prisma/client.js';
import { filestorePath, createEmptyDatabase, databaseLocale, onServer, runOnOdooHost, setMaintenance } from '../instances/index.js';
import { odooLayout } from '../odoo/index.js';
import { findDatabase, quoteIdent } from '../postgresql/index.js';
import { basePathOf, openRemoteSession } from '../servers/index.js';
import { leaseUntil, whileLeased } from './lease.js';
import type { Repositories } from './repositories.js';
import type { createRestic } from './restic.js';
import { endSessions } from '../instances/index.js';
import { folders, restoreNames, sweepInterrupted } from './restore-recovery.js';
import { tenantSource, type TenantSource } from './tenant-source.js';
import { pgArgs, pgEnv, runLocal, tenantLogin } from './unit-capture.js';

type Ctx = Pick<AppContext, 'db' | 'secretBox' | 'config' | 'log'>;
type Restic = ReturnType<typeof createRestic>;

const RESTORE_TIMEOUT_MS = 6 * 60 * 60_000;
const SCRIPT_TIMEOUT_MS = 10 * 60_000;

/** Odoo's signalling sequences: a restored database must not look unchanged to the registry and caches Odoo holds for its name. */
const SIGNALLING =
  "SELECT c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'S' AND c.relname LIKE 'base\\_%signaling%'";

/**
 * The staging copy `target` of the tenant, being made: the only other database a backup is restored
 * into (a name svc chose for a copy of this subscription, never another tenant's or the live one).
 */
export async function stagingCopyOf(db: Ctx['db'], src: TenantSource, target: string) {
  const copy = await db.stagingInstance.findFirst({ where: { database_name: target, subscription_id: src.subscriptionId } });
  if (!copy)
    throw new UserError(
      `${target} is not a staging copy of ${src.dbName}: a backup is restored into the live database or one of its staging copies only`,
    );
  if (copy.state !== 'creating')
    throw new ConflictError(`Staging copy ${target} is ${copy.state}: a backup is restored only into a copy being made`);
  return copy;
}

export function createRestoreRuns(ctx: Ctx, restic: Restic, repositories: Repositories, serverId: number) {
  const { db, log, secretBox } = ctx;

  /** The repository to read a backup from (the local one first) with its snapshot there, checked to exist. */
  async function sourceOf(backup: TenantBackup) {
    const snaps = backup.snapshots as Record<string, string>;
    const repos = await db.backupRepository.findMany({ where: { backup_server_id: serverId, uuid: { in: Object.keys(snaps) } } });
    repos.sort((a, b) => Number(b.provider === 'local') - Number(a.provider === 'local'));
    for (const repo of repos) {
      const r = await repositories.toRestic(repo);
      const listed = await restic.snapshots(r, { tags: [`backup:${backup.id}`] }).catch(() => []);
      if (listed.some((s) => snaps[repo.uuid]!.startsWith(s.id) || s.id.startsWith(snaps[repo.uuid]!)))
        return { repo: r, snapshot: snaps[repo.uuid]! };
    }
    throw new UserError(`Backup ${backup.id} does not verify: no repository holds its snapshot any more`);
  }

  /**
   * The database and the filestore of the backup, restored under `name` and into the directory
   * `filestore` on the tenant's Odoo host (beside the live one: `<filestore>.svc-restore` for a
   * restore, the scratch database's own filestore for a verify).
   */
  async function restoreBeside(
    src: TenantSource,
    from: { repo: Awaited<ReturnType<Repositories['toRestic']>>; snapshot: string },
    name: string,
    filestore: string | null,
  ) {
    const login = await tenantLogin(ctx, src);
    await onServer(secretBox, src.pg, async (query) => {
      const locale = await databaseLocale(query, src.dbName);
      if (!locale) throw new UserError(`Database ${src.dbName} does not exist`);
      await query(`DROP DATABASE IF EXISTS ${quoteIdent(name)} WITH (FORCE)`);
      await createEmptyDatabase(query, name, login.user, locale);
      await query(`REVOKE ALL ON DATABASE ${quoteIdent(name)} FROM PUBLIC`);
    });
    const dump = restic.dump(from.repo, from.snapshot, '/dump.sql');
    await Promise.all([
      dump.done,
      runLocal('psql', [...pgArgs(login), '-X', '-q', '-v', 'ON_ERROR_STOP=1', '--single-transaction', `--dbname=${name}`], {
        env: pgEnv(ctx.config, login),
        stdin: dump.stream,
        timeoutMs: RESTORE_TIMEOUT_MS,
        what: `psql restoring backup into ${name} (as ${login.user})`,
      }),
    ]);
    if (!src.host || !filestore) return;
    const target = filestore;
    const parent = target.slice(0, target.lastIndexOf('/'));
    const files = restic.dump(from.repo, from.snapshot, '/filestore', { archive: 'tar' });
    const session = await openRemoteSession(ctx, src.host, { user_id: null, job_id: null, operation: 'restore' });
    try {
      const script = [
        `[ -d ${q(parent)} ] || { mkdir -p ${q(parent)} && chown odoo:odoo ${q(parent)}; } || exit 1`,
        `rm -rf -- ${q(target)} && mkdir -p ${q(target)} && tar -C ${q(target)} -xf - --no-same-owner --strip-components=1 && chown -R --reference=${q(parent)} ${q(target)}`,
      ].join('\n');
      await Promise.all([
        session.check(script, `Unpacking the filestore on root server ${src.host.id} failed`, {
          stdin: files.stream as never,
          timeoutMs: RESTORE_TIMEOUT_MS,
        }),
        files.done,
      ]);
    } finally {
      session.close();
    }
  }

  /**
   * The restored database and filestore take the live ones' names; the live ones become `safety`.
   * A step failing after the databases were renamed puts the live ones back (putBack) before the
   * failure goes on: a restore never ends with the live instance half replaced.
   */
  async function swap(src: TenantSource, restored: string, safety: string) {
    const layout = src.host ? odooLayout(basePathOf(ctx.config, src.host), src.host.odoo_http_port ?? ctx.config.ODOO_HTTP_PORT) : null;
    const onHost = (script: string) => runOnOdooHost(ctx, src.host!, { user_id: null, operation: 'restore' }, script, SCRIPT_TIMEOUT_MS);
    // A .svc-old an earlier restore left goes first: once the databases are renamed, one found is this restore's (the sweep relies on it).
    if (layout) await onHost(`${setMaintenance(layout, src.dbName, true)}\nrm -rf -- ${folders(src).old}`);
    try {
      await onServer(secretBox, src.pg, async (query) => {
        await endSessions(query, src.dbName);
        await query(`ALTER DATABASE ${quoteIdent(src.dbName)} RENAME TO ${quoteIdent(safety)}`);
        try {
          await endSessions(query, restored);
          await query(`ALTER DATABASE ${quoteIdent(restored)} RENAME TO ${quoteIdent(src.dbName)}`);
        } catch (err) {
          await query(`ALTER DATABASE ${quoteIdent(safety)} RENAME TO ${quoteIdent(src.dbName)}`);
          throw err;
        }
      });
      try {
        if (src.host) {
          const { live, old, restoredDir } = folders(src);
          await onHost(`{ if [ -e ${live} ]; then mv -T -- ${live} ${old}; fi; } && mv -T -- ${restoredDir} ${live}`);
        }
        // The registry and caches Odoo holds for the name must see a change: the restored sequences go past the live ones.
        await bumpSignalling(src, safety);
        const found = await onServer(secretBox, src.pg, (query) => findDatabase(query, src.dbName));
        await db.subscription.update({ where: { id: src.subscriptionId }, data: { database_oid: BigInt(found!.oid) } });
      } catch (err) {
        await putBack(src, restored, safety).catch((e: Error) => {
          throw new UserError(
            `${(err as Error).message}; putting the live instance back failed too (${e.message}): its database may be ${safety}, ` +
              `its filestore ${src.filestore}.svc-old`,
          );
        });
        throw new UserError(`${(err as Error).message} (the live instance was put back as it was)`);
      }
    } finally {
      if (layout) await onHost(setMaintenance(layout, src.dbName, false)).catch((err) => log.error({ err }, 'maintenance page left on'));
    }
  }

  /**
   * After a failed swap: the live database and filestore take their names again; the restored ones
   * go back beside them. The filestore first: a run dying in between leaves what the sweep reads as
   * the restored database live and unrecorded, whose putting back is then the databases' alone.
   */
  async function putBack(src: TenantSource, restored: string, safety: string) {
    if (src.host) {
      const { live, old, restoredDir } = folders(src);
      // The live filestore was moved aside only if .svc-old is there; the restored one may have taken its place.
      await runOnOdooHost(
        ctx,
        src.host,
        { user_id: null, operation: 'restore' },
        `if [ -e ${old} ]; then { [ ! -e ${live} ] || mv -T -- ${live} ${restoredDir}; } && mv -T -- ${old} ${live}; fi`,
        SCRIPT_TIMEOUT_MS,
      );
    }
    await onServer(secretBox, src.pg, async (query) => {
      await endSessions(query, src.dbName);
      await query(`ALTER DATABASE ${quoteIdent(src.dbName)} RENAME TO ${quoteIdent(restored)}`);
      await query(`ALTER DATABASE ${quoteIdent(safety)} RENAME TO ${quoteIdent(src.dbName)}`);
    });
  }

  /** Each signalling sequence of the restored database set past the safety copy's (the live one's) value. */
  async function bumpSignalling(src: TenantSource, safety: string) {
    const login = await tenantLogin(ctx, src);
    const values = async (database: string) => {
      const out = await runLocal(
        'psql',
        [
          ...pgArgs(login),
          '-X',
          '-A',
          '-t',
          '-F',
          ' ',
          `--dbname=${database}`,
          '-c',
          `SELECT relname, (SELECT last_value FROM pg_catalog.pg_sequences s WHERE s.schemaname = 'public' AND s.sequencename = relname) FROM (${SIGNALLING}) c`,
        ],
        { env: pgEnv(ctx.config, login), timeoutMs: 60_000, what: `reading Odoo's signalling sequences of ${database}` },
      );
      return new Map(
        out
          .trim()
          .split('\n')
          .filter(Boolean)
          .map((l) => [l.split(' ')[0]!, Number(l.split(' ')[1] || 0)]),
      );
    };
    const before = await values(safety);
    const sets = [...before].map(([seq, v]) => `SELECT pg_catalog.setval('public.${seq}', ${v + 1000});`).join('\n');
    if (!sets) return;
    await runLocal('psql', [...pgArgs(login), '-X', '-q', '-v', 'ON_ERROR_STOP=1', `--dbname=${src.dbName}`, '-c', sets], {
      env: pgEnv(ctx.config, login),
      timeoutMs: 60_000,
      what: `moving Odoo's signalling sequences of ${src.dbName} on`,
    });
  }

  async function dropRestored(src: TenantSource, restored: string) {
    await onServer(secretBox, src.pg, (query) => query(`DROP DATABASE IF EXISTS ${quoteIdent(restored)} WITH (FORCE)`));
    if (src.host)
      await runOnOdooHost(
        ctx,
        src.host,
        { user_id: null, operation: 'restore' },
        `rm -rf -- ${folders(src).restoredDir}`,
        SCRIPT_TIMEOUT_MS,
      );
  }

  /** The folders first: a run that dies in between leaves the safety copy, which tells the sweep the rest is to go too. */
  async function dropSafety(src: TenantSource, safety: string) {
    if (src.host)
      await runOnOdooHost(
        ctx,
        src.host,
        { user_id: null, operation: 'restore' },
        `rm -rf -- ${q(`${src.filestore}.svc-old`)} ${q(`${src.filestore}.svc-restore`)}`,
        SCRIPT_TIMEOUT_MS,
      );
    await onServer(secretBox, src.pg, (query) => query(`DROP DATABASE IF EXISTS ${quoteIdent(safety)} WITH (FORCE)`));
  }

  async function run(row: BackupRestore) {
    const backup = await db.tenantBackup.findUniqueOrThrow({ where: { id: row.backup_id } });
    const src = await tenantSource(ctx, row.db_name);
    const from = await sourceOf(backup);
    if (row.target_db_name !== row.db_name) {
      // Into a staging copy being made (checked when asked, again now): its database and filestore, nothing swapped.
      await stagingCopyOf(db, src, row.target_db_name);
      await restoreBeside(src, from, row.target_db_name, src.host && filestorePath(basePathOf(ctx.config, src.host), row.target_db_name));
      return;
    }
    // Names of this row's own (restoreBeside drops a restored copy a run of it left).
    const { restored, safety } = await restoreNames(db, row.id);
    try {
      await restoreBeside(src, from, restored, src.filestore && `${src.filestore}.svc-restore`);
      await swap(src, restored, safety);
    } catch (err) {
      // Only what the restore made: the live filestore may be in .svc-old if it could not be put back.
      await dropRestored(src, restored).catch((e) => log.warn({ err: e, restored }, 'a failed restore could not be cleared away'));
      throw err;
    }
    await dropSafety(src, safety).catch((err) => log.warn({ err, safety }, 'the safety copy of a restore could not be dropped'));
  }

  return {
    sourceOf,
    restoreBeside,

    async claim(): Promise<BackupRestore | null> {
      return db.$transaction(async (tx) => {
        const rows = await tx.$queryRaw<{ id: number }[]>`
          SELECT id FROM backup_restores WHERE backup_server_id = ${serverId} AND state = 'pending'
           ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED`;
        if (rows.length === 0) return null;
        return tx.backupRestore.update({
          where: { id: rows[0]!.id },
          data: { state: 'running', started_at: new Date(), lease_until: leaseUntil() },
        });
      });
    },

    /** Restores whose process died: failed, the live instance they were replacing put back (restore-recovery.ts). */
    sweep: () => sweepInterrupted(ctx, serverId),

    async execute(row: BackupRestore) {
      const renew = () => db.backupRestore.updateMany({ where: { id: row.id, state: 'running' }, data: { lease_until: leaseUntil() } });
      await whileLeased(log, `restore ${row.id}`, renew, async () => {
        try {
          await run(row);
          await db.backupRestore.update({ where: { id: row.id }, data: { state: 'done', finished_at: new Date(), lease_until: null } });
          log.info({ restore_id: row.id, db_name: row.db_name }, 'restore done');
        } catch (err) {
          const error = (err as Error).message.slice(0, 4000);
          log.warn({ restore_id: row.id, db_name: row.db_name, error }, 'restore failed');
          await db.backupRestore.updateMany({
            where: { id: row.id, state: 'running' },
            data: { state: 'failed', error, finished_at: new Date(), lease_until: null },
          });
        }
      });
    },
  };
}

export type RestoreRuns = ReturnType<typeof createRestoreRuns>;
