// One tenant's part of a rollout, as a state machine persisted in rollout_tenants, so that a rollout
// resumed after a crash of the service picks each tenant up where it was and never updates one
// twice nor leaves one half-done:
//   pending   → which installed modules changed (checksums); none: `unchanged`, nothing runs
//   copying   → the safety copy: the database (CREATE DATABASE … TEMPLATE) and the filestore (hard links)
//   updating  → `-u <changed>` with the host's Odoo; resumed here, the tenant is first put back
//               from the copy (the interrupted update may have written part of its work), then updated
//   restoring → the update failed: the database and filestore are put back from the copy
// ending `updated`, `unchanged` or `failed`. The tenant's maintenance flag is on from the copy to
// the end. Each tenant gets one action-log row, a failure also a message in its chatter.
import type { AppContext } from '../context.js';
import { writeActionLog } from '../core/action-log.js';
import { postMessage } from '../core/chatter.js';
import { UserError } from '../core/errors.js';
import { refusedForConnections, type RetryRest, retriedForConnections, retryTarget } from './rollout-pacing.js';
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
import { updateScript, waitForUpdate } from './rollout-scripts.js';

const STEP_TIMEOUT_MS = 5 * 60_000;
const UPDATE_TIMEOUT_MS = 60 * 60_000;

export type Checksums = Record<string, string>;

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
}

/**
 * The installed modules whose code changed since the tenant's recorded checksums: those whose
 * checksum differs, and those without one that live in the rollout's deploy path (a tenant's first
 * rollout: what was deployed may be newer than what its database was made with). Modules not on
 * the addons path any more are left alone (Odoo could not update them).
 */
export function changedModules(
  installed: readonly string[],
  host: Pick<RolloutHost, 'sums' | 'dirs' | 'deployPath'>,
  recorded: Checksums | null,
) {
  return installed
    .filter((m) => host.sums[m] !== undefined)
    .filter((m) => {
      const before = recorded?.[m];
      if (before === undefined) return host.deployPath !== null && host.dirs[m] === host.deployPath;
      return before !== host.sums[m];
    })
    .sort();
}

/** The checksums of the tenant's installed modules now (what the next rollout compares with). */
export const checksumsOf = (installed: readonly string[], sums: Checksums): Checksums =>
  Object.fromEntries(installed.filter((m) => sums[m] !== undefined).map((m) => [m, sums[m]!]));

/** Odoo's words about a failed update: the module it was loading, and its complaints (the end). */
export function updateError(stdout: string, exit: string): string {
  const last = /SVC-LAST-MODULE .*?(?:Loading module|module) ([A-Za-z0-9_]+)/.exec(stdout)?.[1];
  const said = stdout
    .split('\n')
    .filter((l) => !l.startsWith('SVC-LAST-MODULE '))
    .join('\n')
    .trim()
    .slice(-3000);
  return `${last ? `while updating module ${last}: ` : ''}odoo-bin exited with ${exit}\n${said}`;
}

type Row = Awaited<ReturnType<typeof loadRow>>;

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

  async function installedModules(pg: PostgresqlServerRecord, row: Row): Promise<string[]> {
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
          await query('ROLLBACK').catch(() => {});
        }
      },
      {
        role: placementOf(row.subscription).tenantRole,
        what: `Database ${row.database_name} of subscription ${row.subscription_id}`,
        deadlineMs: ctx.config.TENANT_DEADLINE_SECONDS * 1000,
      },
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
      {
        role: placementOf(row.subscription).tenantRole,
        what: `Database ${row.database_name}`,
        deadlineMs: ctx.config.TENANT_DEADLINE_SECONDS * 1000,
      },
    ).catch(() => {}); // Odoo reloads anyway when its own signal went through; this only makes sure
  }

  /** `attempt` tried again while PostgreSQL refuses it for want of connection slots (rollout-pacing.ts). */
  const retried = <T>(host: RolloutHost, row: Row, what: string, ...rest: RetryRest<T>) =>
    retriedForConnections(ctx, retryTarget(host, row, placementOf(row.subscription).pg), what, ...rest);

  async function onHost<T>(host: RolloutHost, script: string, what: string, timeoutMs = STEP_TIMEOUT_MS) {
    const session = await host.session();
    try {
      const res = await session.run(script, { timeoutMs });
      if (res.exitCode !== 0) throw new UserError(session.mask(`${what}: ${(res.stderr || res.stdout).trim().slice(-1500)}`));
      return res.stdout as T & string;
    } finally {
      session.close();
    }
  }

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

  async function dropCopy(pg: PostgresqlServerRecord, host: RolloutHost, copy: string) {
    await dropSafetyCopy(ctx.secretBox, pg, copy);
    await onHost(host, removeFilestoreCopy(host.layout, copy), `Removing the filestore copy ${copy}`);
  }

  async function finish(
    host: RolloutHost,
    row: Row,
    state: 'updated' | 'unchanged' | 'failed',
    data: { error?: string; checksums?: Checksums },
  ) {
    const finished = new Date();
    const started = row.started_at ?? finished;
    const duration = finished.getTime() - started.getTime();
    await db.rolloutTenant.update({
      where: { id: row.id },
      data: {
        state,
        error: data.error ?? null,
        checksums: data.checksums,
        finished_at: finished,
        duration_ms: duration,
      },
    });
    const modules = row.modules.length ? ` -u ${row.modules.join(',')}` : '';
    const what = `${host.commit ? `commit ${host.commit}` : 'code'} on root server ${host.serverId}`;
    const output =
      state === 'unchanged'
        ? 'unchanged: no installed module changed; nothing ran'
        : state === 'updated'
          ? `updated${modules} in ${(duration / 1000).toFixed(1)} s`
          : `update_failed${modules}: restored from its safety copy (database and filestore) after ${(duration / 1000).toFixed(1)} s\n${data.error ?? ''}`;
    await writeActionLog(db, {
      model_name: 'svc.subscription',
      rec_id: row.subscription_id,
      action_type: 'deployment',
      operation: 'rollout',
      input_text: `rollout ${host.rolloutId}: ${what}, database ${row.database_name}`,
      output_text: output,
      status: state === 'failed' ? 'failure' : 'success',
      user_id: host.userId,
      job_id: host.jobId,
    });
    if (state === 'failed') {
      await postMessage(db, {
        model_name: 'svc.subscription',
        rec_id: row.subscription_id,
        body: `update_failed: the rollout of ${what} could not update ${row.database_name}${modules}; it was put back as it was before (database and filestore).\n${data.error ?? ''}`,
        message_type: 'notification',
        subtype_xmlid: 'mail.mt_alert',
      });
    }
  }

  /** Runs (or resumes) one tenant to its end. An error thrown here leaves its state to be resumed. */
  async function run(host: RolloutHost, rowId: number): Promise<void> {
    let row = await loadRow(ctx, rowId);
    const template = row.subscription.database_template;
    if (!template) {
      await db.rolloutTenant.update({ where: { id: row.id }, data: { started_at: row.started_at ?? new Date() } });
      return finish(host, await loadRow(ctx, rowId), 'failed', {
        error: 'The subscription has no database template any more: the service cannot reach its database',
      });
    }
    const pg = placementOf(row.subscription).pg;
    const resumedUpdate = row.state === 'updating';

    if (row.state === 'pending') {
      const started = new Date();
      await db.rolloutTenant.update({ where: { id: row.id }, data: { started_at: started } });
      row = { ...row, started_at: started };
      // Nothing is done to the tenant before its copy: a failure here (its database dropped
      // meanwhile, the host unreachable) fails this tenant only, with the reason.
      let changed: string[];
      try {
        if (!row.subscription.database_created_at) throw new UserError('its database was dropped after the rollout began');
        const installed = await retried(host, row, 'reading its modules', () => installedModules(pg, row));
        changed = changedModules(installed, host, await recordedChecksums(ctx, row.subscription_id, row.id));
        if (changed.length === 0) return finish(host, row, 'unchanged', { checksums: checksumsOf(installed, host.sums) });
        await onHost(host, setMaintenance(host.layout, row.database_name, true), 'Setting the maintenance flag');
      } catch (err) {
        return finish(host, row, 'failed', { error: `Not updated: ${(err as Error).message}` });
      }
      await db.rolloutTenant.update({
        where: { id: row.id },
        data: { state: 'copying', modules: changed, safety_copy: copyName(row.subscription.database_oid, row.id) },
      });
      row = await loadRow(ctx, rowId);
    }

    if (row.state === 'copying') {
      const copy = row.safety_copy!;
      try {
        const oid = await retried(host, row, 'its safety copy', () => copyDatabase(pg, row, copy));
        await db.rolloutTenant.update({ where: { id: row.id }, data: { safety_copy_oid: oid } });
        await onHost(host, copyFilestore(host.layout, row.database_name, copy), 'Copying the filestore');
      } catch (err) {
        // Not enough disk, say: the tenant is not updated, and says why.
        await dropCopy(pg, host, copy).catch(() => {});
        await onHost(host, setMaintenance(host.layout, row.database_name, false), 'Clearing the maintenance flag').catch(() => {});
        await db.rolloutTenant.update({ where: { id: row.id }, data: { safety_copy: null, safety_copy_oid: null } });
        return finish(host, row, 'failed', {
          error: `The safety copy could not be made, so the tenant was not updated: ${(err as Error).message}`,
        });
      }
      await db.rolloutTenant.update({ where: { id: row.id }, data: { state: 'updating' } });
      row = await loadRow(ctx, rowId);
    }

    if (row.state === 'updating') {
      /** The tenant put back from its copy, and copied again: the update starts over from there. */
      const putBack = async () => {
        await onHost(host, waitForUpdate(host.layout, row.database_name), 'Waiting for an earlier update', UPDATE_TIMEOUT_MS);
        await restoreDatabase(pg, row);
        await onHost(host, restoreFilestore(host.layout, row.database_name, row.safety_copy!), 'Restoring the filestore');
        const oid = await copyDatabase(pg, await loadRow(ctx, rowId), row.safety_copy!);
        await db.rolloutTenant.update({ where: { id: row.id }, data: { safety_copy_oid: oid } });
        await onHost(host, copyFilestore(host.layout, row.database_name, row.safety_copy!), 'Copying the filestore');
        row = await loadRow(ctx, rowId);
      };
      // The service stopped during the update: wait for an update still running on the host, put
      // the tenant back from the copy, and update it once, from there.
      if (resumedUpdate) await putBack();
      const update = async () => {
        const session = await host.session();
        try {
          return await session.run(updateScript(host.layout, host.source, row.database_name, row.modules), {
            timeoutMs: UPDATE_TIMEOUT_MS,
          });
        } finally {
          session.close();
        }
      };
      // Odoo refused a connection for want of slots: what it did is put back, and it runs again once there is room.
      const res = await retried(
        host,
        row,
        `-u ${row.modules.join(',')}`,
        update,
        (r) => (r.exitCode !== 0 && refusedForConnections(r.stdout + r.stderr) ? r.stdout + r.stderr : null),
        putBack,
      );
      if (res.exitCode === 0 && !res.timedOut) {
        // Recorded as updated before its users come back: a crash after this never restores the
        // copy over what they write; it only leaves the clean-up, done when the rollout resumes.
        await signalRegistry(pg, row);
        const installed = await installedModules(pg, row);
        await finish(host, row, 'updated', { checksums: checksumsOf(installed, host.sums) });
        return cleanUp(host, await loadRow(ctx, rowId));
      }
      const exit = res.timedOut ? 'a timeout' : String(res.exitCode ?? res.signal);
      await db.rolloutTenant.update({
        where: { id: row.id },
        data: { state: 'restoring', error: updateError(res.stdout + res.stderr, exit) },
      });
      row = await loadRow(ctx, rowId);
    }

    if (row.state === 'restoring') {
      await onHost(host, waitForUpdate(host.layout, row.database_name), 'Waiting for the update to end', UPDATE_TIMEOUT_MS);
      await restoreDatabase(pg, row);
      await onHost(host, restoreFilestore(host.layout, row.database_name, row.safety_copy!), 'Restoring the filestore');
      await signalRegistry(pg, await loadRow(ctx, rowId));
      await finish(host, row, 'failed', { error: row.error ?? 'the update failed' });
      return cleanUp(host, await loadRow(ctx, rowId));
    }

    // Ended, but the service stopped before its clean-up (the copy, the flag): done now.
    if (row.safety_copy) return cleanUp(host, row);
  }

  /** After a tenant's end: its maintenance flag off, what is left of its safety copy removed. */
  async function cleanUp(host: RolloutHost, row: Row) {
    await onHost(host, setMaintenance(host.layout, row.database_name, false), 'Clearing the maintenance flag');
    if (!row.safety_copy) return;
    await dropCopy(placementOf(row.subscription).pg, host, row.safety_copy);
    await db.rolloutTenant.update({ where: { id: row.id }, data: { safety_copy: null, safety_copy_oid: null } });
  }

  return { run };
}
