// The backup server's verify (weekly by default, BACKUP_VERIFY_DAYS; or now: POST /api/verify): the
// latest backup of the tenant verified longest ago is restored beside it as a scratch database
// (svcvf_<backup id>_<random>, its filestore under its own name on the tenant's Odoo host), which
// the host's Odoo serves (the scratch's credentials file for the tenant's role) and which svc signs
// in to as the tenant's administrator with a password of the scratch's own, as a deployment proves
// the customer's; then the scratch goes, whatever happened. restic's check (a small subset of the
// data read back) runs on each repository. The outcome is on the backup server record (verified_at,
// verify_state, verify_note) and in its chatter (an alert when it failed); the backup that passed
// gets its verified_at. A verify holds a lease as a backup does: one whose process died is failed
// as interrupted, and the scratch it recorded is removed.
import { randomBytes } from 'node:crypto';
import type { AppContext } from '../context.js';
import { postMessage } from '../core/chatter.js';
import { ConflictError, UserError } from '../core/errors.js';
import { shellQuote as q } from '../core/ssh.js';
import { Prisma, type BackupRepository, type Settings, type TenantBackup } from '../generated/prisma/client.js';
import {
  filestorePath,
  insideTenant,
  newPassword,
  onServer,
  removeTenantCredentials,
  runOnOdooHost,
  setCustomerPassword,
  writeTenantCredentials,
  type Query,
} from '../instances/index.js';
import { basePathOf } from '../servers/index.js';
import { hostsOdoo, signInAsCustomer } from '../odoo/index.js';
import { quoteIdent } from '../postgresql/index.js';
import { leaseUntil, whileLeased } from './lease.js';
import type { Repositories } from './repositories.js';
import type { RestoreRuns } from './restore-runs.js';
import type { Restic } from './restic.js';
import { tenantSource, type TenantSource } from './tenant-source.js';

type Ctx = Pick<AppContext, 'db' | 'secretBox' | 'config' | 'log'>;

const DAY_MS = 86_400_000;
/** What restic check reads back of the data (at least one pack): the rest is checked by its structure. */
export const READ_DATA_SUBSET = '1%';
const SCRIPT_TIMEOUT_MS = 10 * 60_000;
const SCRATCH = /^svcvf_\d+_[0-9a-f]{6}$/;
const MODEL = 'svc.saas.backup.server' as const;
const AUDIT = { user_id: null, job_id: null, operation: 'verify' };

/** Where a verify's scratch database is (recorded before it is made: a verify that dies has it removed by the next). */
interface Scratch {
  database: string;
  postgresql_server_id: number;
  root_server_id: number;
}

export interface VerifyOutcome {
  state: 'ok' | 'failed';
  verified_at: string;
  db_name: string;
  backup_id: number;
  note: string;
}

interface Claim {
  dbName: string;
  backupId: number;
}

/**
 * Before Odoo can open the scratch (it has no credentials file yet): its crons and mail servers
 * off, so that the copy of a tenant sends nothing and runs nothing while it is served.
 */
const QUIET = `DO $$ BEGIN
  IF pg_catalog.to_regclass('public.ir_cron') IS NOT NULL THEN UPDATE public.ir_cron SET active = false WHERE active; END IF;
  IF pg_catalog.to_regclass('public.ir_mail_server') IS NOT NULL THEN UPDATE public.ir_mail_server SET active = false WHERE active; END IF;
  IF pg_catalog.to_regclass('public.fetchmail_server') IS NOT NULL THEN UPDATE public.fetchmail_server SET active = false WHERE active; END IF;
END $$`;

/**
 * Whether svc's daily backup window (its settings, UTC) is open at `now`: a due verify waits for it
 * to close, since restic check locks each repository against the night's backups (and they it). A
 * 24-hour window never closes: the verify does not wait for it.
 */
export function backupWindowOpen(
  now: Date,
  s: Pick<Settings, 'backup_schedule_enabled' | 'backup_window_start_hour' | 'backup_window_hours'> | null,
): boolean {
  if (!s?.backup_schedule_enabled || s.backup_window_hours >= 24) return false;
  return (now.getUTCHours() - s.backup_window_start_hour + 24) % 24 < s.backup_window_hours;
}

const message = (err: unknown) => (err as Error).message;
const repositoryName = (r: BackupRepository) => `${r.name ?? r.uuid} (${r.provider})`;

export function createVerifies(ctx: Ctx, restic: Restic, repositories: Repositories, restores: RestoreRuns, serverId: number) {
  const { db, log, secretBox, config } = ctx;

  /** The tenant with an Odoo host verified longest ago (never first), and its latest completed backup. */
  async function candidate(): Promise<Claim | null> {
    const rows = await db.$queryRaw<{ db_name: string; backup_id: number }[]>`
      SELECT t.db_name, max(t.id) AS backup_id FROM tenant_backups t
       WHERE t.backup_server_id = ${serverId} AND t.state = 'done'
         AND EXISTS (SELECT 1 FROM subscriptions s WHERE s.database_name = t.db_name
                        AND s.database_created_at IS NOT NULL AND s.root_server_id IS NOT NULL)
       GROUP BY t.db_name
       ORDER BY max(t.verified_at) NULLS FIRST, max(t.id)
       LIMIT 1`;
    return rows[0] ? { dbName: rows[0].db_name, backupId: Number(rows[0].backup_id) } : null;
  }

  /** A verify to run now: due (or asked for), none running, something to verify; claimed on the record. */
  async function claim(o: { force: boolean }): Promise<Claim | null> {
    const server = await db.backupServer.findUniqueOrThrow({ where: { id: serverId } });
    const refuse = (why: string) => {
      if (o.force) throw new ConflictError(why);
      return null;
    };
    if (server.verify_state === 'running')
      return refuse(`A verify of this backup server is running (its lease runs to ${server.verify_lease_until?.toISOString()})`);
    if (!o.force) {
      const days = config.BACKUP_VERIFY_DAYS;
      if (days === 0 || (server.verified_at && server.verified_at.getTime() > Date.now() - days * DAY_MS)) return null;
      if (backupWindowOpen(new Date(), await db.settings.findUnique({ where: { id: 1 } }))) return null;
    }
    const pick = await candidate();
    if (!pick) return refuse('Nothing to verify: no completed backup of a tenant with an Odoo host');
    const { count } = await db.backupServer.updateMany({
      where: { id: serverId, OR: [{ verify_state: null }, { verify_state: { not: 'running' } }] },
      data: {
        verify_state: 'running',
        verify_lease_until: leaseUntil(),
        verify_scratch: Prisma.DbNull,
        verify_note: `Running since ${new Date().toISOString()}: backup ${pick.backupId} of ${pick.dbName}`,
      },
    });
    return count === 1 ? pick : refuse('A verify of this backup server has just started');
  }

  /** The scratch database, its credentials file and its filestore gone; a UserError saying what stayed. */
  async function removeScratch(s: Scratch) {
    if (!SCRATCH.test(s.database)) throw new UserError(`Not a verify's scratch database: ${s.database}`);
    const stayed: string[] = [];
    const pg = await db.postgresqlServer.findUnique({ where: { id: s.postgresql_server_id } });
    if (pg) {
      await onServer(secretBox, pg, (query) => query(`DROP DATABASE IF EXISTS ${quoteIdent(s.database)} WITH (FORCE)`)).catch((err) =>
        stayed.push(`the database on ${pg.ip}:${pg.port} (${message(err)})`),
      );
    }
    const host = await db.rootServer.findUnique({ where: { id: s.root_server_id } });
    if (host) {
      await removeTenantCredentials(ctx, host, s.database, AUDIT).catch((err) => stayed.push(`its credentials file (${message(err)})`));
      const files = filestorePath(basePathOf(config, host), s.database);
      await runOnOdooHost(ctx, host, AUDIT, `rm -rf -- ${q(files)}`, SCRIPT_TIMEOUT_MS).catch((err) =>
        stayed.push(`its filestore ${files} (${message(err)})`),
      );
    }
    if (stayed.length > 0) throw new UserError(`The scratch database ${s.database} was not removed entirely: ${stayed.join('; ')}`);
  }

  /** The scratch served by the host's Odoo and signed in to as the tenant's administrator; what it proved. */
  async function serveAndSignIn(src: TenantSource & { host: NonNullable<TenantSource['host']> }, scratch: string): Promise<string> {
    const password = newPassword();
    const role = src.role ? { role: src.role.user, password: src.role.password } : null;
    const admin = await insideTenant(
      secretBox,
      src.pg,
      scratch,
      async (query: Query) => {
        await query(QUIET);
        return setCustomerPassword(query, password);
      },
      { role, what: `Scratch database ${scratch}`, deadlineMs: config.TENANT_DEADLINE_SECONDS * 1000 },
    );
    const hostId = src.host.id;
    if (!hostsOdoo(src.host)) return `Not signed in: svc did not set up Odoo on root server ${hostId}, so nothing serves it there`;
    // The host's Odoo opens a database of a role other than its own through the database's credentials file.
    if (src.role && src.role.user !== src.host.odoo_db_user) {
      const rolePassword = (await secretBox.reveal(src.role.password)) ?? '';
      await writeTenantCredentials(ctx, src.host, scratch, { role: src.role.user, password: rolePassword }, AUDIT);
    }
    return signInAsCustomer(
      ctx,
      src.host,
      { database: scratch, login: admin.login, password, uid: admin.uid },
      { user_id: null, job_id: null },
    );
  }

  /** The backup restored into a scratch, served and signed in to, then removed: the lines saying so (throws when it failed). */
  async function restoreTest(backup: TenantBackup, lines: string[]) {
    const src = await tenantSource(ctx, backup.db_name);
    const host = src.host;
    if (!host) throw new UserError(`Database ${backup.db_name} has no Odoo host any more`);
    const from = await restores.sourceOf(backup);
    const scratch: Scratch = {
      database: `svcvf_${backup.id}_${randomBytes(3).toString('hex')}`,
      postgresql_server_id: src.pg.id,
      root_server_id: host.id,
    };
    await db.$executeRaw`UPDATE backup_servers SET verify_scratch = ${JSON.stringify(scratch)}::jsonb WHERE id = ${serverId}`;
    const repo = await db.backupRepository.findFirst({ where: { backup_server_id: serverId, location: from.repo.location } });
    let failure: unknown = null;
    try {
      await restores.restoreBeside(src, from, scratch.database, filestorePath(basePathOf(config, host), scratch.database));
      lines.push(
        `Backup ${backup.id} of ${backup.db_name} (subscription ${src.subscriptionId}, made ${backup.created_at.toISOString()}, ` +
          `${backup.files ?? 0} files) restored from repository ${repo ? repositoryName(repo) : from.repo.location} into the scratch ` +
          `database ${scratch.database} on ${src.pg.ip}:${src.pg.port}, its filestore on root server ${host.id}.`,
      );
      const signedIn = await serveAndSignIn({ ...src, host }, scratch.database);
      lines.push(`${signedIn.charAt(0).toUpperCase()}${signedIn.slice(1)}.`);
    } catch (err) {
      failure = err;
    }
    try {
      await removeScratch(scratch);
      lines.push(`The scratch database ${scratch.database}, its credentials file and its filestore were removed.`);
      await db.$executeRaw`UPDATE backup_servers SET verify_scratch = NULL WHERE id = ${serverId}`;
    } catch (err) {
      if (failure) lines.push(message(err));
      else failure = err;
    }
    if (failure) throw failure;
  }

  /** restic check of every repository of the server: a line each; false when one failed. */
  async function checkRepositories(lines: string[]): Promise<boolean> {
    let ok = true;
    for (const repo of await db.backupRepository.findMany({ where: { backup_server_id: serverId }, orderBy: { id: 'asc' } })) {
      try {
        const checked = await restic.check(await repositories.toRestic(repo), { readDataSubset: READ_DATA_SUBSET });
        if (checked.ok)
          lines.push(`restic check of repository ${repositoryName(repo)}: no errors (${READ_DATA_SUBSET} of its data read back).`);
        else lines.push(`restic check of repository ${repositoryName(repo)} found errors: ${checked.output.slice(-1500)}`);
        ok &&= checked.ok;
      } catch (err) {
        lines.push(`restic check of repository ${repositoryName(repo)} could not run: ${message(err)}`);
        ok = false;
      }
    }
    return ok;
  }

  /** The outcome on the record and in its chatter (an alert when failed); the backup that passed verified. */
  async function record(state: 'ok' | 'failed', lines: string[], passed: number | null): Promise<string> {
    const note = lines.join('\n').slice(0, 8000);
    const at = new Date();
    await db.$transaction(async (tx) => {
      if (passed !== null) await tx.tenantBackup.updateMany({ where: { id: passed }, data: { verified_at: at } });
      await tx.backupServer.update({
        where: { id: serverId },
        data: { verified_at: at, verify_state: state, verify_note: note, verify_lease_until: null, verify_scratch: Prisma.DbNull },
      });
      await postMessage(tx, {
        model_name: MODEL,
        rec_id: serverId,
        body: `${state === 'ok' ? 'Backups verified.' : 'Backup verify failed.'}\n${note}`,
        message_type: 'notification',
        subtype_xmlid: state === 'ok' ? 'mail.mt_note' : 'mail.mt_alert',
      });
    });
    return at.toISOString();
  }

  /** Runs a claimed verify to its end: the outcome recorded and answered. */
  async function execute(c: Claim): Promise<VerifyOutcome> {
    // Raw: a lease is not a change of the record (its updated_at stays).
    const renew = () =>
      db.$executeRaw`UPDATE backup_servers SET verify_lease_until = ${leaseUntil()} WHERE id = ${serverId} AND verify_state = 'running'`;
    return whileLeased(log, 'the verify', renew, async () => {
      const lines: string[] = [];
      let passed: number | null = null;
      try {
        const backup = await db.tenantBackup.findFirst({ where: { id: c.backupId, backup_server_id: serverId, state: 'done' } });
        if (!backup) throw new UserError(`Backup ${c.backupId} of ${c.dbName} is no longer there (pruned meanwhile)`);
        await restoreTest(backup, lines);
        passed = backup.id;
      } catch (err) {
        lines.push(`The restore test of backup ${c.backupId} of ${c.dbName} failed: ${message(err)}`);
      }
      const checked = await checkRepositories(lines);
      const state = passed !== null && checked ? 'ok' : 'failed';
      const at = await record(state, lines, passed);
      log.info({ backup_id: c.backupId, db_name: c.dbName, state }, 'backup verify ended');
      return { state, verified_at: at, db_name: c.dbName, backup_id: c.backupId, note: lines.join('\n') };
    });
  }

  /** A verify whose process died: failed as interrupted, its scratch removed. */
  async function sweep() {
    const server = await db.backupServer.findUnique({ where: { id: serverId } });
    if (server?.verify_state !== 'running' || (server.verify_lease_until && server.verify_lease_until > new Date())) return;
    const { count } = await db.backupServer.updateMany({
      where: { id: serverId, verify_state: 'running', OR: [{ verify_lease_until: null }, { verify_lease_until: { lt: new Date() } }] },
      // Taken over (still running) while its scratch is removed: no other process sweeps it too.
      data: { verify_lease_until: leaseUntil() },
    });
    if (count === 0) return;
    const lines = ['Interrupted: the backup server stopped while the verify ran.'];
    const taken = await db.backupServer.findUniqueOrThrow({ where: { id: serverId } });
    const scratch = taken.verify_scratch as Scratch | null;
    if (scratch) {
      await removeScratch(scratch)
        .then(() => lines.push(`Its scratch database ${scratch.database} was removed.`))
        .catch((err) => lines.push(message(err)));
    }
    await record('failed', lines, null);
  }

  return {
    claim: () => claim({ force: false }),
    execute,
    sweep,
    /** POST /api/verify: one now, whatever the schedule (409 while one runs, or with nothing to verify). */
    async now(): Promise<VerifyOutcome> {
      await sweep();
      const c = await claim({ force: true });
      return execute(c!);
    },
  };
}

export type Verifies = ReturnType<typeof createVerifies>;
