// What a restore whose backup-server process died leaves behind, put right by the sweep that fails
// it (restore-runs.ts). A restore's databases and folders have names of their own (restoreNames,
// folders), so what a dead run left is found again: from which databases exist and which oid the
// subscription records, the sweep tells how far the swap had gone and puts the live instance back
// as it was (or, when the restore had finished, only clears away the safety copy). What cannot be
// told apart is left untouched and described for the operator.
import { createHash } from 'node:crypto';
import type { AppContext } from '../context.js';
import { shellQuote as q } from '../core/ssh.js';
import type { BackupRestore } from '../generated/prisma/client.js';
import { endSessions, onServer, runOnOdooHost, setMaintenance } from '../instances/index.js';
import { basePathOf } from '../servers/index.js';
import { odooLayout } from '../odoo/index.js';
import { findDatabase, ownDatabase, quoteIdent } from '../postgresql/index.js';
import { INTERRUPTED, leaseUntil } from './lease.js';
import { tenantSource, type TenantSource } from './tenant-source.js';

type Ctx = Pick<AppContext, 'db' | 'secretBox' | 'config' | 'log'>;

const SCRIPT_TIMEOUT_MS = 10 * 60_000;

/** The live filestore and the folders a restore keeps beside it, shell-quoted. */
export const folders = (src: TenantSource) => ({
  live: q(src.filestore!),
  old: q(`${src.filestore}.svc-old`),
  restoredDir: q(`${src.filestore}.svc-restore`),
});

/**
 * Restore `id`'s databases: `svcrs_<id>_<installation>` (restored beside the live one) and
 * `svcrb_<id>_<installation>` (the live one set aside: the safety copy). Found again from the row
 * alone; the installation's tag (its own database's cluster and oid) keeps another svc's restore of
 * the same id on a shared cluster apart.
 */
export async function restoreNames(db: Ctx['db'], id: number) {
  const own = await ownDatabase(db);
  const tag = createHash('sha256').update(`${own.systemIdentifier}/${own.oid}`).digest('hex').slice(0, 8);
  return { restored: `svcrs_${id}_${tag}`, safety: `svcrb_${id}_${tag}` };
}

/** What is found cannot be told apart: nothing was changed (the message says what is where). */
export class UnclearRestore extends Error {}

/**
 * Puts the live instance of an interrupted restore into the live database back into a consistent
 * state, and answers what was found and done (the row's error). Throws UnclearRestore when what it
 * finds fits no step of a restore; any other failure (a host out of reach) is worth another try.
 */
export async function recoverInterrupted(ctx: Ctx, row: BackupRestore): Promise<{ note: string; finished: boolean }> {
  const { db, secretBox } = ctx;
  let src: TenantSource;
  try {
    src = await tenantSource(ctx, row.db_name);
  } catch (err) {
    throw new UnclearRestore(`interrupted: the backup server stopped during the restore; nothing put back: ${(err as Error).message}`);
  }
  const { restored, safety } = await restoreNames(db, row.id);
  const recorded = (await db.subscription.findUniqueOrThrow({ where: { id: src.subscriptionId } })).database_oid;
  const name = src.dbName;
  const layout = src.host ? odooLayout(basePathOf(ctx.config, src.host), src.host.odoo_http_port ?? ctx.config.ODOO_HTTP_PORT) : null;
  const onHost = (script: string) =>
    src.host ? runOnOdooHost(ctx, src.host, { user_id: null, operation: 'restore' }, script, SCRIPT_TIMEOUT_MS) : Promise.resolve('');
  const fs = src.host ? folders(src) : null;
  /** The live filestore as it was: .svc-old (the live one set aside) takes its name again, over the restored one. */
  const foldersBack = async () => {
    if (fs)
      await onHost(
        `if [ -e ${fs.old} ]; then rm -rf -- ${fs.live} && mv -T -- ${fs.old} ${fs.live} || exit 1; fi\nrm -rf -- ${fs.restoredDir}`,
      );
  };
  const maintenanceOff = () => (layout ? onHost(setMaintenance(layout, name, false)) : Promise.resolve(''));

  const [live, copy, beside] = await onServer(secretBox, src.pg, async (query) => [
    await findDatabase(query, name),
    await findDatabase(query, safety),
    await findDatabase(query, restored),
  ]);
  let outcome: string;
  let finished = false;
  if (!copy) {
    if (!live) {
      await maintenanceOff();
      throw new UnclearRestore(
        `interrupted: the backup server stopped during the restore, and neither ${name} nor its safety copy ${safety} exists` +
          `${beside ? ` (${restored}, oid ${beside.oid}, does)` : ''}; nothing was changed: the live database must be put back by hand`,
      );
    }
    // The swap never started: the live instance is untouched; what was restored beside it goes.
    await onServer(secretBox, src.pg, (query) => query(`DROP DATABASE IF EXISTS ${quoteIdent(restored)} WITH (FORCE)`));
    if (fs) await onHost(`rm -rf -- ${fs.restoredDir}`);
    outcome = `before the swap: ${beside ? `${restored} dropped` : `nothing of it was on ${name}'s cluster`}; the live instance was left as it was`;
  } else if (!live) {
    // Stopped half-way through the databases' renames (or through putting them back).
    if (layout) await onHost(setMaintenance(layout, name, true));
    await onServer(secretBox, src.pg, async (query) => {
      await endSessions(query, safety);
      await query(`ALTER DATABASE ${quoteIdent(safety)} RENAME TO ${quoteIdent(name)}`);
      await query(`DROP DATABASE IF EXISTS ${quoteIdent(restored)} WITH (FORCE)`);
    });
    await foldersBack();
    outcome = `during the swap, with ${name} renamed to ${safety}: renamed back, the restored copy cleared away; the live instance was put back as it was`;
  } else if (recorded !== null && live.oid === recorded) {
    // The restore had finished (the subscription records the restored database): only its safety copy was left.
    if (fs) await onHost(`rm -rf -- ${fs.old} ${fs.restoredDir}`);
    await onServer(secretBox, src.pg, (query) => query(`DROP DATABASE IF EXISTS ${quoteIdent(safety)} WITH (FORCE)`));
    outcome = `after the swap, before its safety copy ${safety} was dropped: dropped now; the restore had finished`;
    finished = true;
  } else if (recorded !== null && copy.oid === recorded) {
    // The restored database had taken the live name, but was never recorded: the live one takes it again.
    if (layout) await onHost(setMaintenance(layout, name, true));
    await onServer(secretBox, src.pg, async (query) => {
      await query(`DROP DATABASE IF EXISTS ${quoteIdent(restored)} WITH (FORCE)`);
      await endSessions(query, name);
      await query(`ALTER DATABASE ${quoteIdent(name)} RENAME TO ${quoteIdent(restored)}`);
      await endSessions(query, safety);
      await query(`ALTER DATABASE ${quoteIdent(safety)} RENAME TO ${quoteIdent(name)}`);
      await query(`DROP DATABASE ${quoteIdent(restored)} WITH (FORCE)`);
    });
    await foldersBack();
    outcome = `after the restored database took ${name}'s name, before it was recorded: it was dropped and ${safety} renamed back; the live instance was put back as it was`;
  } else {
    await maintenanceOff();
    const present = fs ? await onHost(`for p in ${fs.live} ${fs.old} ${fs.restoredDir}; do [ ! -e "$p" ] || printf '%s ' "$p"; done`) : '';
    throw new UnclearRestore(
      `interrupted: the backup server stopped during the swap, and what it left fits no step of it: ${name} (oid ${live.oid}) and ` +
        `${safety} (oid ${copy.oid}) both exist, the subscription records oid ${recorded ?? 'none'}` +
        `${fs ? `; on the Odoo host: ${present.trim() || 'no filestore'}` : ''}; nothing was changed: tell which is the live database and put it back by hand`,
    );
  }
  await maintenanceOff();
  return { note: `interrupted: the backup server stopped ${outcome}`, finished };
}

/**
 * Restores of backup server `serverId` whose process died: failed, and a live instance they were
 * replacing put back (a staging copy's job clears its own copy). One whose instance cannot be
 * reached now stays running, tried again when the lease this sweep took runs out.
 */
export async function sweepInterrupted(ctx: Ctx, serverId: number) {
  const { db, log } = ctx;
  const lost = await db.backupRestore.findMany({
    where: { backup_server_id: serverId, state: 'running', lease_until: { lt: new Date() } },
  });
  for (const row of lost) {
    // Taken over with a lease of this process: another process's sweep leaves it meanwhile.
    const { count } = await db.backupRestore.updateMany({
      where: { id: row.id, state: 'running', lease_until: { lt: new Date() } },
      data: { lease_until: leaseUntil() },
    });
    if (count === 0) continue;
    let error = INTERRUPTED;
    let finished = false;
    if (row.target_db_name === row.db_name) {
      try {
        ({ note: error, finished } = await recoverInterrupted(ctx, row));
      } catch (err) {
        if (!(err instanceof UnclearRestore)) {
          const why = (err as Error).message.slice(0, 3000);
          log.error({ err, restore_id: row.id, db_name: row.db_name }, 'an interrupted restore could not be put right; tried again');
          await db.backupRestore.updateMany({
            where: { id: row.id, state: 'running' },
            data: { error: `interrupted: putting the live instance back failed (${why}); tried again shortly` },
          });
          continue;
        }
        error = err.message;
      }
    }
    log.warn({ restore_id: row.id, db_name: row.db_name, note: error }, 'restore interrupted');
    // A restore found finished is done: the instance is the restored one (what happened is in the log).
    await db.backupRestore.updateMany({
      where: { id: row.id, state: 'running' },
      data: {
        state: finished ? 'done' : 'failed',
        error: finished ? null : error.slice(0, 4000),
        finished_at: new Date(),
        lease_until: null,
      },
    });
  }
}
