// One tenant's part of a rollout, as a state machine persisted in rollout_tenants, so that a rollout
// resumed after a crash of the service picks each tenant up where it was and never updates one
// twice nor leaves one half-done. Each state has its step (STEPS), which persists the state it
// leads to or ends the tenant:
//   pending   → which installed modules changed (checksums); none: `unchanged`, nothing runs
//   copying   → the safety copy: the database (CREATE DATABASE … TEMPLATE) and the filestore (hard links)
//   updating  → `-u <changed>` with the host's Odoo; resumed here, the tenant is first put back
//               from the copy (the interrupted update may have written part of its work), then updated
//   restoring → the update failed: the database and filestore are put back from the copy
// ending `updated`, `unchanged` or `failed`. The tenant's maintenance flag is on from the copy to
// the end; the clean-up (the flag off, the copy removed) follows every end that made a copy. Each
// tenant gets one action-log row, a failure also a message in its chatter.
import type { AppContext } from '../context.js';
import { UserError } from '../core/errors.js';
import type { ExecResult } from '../core/ssh.js';
import {
  copyFilestore,
  dropSafetyCopy,
  insideTenant,
  lockTenantTables,
  makeSafetyCopy,
  PLACEMENT_INCLUDE,
  placementOf,
  removeFilestoreCopy,
  restoreFilestore,
  restoreSafetyCopy,
  safetyCopyName,
  setMaintenance,
} from '../instances/index.js';
import type { OdooLayout } from '../odoo/index.js';
import { type PostgresqlServerRecord, quoteIdent } from '../postgresql/index.js';
import type { RemoteSession } from '../servers/index.js';
import { refusedForConnections, type RetryRest, retriedForConnections, retryTarget } from './rollout-pacing.js';
import { updateScript, waitForUpdate } from './rollout-scripts.js';
import { type Checksums, changedModules, checksumsOf, reportCleanUp, reportEnd, updateError } from './rollout-tenant-report.js';

export { type Checksums, changedModules, checksumsOf, updateError } from './rollout-tenant-report.js';

const UPDATE_TIMEOUT_MS = 60 * 60_000;

/**
 * The safety copy's name (its database and filestore directory): the oid of the tenant's database
 * (unique on its PostgreSQL server, whoever else uses it: another service, a staging beside
 * production) and a random part.
 */
export const copyName = (databaseOid: bigint | null, rowId: number) => safetyCopyName(databaseOid ?? `r${rowId}`);

/** What a rollout knows of its host while it runs. */
export interface RolloutHost {
  rolloutId: number;
  serverId: number;
  layout: OdooLayout;
  source: string;
  /** The host's module checksums and the directory of each module, at the rollout's start. */
  sums: Checksums;
  dirs: Record<string, string>;
  /** The deploy path the rollout is for: its modules count as changed for a tenant without a recorded checksum. */
  deployPath: string | null;
  /** The commit, for messages (12 hex digits), or null. */
  commit: string | null;
  userId: number | null;
  jobId: string;
  /** PostgreSQL connections one update process may take (its db_maxconn). */
  perUpdate: number;
  session(): Promise<RemoteSession>;
  /** Runs one program on the host that must succeed (a failure names `what`); answers its output. */
  check(command: string, what: string, timeoutMs?: number): Promise<string>;
}

type Row = Awaited<ReturnType<typeof loadRow>>;
type Active = 'pending' | 'copying' | 'updating' | 'restoring';
/** One state's step: the tenant as loaded, its PostgreSQL server, and whether the run began in this state (resumed). */
type Step = (host: RolloutHost, row: Row, pg: PostgresqlServerRecord, resumed: boolean) => Promise<void>;

async function loadRow(ctx: Pick<AppContext, 'db'>, id: number) {
  return ctx.db.rolloutTenant.findUniqueOrThrow({
    where: { id },
    include: { subscription: { include: PLACEMENT_INCLUDE } },
  });
}

/** The tenant's last recorded checksums (its last successful update, or a rollout that found it unchanged). */
async function recordedChecksums(ctx: Pick<AppContext, 'db'>, subscriptionId: number, before: number): Promise<Checksums | null> {
  const last = await ctx.db.rolloutTenant.findFirst({
    where: { subscription_id: subscriptionId, state: { in: ['updated', 'unchanged'] }, id: { not: before } },
    orderBy: [{ finished_at: 'desc' }, { id: 'desc' }],
    select: { checksums: true },
  });
  return (last?.checksums as Checksums | null | undefined) ?? null;
}

export function createTenantRollout(ctx: AppContext) {
  const db = ctx.db;
  const reload = (row: Row) => loadRow(ctx, row.id);
  const tenant = (row: Row, what: string) => ({
    role: placementOf(row.subscription).tenantRole,
    what,
    deadlineMs: ctx.config.TENANT_DEADLINE_SECONDS * 1000,
  });

  async function installedModules(pg: PostgresqlServerRecord, row: Row): Promise<string[]> {
    const what = `Database ${row.database_name} of subscription ${row.subscription_id}`;
    return insideTenant(
      ctx.secretBox,
      pg,
      row.database_name,
      async (query) => {
        await query('BEGIN');
        try {
          await lockTenantTables(query, ['ir_module_module'], 'ACCESS SHARE');
          const { rows } = await query("SELECT name::text AS name FROM public.ir_module_module WHERE state IN ('installed', 'to upgrade')");
          return rows.map((r) => String(r.name));
        } finally {
          // Only read: a failed ROLLBACK loses nothing (the session ends with it), but is told.
          await query('ROLLBACK').catch((err: Error) => ctx.log.warn({ err, database: row.database_name }, 'ROLLBACK failed after a read'));
        }
      },
      tenant(row, what),
    );
  }

  /** The running Odoo reloads the tenant's registry at its next request (18.0 and 19.0 name the sequence differently). */
  async function signalRegistry(pg: PostgresqlServerRecord, row: Row) {
    await insideTenant(
      ctx.secretBox,
      pg,
      row.database_name,
      async (query) => {
        const { rows } = await query(
          `SELECT c.relname::text AS name FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = 'public' AND c.relkind = 'S' AND c.relname IN ('base_registry_signaling', 'orm_signaling_registry')`,
        );
        for (const r of rows) await query(`SELECT pg_catalog.nextval('public.${quoteIdent(String(r.name))}')`);
      },
      tenant(row, `Database ${row.database_name}`),
      // Odoo reloads anyway when its own signal went through; this only makes sure. Told, not failed.
    ).catch((err: Error) => ctx.log.warn({ err, database: row.database_name }, "the registry's signal failed"));
  }

  /** `attempt` tried again while PostgreSQL refuses it for want of connection slots (rollout-pacing.ts). */
  const retried = <T>(host: RolloutHost, row: Row, what: string, ...rest: RetryRest<T>) =>
    retriedForConnections(ctx, retryTarget(host, row, placementOf(row.subscription).pg), what, ...rest);

  /** The safety copy of the database (instances' safety-copy.ts); answers its oid. */
  const copyDatabase = (pg: PostgresqlServerRecord, row: Row, copy: string): Promise<bigint> =>
    makeSafetyCopy(ctx.secretBox, pg, row.database_name, copy);

  /**
   * Puts the database back from the copy (only over the subscription's database, or the copy
   * renamed already); the subscription then knows the database by the copy's oid. Idempotent.
   */
  async function restoreDatabase(pg: PostgresqlServerRecord, row: Row) {
    const copyOid = row.safety_copy_oid;
    await restoreSafetyCopy(ctx.secretBox, pg, {
      database: row.database_name,
      copy: row.safety_copy!,
      copyOid,
      databaseOid: row.subscription.database_oid,
      whose: "the subscription's",
    });
    if (copyOid !== null) await db.subscription.update({ where: { id: row.subscription_id }, data: { database_oid: copyOid } });
  }

  /** The tenant put back from its copy, and copied again: an update starts over from there. */
  async function putBack(host: RolloutHost, pg: PostgresqlServerRecord, row: Row) {
    const copy = row.safety_copy!;
    await host.check(waitForUpdate(host.layout, row.database_name), 'Waiting for an earlier update', UPDATE_TIMEOUT_MS);
    await restoreDatabase(pg, row);
    await host.check(restoreFilestore(host.layout, row.database_name, copy), 'Restoring the filestore');
    const oid = await copyDatabase(pg, await reload(row), copy);
    await db.rolloutTenant.update({ where: { id: row.id }, data: { safety_copy_oid: oid } });
    await host.check(copyFilestore(host.layout, row.database_name, copy), 'Copying the filestore');
  }

  /** pending: nothing is done to the tenant before its copy; a failure here fails this tenant only, with the reason. */
  const findChanges: Step = async (host, found, pg) => {
    const started = new Date();
    await db.rolloutTenant.update({ where: { id: found.id }, data: { started_at: started } });
    const row = { ...found, started_at: started };
    let changed: string[];
    try {
      if (!row.subscription.database_created_at) throw new UserError('its database was dropped after the rollout began');
      const installed = await retried(host, row, 'reading its modules', () => installedModules(pg, row));
      changed = changedModules(installed, host, await recordedChecksums(ctx, row.subscription_id, row.id));
      if (changed.length === 0) return reportEnd(ctx, host, row, 'unchanged', { checksums: checksumsOf(installed, host.sums) });
      await host.check(setMaintenance(host.layout, row.database_name, true), 'Setting the maintenance flag');
    } catch (err) {
      return reportEnd(ctx, host, row, 'failed', { error: `Not updated: ${(err as Error).message}` });
    }
    await db.rolloutTenant.update({
      where: { id: row.id },
      data: { state: 'copying', modules: changed, safety_copy: copyName(row.subscription.database_oid, row.id) },
    });
  };

  /** copying: a copy that cannot be made (not enough disk, say) fails the tenant, not updated; the clean-up removes what was made. */
  const makeCopy: Step = async (host, row, pg) => {
    const copy = row.safety_copy!;
    try {
      const oid = await retried(host, row, 'its safety copy', () => copyDatabase(pg, row, copy));
      await db.rolloutTenant.update({ where: { id: row.id }, data: { safety_copy_oid: oid } });
      await host.check(copyFilestore(host.layout, row.database_name, copy), 'Copying the filestore');
    } catch (err) {
      return reportEnd(ctx, host, row, 'failed', {
        error: `The safety copy could not be made, so the tenant was not updated: ${(err as Error).message}`,
      });
    }
    await db.rolloutTenant.update({ where: { id: row.id }, data: { state: 'updating' } });
  };

  /** The update's run on the host: its result, whatever it is (a failure is the tenant's, not the step's). */
  async function runUpdate(host: RolloutHost, row: Row): Promise<ExecResult> {
    const session = await host.session();
    try {
      return await session.run(updateScript(host.layout, host.source, row.database_name, row.modules), { timeoutMs: UPDATE_TIMEOUT_MS });
    } finally {
      session.close();
    }
  }

  /**
   * updating: the service stopped during the update (resumed): wait for an update still running on
   * the host, put the tenant back from the copy, and update it once, from there.
   */
  const update: Step = async (host, row, pg, resumed) => {
    if (resumed) await putBack(host, pg, row);
    // Odoo refused a connection for want of slots: what it did is put back, and it runs again once there is room.
    const res = await retried(
      host,
      row,
      `-u ${row.modules.join(',')}`,
      () => runUpdate(host, row),
      (r) => (r.exitCode !== 0 && refusedForConnections(r.stdout + r.stderr) ? r.stdout + r.stderr : null),
      async () => putBack(host, pg, await reload(row)),
    );
    if (res.exitCode === 0 && !res.timedOut) {
      // Recorded as updated before its users come back: a crash after this never restores the
      // copy over what they write; it only leaves the clean-up, done when the rollout resumes.
      await signalRegistry(pg, row);
      const installed = await installedModules(pg, row);
      return reportEnd(ctx, host, row, 'updated', { checksums: checksumsOf(installed, host.sums) });
    }
    const exit = res.timedOut ? 'a timeout' : String(res.exitCode ?? res.signal);
    await db.rolloutTenant.update({
      where: { id: row.id },
      data: { state: 'restoring', error: updateError(res.stdout + res.stderr, exit) },
    });
  };

  /** restoring: the database and filestore put back from the copy, once the update is over. */
  const restore: Step = async (host, row, pg) => {
    await host.check(waitForUpdate(host.layout, row.database_name), 'Waiting for the update to end', UPDATE_TIMEOUT_MS);
    await restoreDatabase(pg, row);
    await host.check(restoreFilestore(host.layout, row.database_name, row.safety_copy!), 'Restoring the filestore');
    await signalRegistry(pg, await reload(row));
    await reportEnd(ctx, host, row, 'failed', { error: row.error ?? 'the update failed' });
  };

  const STEPS: Record<Active, Step> = { pending: findChanges, copying: makeCopy, updating: update, restoring: restore };
  const isActive = (state: string): state is Active => state in STEPS;

  /**
   * After a tenant's end: its maintenance flag off and what is left of its safety copy removed, each
   * tried whatever the other did. The copy stays recorded until both are done: a failure is written
   * to the tenant's action log and fails the job, and the rollout's next run (queued again every
   * minute while the rollout is unfinished) tries again, so no tenant is left on its maintenance page.
   */
  async function cleanUp(host: RolloutHost, row: Row) {
    const copy = row.safety_copy!;
    const failed: string[] = [];
    const attempt = (work: () => Promise<unknown>) => work().catch((err: Error) => failed.push(err.message));
    await attempt(() => host.check(setMaintenance(host.layout, row.database_name, false), 'Clearing the maintenance flag'));
    await attempt(() =>
      dropSafetyCopy(ctx.secretBox, placementOf(row.subscription).pg, copy).catch((err: Error) => {
        throw new Error(`Dropping the safety copy ${copy}: ${err.message}`);
      }),
    );
    await attempt(() => host.check(removeFilestoreCopy(host.layout, copy), `Removing the filestore copy ${copy}`));
    if (failed.length > 0) return reportCleanUp(ctx, host, row, failed);
    await db.rolloutTenant.update({ where: { id: row.id }, data: { safety_copy: null, safety_copy_oid: null } });
  }

  /** Runs (or resumes) one tenant to its end, state by state. An error thrown here leaves its state to be resumed. */
  async function run(host: RolloutHost, rowId: number): Promise<void> {
    let row = await loadRow(ctx, rowId);
    if (!row.subscription.database_template) {
      await db.rolloutTenant.update({ where: { id: row.id }, data: { started_at: row.started_at ?? new Date() } });
      return reportEnd(ctx, host, await reload(row), 'failed', {
        error: 'The subscription has no database template any more: the service cannot reach its database',
      });
    }
    const pg = placementOf(row.subscription).pg;
    const began = row.state;
    while (isActive(row.state)) {
      await STEPS[row.state](host, row, pg, row.state === began);
      row = await reload(row);
    }
    // Ended (or ended before a crash cut its clean-up short): the flag and the copy go.
    if (row.safety_copy) await cleanUp(host, row);
  }

  return { run };
}
