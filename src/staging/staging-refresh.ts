// Staging copies follow the rollouts of their host (docs/staging.md). One Odoo serves production and
// its copies, so a rollout that restarted it on new code leaves each copy's schema behind: the
// rollout marks every copy of its host stale (the rollout and its commit), `staging_follow` (every
// minute) queues a refresh of each stale copy once per rollout, and `refresh` (also the operator's
// action) brings a copy to the code on its host as a rollout brings a tenant, with the same parts:
// its maintenance flag, a safety copy of the database and filestore (recorded: a refresh resumed
// after a crash puts the copy back first), `-u all` under the database's update lock, then Odoo's
// neutralization again (an update may turn a cron or a mail server back on) and svc's check. On
// failure the copy is put back from its safety copy, stays stale and says why (its `error`, an
// alert in the subscription's chatter, the job failed).
import type { Job } from 'bullmq';
import type { AppContext } from '../context.js';
import { postMessage } from '../core/chatter.js';
import { ConflictError, NotFoundError, UserError } from '../core/errors.js';
import type { JobPayload } from '../core/jobs.js';
import { publicJobId } from '../core/queue.js';
import type { StagingInstance } from '../generated/prisma/client.js';
import {
  copyFilestore,
  databaseOwner,
  dropSafetyCopy,
  insideTenant,
  makeSafetyCopy,
  newRolePassword,
  onServer,
  PLACEMENT_INCLUDE,
  placementOf,
  removeFilestoreCopy,
  restoreFilestore,
  restoreSafetyCopy,
  runOnOdooHost,
  safetyCopyName,
  setMaintenance,
  type TenantRole,
  writeTenantCredentials,
} from '../instances/index.js';
import { loadOdooHost, odooLayout } from '../odoo/index.js';
import { findDatabase, quoteIdent, scramVerifier } from '../postgresql/index.js';
import { updateError, updateScript, waitForUpdate } from '../rollouts/index.js';
import { basePathOf, openRemoteSession } from '../servers/index.js';
import { databaseStep, type StepAudit } from '../subscriptions/index.js';
import { stagingJobs } from './staging-job-specs.js';
import { neutralized, neutralizeScript } from './staging-scripts.js';

const STEP_TIMEOUT_MS = 15 * 60_000;
const UPDATE_TIMEOUT_MS = 60 * 60_000;
/** A role svc made for one database (instances' tenant-role.ts). */
const OWN_ROLE = /^svc_db_\d+$/;

type Payload = JobPayload<typeof stagingJobs.staging_refresh>;

export function createStagingRefresh(ctx: AppContext) {
  const { db } = ctx;

  /** The copy's PostgreSQL server and Odoo host (recorded when it was made), which must run Odoo. */
  async function placeOf(row: StagingInstance) {
    if (row.postgresql_server_id === null || row.root_server_id === null) {
      throw new UserError(`The servers of staging copy ${row.database_name} are not known`);
    }
    const pg = await db.postgresqlServer.findUniqueOrThrow({ where: { id: row.postgresql_server_id } });
    const host = await loadOdooHost(db, row.root_server_id);
    if (host.odoo_state !== 'running') throw new UserError(`Odoo on root server ${host.id} is ${host.odoo_state}, not running`);
    const version = await db.odooVersion.findUniqueOrThrow({ where: { id: host.odoo_version_id! } });
    const l = odooLayout(basePathOf(ctx.config, host), host.odoo_http_port);
    return { pg, host, l, source: l.sourceOf(version.name) };
  }
  type Place = Awaited<ReturnType<typeof placeOf>>;

  const onHost = (place: Place, audit: StepAudit, script: string, timeoutMs = STEP_TIMEOUT_MS) =>
    runOnOdooHost(ctx, place.host, audit, script, timeoutMs);
  const reload = (id: number) => db.stagingInstance.findUniqueOrThrow({ where: { id } });

  /** The safety copy of the copy (database, then filestore), recorded before it is made. */
  async function makeCopy(row: StagingInstance, place: Place, audit: StepAudit) {
    const oid = row.database_oid ?? (await onServer(ctx.secretBox, place.pg, (q) => findDatabase(q, row.database_name)))?.oid;
    if (oid === undefined) throw new UserError(`Staging copy ${row.database_name} does not exist`);
    const copy = safetyCopyName(oid);
    await db.stagingInstance.update({ where: { id: row.id }, data: { database_oid: oid, safety_copy: copy, safety_copy_oid: null } });
    const copyOid = await databaseStep(
      db,
      row.subscription_id,
      audit,
      `CREATE DATABASE ${quoteIdent(copy)} TEMPLATE ${quoteIdent(row.database_name)}`,
      () => makeSafetyCopy(ctx.secretBox, place.pg, row.database_name, copy),
    );
    await db.stagingInstance.update({ where: { id: row.id }, data: { safety_copy_oid: copyOid } });
    await onHost(place, audit, copyFilestore(place.l, row.database_name, copy));
    return reload(row.id);
  }

  /**
   * Drops a safety copy, then its record (a crash before leaves it recorded: the next refresh puts the
   * copy back from it, then updates again).
   */
  async function dropCopy(row: StagingInstance, place: Place, audit: StepAudit) {
    if (!row.safety_copy) return;
    await dropSafetyCopy(ctx.secretBox, place.pg, row.safety_copy);
    await onHost(place, audit, removeFilestoreCopy(place.l, row.safety_copy));
    await db.stagingInstance.update({ where: { id: row.id }, data: { safety_copy: null, safety_copy_oid: null } });
  }

  /** Puts the copy back from its safety copy (idempotent); its oid follows the safety copy's. */
  async function putBack(row: StagingInstance, place: Place, audit: StepAudit) {
    const copy = row.safety_copy!;
    if (row.safety_copy_oid === null) return dropCopy(row, place, audit); // never complete: the update never ran
    await onHost(place, audit, waitForUpdate(place.l, row.database_name), UPDATE_TIMEOUT_MS);
    await databaseStep(db, row.subscription_id, audit, `${quoteIdent(copy)} RENAME TO ${quoteIdent(row.database_name)}`, () =>
      restoreSafetyCopy(ctx.secretBox, place.pg, {
        database: row.database_name,
        copy,
        copyOid: row.safety_copy_oid,
        databaseOid: row.database_oid,
        whose: `staging copy ${row.database_name}`,
      }).then(() => 'put back'),
    );
    await db.stagingInstance.update({ where: { id: row.id }, data: { database_oid: row.safety_copy_oid } });
    await onHost(place, audit, restoreFilestore(place.l, row.database_name, copy));
    await db.stagingInstance.update({ where: { id: row.id }, data: { safety_copy: null, safety_copy_oid: null } });
  }

  /**
   * The role svc works in the copy as. A role of its own (the copy's, not production's) gets a new
   * password, set in PostgreSQL and in the host's credentials file (svc keeps none for a copy);
   * otherwise production's role, the copy's owner too.
   */
  async function loginOf(row: StagingInstance, place: Place, audit: StepAudit): Promise<TenantRole | null> {
    const sub = await db.subscription.findUniqueOrThrow({ where: { id: row.subscription_id }, include: PLACEMENT_INCLUDE });
    const owner = await onServer(ctx.secretBox, place.pg, (q) => databaseOwner(q, row.database_name));
    if (!owner) throw new UserError(`Staging copy ${row.database_name} does not exist`);
    if (!OWN_ROLE.test(owner) || owner === sub.database_role) {
      const role = placementOf(sub).tenantRole;
      if (role && role.role !== owner)
        throw new UserError(`Staging copy ${row.database_name} is owned by ${owner}, whose password svc does not keep`);
      return role;
    }
    const password = newRolePassword();
    await databaseStep(db, row.subscription_id, audit, `ALTER ROLE ${quoteIdent(owner)} PASSWORD '********'`, () =>
      onServer(ctx.secretBox, place.pg, (q) => q(`ALTER ROLE ${quoteIdent(owner)} PASSWORD '${scramVerifier(password)}'`)).then(
        () => 'done',
      ),
    );
    await writeTenantCredentials(ctx, place.host, row.database_name, { role: owner, password }, audit);
    return { role: owner, password: await ctx.secretBox.encrypt(password) };
  }

  /** `-u all`; then Odoo's neutralization and svc's check. Answers why it failed, or null. */
  async function update(row: StagingInstance, place: Place, audit: StepAudit): Promise<string | null> {
    const session = await openRemoteSession(ctx, place.host, audit);
    try {
      const res = await session.run(updateScript(place.l, place.source, row.database_name, ['all']), { timeoutMs: UPDATE_TIMEOUT_MS });
      if (res.exitCode !== 0 || res.timedOut) {
        return session.mask(updateError(res.stdout + res.stderr, res.timedOut ? 'a timeout' : String(res.exitCode ?? res.signal)));
      }
      const again = await session.run(neutralizeScript(place.l, place.source, row.database_name), { timeoutMs: STEP_TIMEOUT_MS });
      if (again.exitCode !== 0) return session.mask(`odoo-bin neutralize failed: ${again.stdout.trim().slice(-1500)}`);
    } finally {
      session.close();
    }
    try {
      const role = await loginOf(row, place, audit);
      const opts = { role, deadlineMs: ctx.config.TENANT_DEADLINE_SECONDS * 1000, what: `Staging copy ${row.database_name}` };
      await insideTenant(ctx.secretBox, place.pg, row.database_name, neutralized, opts);
      return null;
    } catch (err) {
      return (err as Error).message;
    }
  }

  const notice = (row: StagingInstance, body: string, alert: boolean) =>
    postMessage(db, {
      model_name: 'svc.subscription',
      rec_id: row.subscription_id,
      body,
      message_type: 'notification',
      ...(alert ? { subtype_xmlid: 'mail.mt_alert' } : {}),
    });

  const service = {
    /** The operator's refresh: a ready copy (409 while it is made, refreshed or failed). */
    async request(subscriptionId: number, id: number, userId: number | null) {
      const row = await db.stagingInstance.findFirst({ where: { id, subscription_id: subscriptionId } });
      if (!row) throw new NotFoundError('Staging instance');
      if (row.state !== 'ready')
        throw new ConflictError(`Staging copy ${row.database_name} is ${row.state}: only a ready copy is refreshed`);
      return ctx.queues.enqueue(stagingJobs.staging_refresh, { staging_instance_id: id, user_id: userId });
    },

    /**
     * Queues a refresh of each copy a rollout left stale, once per rollout (a failed one waits for the
     * operator or the next rollout), not while another rollout of its host runs (it marks the copy
     * again); and of each copy still refreshing, whose job Redis may have lost (a job still there is
     * the one the queue answers: its key).
     */
    async follow() {
      const busy = await db.rollout.findMany({ where: { state: { not: 'done' } }, select: { root_server_id: true } });
      const stale = await db.stagingInstance.findMany({
        where: {
          OR: [
            { state: 'ready', stale_rollout_id: { not: null }, error: null, root_server_id: { notIn: busy.map((r) => r.root_server_id) } },
            { state: 'refreshing' },
          ],
        },
        select: { id: true },
      });
      const queued = [];
      for (const s of stale) {
        queued.push({
          staging_instance_id: s.id,
          job_id: await ctx.queues.enqueue(stagingJobs.staging_refresh, { staging_instance_id: s.id, user_id: null }),
        });
      }
      return { queued };
    },

    async refresh(payload: Payload, job: Job) {
      const audit = { user_id: payload.user_id, job_id: publicJobId(job.queueName, job.id!), operation: 'refresh_staging' };
      const found = await db.stagingInstance.findUnique({ where: { id: payload.staging_instance_id } });
      if (!found) return { staging_instance_id: payload.staging_instance_id, state: 'dropped' };
      // A ready copy is claimed; a refreshing one is this job's, resumed after a crash.
      if (found.state === 'ready') {
        const claimed = await db.stagingInstance.updateMany({ where: { id: found.id, state: 'ready' }, data: { state: 'refreshing' } });
        if (claimed.count === 0) return { staging_instance_id: found.id, state: (await reload(found.id)).state };
      } else if (found.state !== 'refreshing') return { staging_instance_id: found.id, state: found.state };
      let row = await reload(found.id);
      const lacking = { rollout: row.stale_rollout_id, commit: row.stale_commit };
      const to = lacking.commit ? `commit ${lacking.commit.slice(0, 12)}` : 'the code on its host';
      const started = Date.now();
      let place: Place | null = null;
      let failure: string | null = null;
      try {
        place = await placeOf(row);
        await onHost(place, audit, setMaintenance(place.l, row.database_name, true));
        if (row.safety_copy) await putBack(row, place, audit); // a refresh cut short
        row = await makeCopy(await reload(row.id), place, audit);
        const why = await update(row, place, audit);
        if (why !== null) {
          await putBack(await reload(row.id), place, audit);
          failure = `it was put back as it was (database and filestore, from its safety copy): ${why}`;
        }
      } catch (err) {
        // Before the update, or while putting it back: a safety copy still recorded is put back by the next refresh.
        const left = (await reload(row.id)).safety_copy;
        failure = `${(err as Error).message}${left ? `\nIts safety copy ${left} is kept: the next refresh puts the copy back from it first.` : ''}`;
      }
      if (failure !== null) {
        // Its users back first: a maintenance page that stays is said in the same message.
        const stillDown = place
          ? await onHost(place, audit, setMaintenance(place.l, row.database_name, false)).then(
              () => '',
              (e: Error) => `\nIts maintenance page could not be taken down: ${e.message}`,
            )
          : '';
        const message = `Staging copy ${row.database_name} was not updated to ${to}: ${failure}${stillDown}`.slice(0, 8000);
        await db.stagingInstance.update({ where: { id: row.id }, data: { state: 'ready', error: message } });
        await notice(row, `refresh_failed: ${message}`, true);
        throw new UserError(message);
      }
      // Updated: stale no more (unless a newer rollout marked it meanwhile), its users back, the safety copy gone.
      await db.stagingInstance.updateMany({
        where: { id: row.id, stale_rollout_id: lacking.rollout },
        data: { stale_rollout_id: null, stale_commit: null },
      });
      await db.stagingInstance.update({ where: { id: row.id }, data: { state: 'ready', error: null } });
      await onHost(place!, audit, setMaintenance(place!.l, row.database_name, false));
      const seconds = ((Date.now() - started) / 1000).toFixed(1);
      await notice(row, `Staging copy ${row.database_name} was updated to ${to} (-u all, neutralized again) in ${seconds} s.`, false);
      await dropCopy(row, place!, audit);
      return {
        staging_instance_id: row.id,
        database_name: row.database_name,
        state: 'ready' as const,
        updated_to: lacking.commit,
        seconds: Number(seconds),
      };
    },

    /** What a refresh left of a safety copy (its database, its filestore), when the copy is dropped. */
    async dropLeftovers(row: StagingInstance, audit: StepAudit) {
      if (!row.safety_copy || row.postgresql_server_id === null) return;
      const pg = await db.postgresqlServer.findUniqueOrThrow({ where: { id: row.postgresql_server_id } });
      await dropSafetyCopy(ctx.secretBox, pg, row.safety_copy);
      const host = row.root_server_id === null ? null : await db.rootServer.findUnique({ where: { id: row.root_server_id } });
      if (host?.odoo_http_port != null) {
        const l = odooLayout(basePathOf(ctx.config, host), host.odoo_http_port);
        await runOnOdooHost(ctx, host, audit, removeFilestoreCopy(l, row.safety_copy), STEP_TIMEOUT_MS);
      }
    },
  };
  return service;
}
