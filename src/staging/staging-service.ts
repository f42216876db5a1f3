// create_staging (DESIGN §20): a neutralized online copy of a running subscription's database on
// its Odoo host, with an identity and an address of its own (STAGING_URL, the operator's staging
// domain: never a customer domain), its filestore hard-linked; listed per subscription, dropped
// after STAGING_DAYS or on request. Its steps go to the subscription's action log and chatter.
import { randomBytes } from 'node:crypto';
import type { Job } from 'bullmq';
import type { AppContext } from '../context.js';
import { authorOfUser, postMessage } from '../core/chatter.js';
import { ConflictError, NotFoundError, UserError } from '../core/errors.js';
import { renderMail } from '../core/mail.js';
import { publicJobId } from '../core/queue.js';
import { LOST_WITH_REDIS, recordInterruption } from '../jobs/index.js';
import type { PostgresqlServer, RootServer, StagingInstance } from '../generated/prisma/client.js';
import {
  assertTenantRole,
  createEmptyDatabase,
  createFilestores,
  databaseLocale,
  databaseOwner,
  dropDatabaseAndItsRole,
  dumpAndRestore,
  handOverToTenantRole,
  insideTenant,
  newRolePassword,
  onServer,
  removeTenantCredentials,
  runOnOdooHost,
  tenantRoleName,
  writeTenantCredentials,
  setIdentity,
  PLACEMENT_INCLUDE,
  placementOf,
} from '../instances/index.js';
import { loadOdooHost, odooLayout } from '../odoo/index.js';
import { findDatabase, quoteIdent } from '../postgresql/index.js';
import { basePathOf } from '../servers/index.js';
import { createCustomerMail, databaseStep, type StepAudit, subscriptionUrl } from '../subscriptions/index.js';
import { stagingJobs } from './staging-job-specs.js';
import { createStagingFromBackup } from './staging-from-backup.js';
import { createStagingRefresh } from './staging-refresh.js';
import { neutralized, neutralizeScript } from './staging-scripts.js';

const COPY_TIMEOUT_MS = 60 * 60_000;
const STEP_TIMEOUT_MS = 10 * 60_000;

type Payload = { staging_instance_id: number; user_id: number | null; notify_customer?: boolean };

export function createStagingService(ctx: AppContext) {
  const { db } = ctx;
  const filestores = createFilestores(ctx);
  const mailCustomer = createCustomerMail(ctx);
  const refresh = createStagingRefresh(ctx);
  const fromBackup = createStagingFromBackup(ctx);

  async function subscriptionOf(id: number) {
    const sub = await db.subscription.findUnique({ where: { id }, include: PLACEMENT_INCLUDE });
    if (!sub) throw new NotFoundError('Subscription');
    return sub;
  }

  /** Where the subscription's instance lives: its database, PostgreSQL server, Odoo host (409 when it cannot be copied). */
  async function placeOf(id: number) {
    const sub = await subscriptionOf(id);
    if (sub.state !== 'running' || !sub.database_name || !sub.database_created_at) {
      throw new ConflictError(`Subscription ${id} is ${sub.state}: only the instance of a running subscription is copied`, {
        state: sub.state,
      });
    }
    if (!sub.database_template) throw new ConflictError(`Subscription ${id} has no database template: where its database lives is unknown`);
    const place = placementOf(sub);
    if (!place.host) throw new ConflictError(`Subscription ${id} has no Odoo host (its database template names no root server)`);
    const host = await loadOdooHost(db, place.host.id);
    if (host.odoo_state !== 'running') throw new ConflictError(`Odoo on root server ${host.id} is ${host.odoo_state}, not running`);
    return { sub, database: sub.database_name, pg: place.pg, host, tenantRole: place.tenantRole };
  }

  const note = async (subscriptionId: number, body: string, userId: number | null) =>
    postMessage(db, { model_name: 'svc.subscription', rec_id: subscriptionId, body, author: await authorOfUser(db, userId) });

  /**
   * The empty copy handed to a role of its own (instances' tenant-role.ts): the restore then writes
   * every object as that role, and the host's Odoo opens the copy as it (its credentials file).
   */
  async function roleOfCopy(row: StagingInstance, pg: PostgresqlServer, host: RootServer, from: string, audit: StepAudit) {
    const found = await onServer(ctx.secretBox, pg, (q) => findDatabase(q, row.database_name));
    if (!found) throw new UserError(`Staging copy ${row.database_name} was not found after CREATE DATABASE`);
    const role = tenantRoleName(found);
    const password = newRolePassword();
    await databaseStep(db, row.subscription_id, audit, `${row.database_name} owned by its own role ${role}`, () =>
      handOverToTenantRole(ctx.secretBox, pg, { name: row.database_name, ...found }, from, password),
    );
    await writeTenantCredentials(ctx, host, row.database_name, { role, password }, audit);
    return { role, password };
  }

  async function dropCopy(row: StagingInstance, audit: StepAudit) {
    const [pg, host, sub] = await Promise.all([
      row.postgresql_server_id === null ? null : db.postgresqlServer.findUnique({ where: { id: row.postgresql_server_id } }),
      row.root_server_id === null ? null : db.rootServer.findUnique({ where: { id: row.root_server_id } }),
      db.subscription.findUnique({ where: { id: row.subscription_id }, select: { database_role: true } }),
    ]);
    if (!pg) throw new UserError(`The PostgreSQL server of staging copy ${row.database_name} is not known`);
    await databaseStep(db, row.subscription_id, audit, `DROP DATABASE IF EXISTS ${quoteIdent(row.database_name)} WITH (FORCE)`, () =>
      onServer(
        ctx.secretBox,
        pg,
        // The copy's own role goes with it, never production's.
        (q) => dropDatabaseAndItsRole(q, row.database_name, sub?.database_role),
        { timeout: '15min' },
      ).then(() => 'dropped'),
    );
    if (host) {
      await filestores.remove(host, row.database_name, audit);
      await removeTenantCredentials(ctx, host, row.database_name, audit);
    }
    await refresh.dropLeftovers(row, audit);
  }

  /**
   * The ready mail: to the operator who asked, or the customer when asked so (a copy in the chatter;
   * a failure is an alert there). Answers the address, or null when there was nobody to tell.
   */
  async function mailReady(row: StagingInstance, payload: Payload, copiedAt: Date): Promise<string | null> {
    const sub = await db.subscription.findUniqueOrThrow({ where: { id: row.subscription_id }, include: { partner: true } });
    const operator = payload.user_id === null ? null : await db.user.findUnique({ where: { id: payload.user_id } });
    const to = payload.notify_customer
      ? { email: sub.partner.email, name: sub.partner.name }
      : operator && { email: operator.email, name: operator.name || operator.email };
    if (!to) return null;
    const settings = await db.settings.findUniqueOrThrow({ where: { id: 1 } });
    const data = {
      name: to.name,
      subscriptionName: sub.name,
      url: row.url,
      liveUrl: subscriptionUrl(ctx.config, sub) ?? sub.database_name,
      copiedAt: `${copiedAt.toISOString().replace('T', ' ').slice(0, 16)} UTC`,
      expiresOn: row.expires_at.toISOString().slice(0, 10),
      brand: settings.brand_name,
    };
    const failed = await mailCustomer(row.subscription_id, 'staging_ready', async () => ({
      to: to.email,
      subject: `Staging copy of ${sub.name} is ready`,
      ...renderMail('staging_ready', data),
    }));
    return failed ? null : to.email;
  }

  const service = {
    /** Checks the subscription can be copied, records the copy (creating) and queues its job. */
    async request(subscriptionId: number, userId: number | null, notifyCustomer = false, backupId?: number) {
      const { sub, database, pg, host } = await placeOf(subscriptionId);
      if (backupId !== undefined) await fromBackup.check(sub, backupId, userId);
      const name = `${database.slice(0, 46)}_stg_${randomBytes(4).toString('hex')}`;
      const url = ctx.config.STAGING_URL.replaceAll('{database_name}', name);
      const expires = new Date(Date.now() + ctx.config.STAGING_DAYS * 86_400_000);
      const row = await db.stagingInstance.create({
        data: {
          subscription_id: subscriptionId,
          database_name: name,
          postgresql_server_id: pg.id,
          root_server_id: host.id,
          url,
          expires_at: expires,
          backup_id: backupId ?? null,
        },
      });
      await note(
        subscriptionId,
        `Staging copy ${name} requested (${url})${backupId === undefined ? '' : ` from backup ${backupId}`}; it is dropped on ${expires.toISOString().slice(0, 10)}.`,
        userId,
      );
      const jobId = await ctx.queues.enqueue(stagingJobs.staging_create, {
        staging_instance_id: row.id,
        user_id: userId,
        notify_customer: notifyCustomer,
      });
      // Recorded, so a copy whose job Redis lost is found (failLost) instead of creating for ever.
      await db.stagingInstance.update({ where: { id: row.id }, data: { job_id: jobId } });
      return jobId;
    },

    async list(subscriptionId: number) {
      await subscriptionOf(subscriptionId); // 404 for a subscription that does not exist
      return db.stagingInstance.findMany({ where: { subscription_id: subscriptionId }, orderBy: { id: 'desc' } });
    },

    /** Queues the drop of a copy (409 while it is being made). */
    async requestDrop(subscriptionId: number, id: number, userId: number | null) {
      const row = await db.stagingInstance.findFirst({ where: { id, subscription_id: subscriptionId } });
      if (!row) throw new NotFoundError('Staging instance');
      if (row.state === 'creating' || row.state === 'refreshing')
        throw new ConflictError(
          `Staging copy ${row.database_name} is ${row.state === 'creating' ? 'being made' : 'being refreshed'}: drop it once it is ready or failed`,
        );
      return ctx.queues.enqueue(stagingJobs.staging_drop, { staging_instance_id: id, user_id: userId });
    },

    async create(payload: Payload, job: Job) {
      const audit = { user_id: payload.user_id, job_id: publicJobId(job.queueName, job.id!), operation: 'create_staging' };
      const row = await db.stagingInstance.findUnique({ where: { id: payload.staging_instance_id } });
      if (row?.state !== 'creating') return { staging_instance_id: payload.staging_instance_id, state: row?.state ?? 'dropped' };
      const copy = row.database_name;
      const started = Date.now();
      try {
        const { sub, database, pg, host, tenantRole } = await placeOf(row.subscription_id);
        if (pg.id !== row.postgresql_server_id || host.id !== row.root_server_id)
          throw new UserError(`Subscription ${row.subscription_id} moved since the copy was asked for: ask for a new one`);
        await dropCopy(row, audit); // what an earlier run of this job left
        // The copy is read and written as the tenant's own role, never as the server's administrator:
        // restoring runs the tenant's own SQL (CHECK constraints call its functions during COPY), which
        // in an administrator's session could RESET ROLE to a superuser (as inside every tenant session).
        const owner = await onServer(ctx.secretBox, pg, async (q) => {
          const who = await databaseOwner(q, database);
          if (!who) throw new UserError(`Database ${database} does not exist`);
          await assertTenantRole(q, tenantRole?.role ?? who, `The staging copy of ${database}`);
          if (row.backup_id === null) await createEmptyDatabase(q, copy, who, (await databaseLocale(q, database))!);
          return who;
        });
        let copyRole: { role: string; password: string } | null;
        if (row.backup_id !== null) {
          // The backup server makes the copy's database (owned by the tenant's role) and filestore; then its own role.
          await databaseStep(db, row.subscription_id, audit, `restore of backup ${row.backup_id} into ${copy}`, () =>
            fromBackup.restoreInto(sub, row, payload.user_id),
          );
          copyRole = sub.database_role ? await roleOfCopy(row, pg, host, owner, audit) : null;
        } else {
          const user = tenantRole?.role ?? owner;
          const password = tenantRole?.password ? await ctx.secretBox.reveal(tenantRole.password) : null;
          // A subscription with a role of its own: the copy gets another (not production's), before it is filled.
          copyRole = sub.database_role ? await roleOfCopy(row, pg, host, owner, audit) : null;
          const to = copyRole;
          await databaseStep(
            db,
            row.subscription_id,
            audit,
            `pg_dump -Fc ${database} | pg_restore --no-owner -d ${copy} (as ${user}${to ? `, into the copy as ${to.role}` : ''})`,
            () => {
              const from = { host: pg.ip, port: pg.port, user, password };
              return dumpAndRestore(
                from,
                to ? { ...from, user: to.role, password: to.password } : from,
                database,
                copy,
                COPY_TIMEOUT_MS,
                ctx.config.PATH,
              );
            },
          );
          await filestores.copy(host, database, copy, audit);
        }
        const tenant = {
          role: copyRole ? { role: copyRole.role, password: await ctx.secretBox.encrypt(copyRole.password) } : tenantRole,
          deadlineMs: ctx.config.TENANT_DEADLINE_SECONDS * 1000,
          what: `Staging copy ${copy}`,
        };
        await insideTenant(ctx.secretBox, pg, copy, (q) => setIdentity(q, { url: row.url }), tenant);

        const version = await db.odooVersion.findUniqueOrThrow({ where: { id: host.odoo_version_id! } });
        const l = odooLayout(basePathOf(ctx.config, host), host.odoo_http_port);
        await runOnOdooHost(ctx, host, audit, neutralizeScript(l, l.sourceOf(version.name), copy), STEP_TIMEOUT_MS, {
          what: `odoo-bin neutralize of ${copy}`,
        });
        await insideTenant(ctx.secretBox, pg, copy, neutralized, tenant);
        // Failed meanwhile (its job recorded as lost by failLost, the copy dropped): it stays failed.
        const ready = await db.stagingInstance.updateMany({
          where: { id: row.id, state: 'creating' },
          data: { state: 'ready', error: null },
        });
        if (ready.count === 0) throw new UserError(`Staging copy ${copy} was failed meanwhile (its job was recorded as lost)`);
        const seconds = ((Date.now() - started) / 1000).toFixed(1);
        await note(
          row.subscription_id,
          `Staging copy ${copy} is ready at ${row.url} (neutralized by Odoo; made in ${seconds} s).`,
          payload.user_id,
        );
        const mailedTo = await mailReady(row, payload, new Date(started));
        return {
          staging_instance_id: row.id,
          database_name: copy,
          url: row.url,
          state: 'ready' as const,
          seconds: Number(seconds),
          mailed_to: mailedTo,
        };
      } catch (err) {
        const message = (err as Error).message.slice(-4000);
        // What it made goes; when that fails too, the chatter says so (the copy is left to drop).
        const removed = await dropCopy(row, audit).then(
          () => 'was removed',
          (e: Error) => `could not be removed (${e.message.slice(-1000)}): drop it`,
        );
        await db.stagingInstance.updateMany({ where: { id: row.id, state: 'creating' }, data: { state: 'failed', error: message } });
        await note(row.subscription_id, `Staging copy ${copy} failed and ${removed}: ${message}`, payload.user_id);
        throw err;
      }
    },

    async drop(payload: Payload, job: Job) {
      const audit = { user_id: payload.user_id, job_id: publicJobId(job.queueName, job.id!), operation: 'drop_staging' };
      const row = await db.stagingInstance.findUnique({ where: { id: payload.staging_instance_id } });
      if (!row) return { staging_instance_id: payload.staging_instance_id, dropped: true };
      await dropCopy(row, audit);
      await db.stagingInstance.delete({ where: { id: row.id } });
      await note(row.subscription_id, `Staging copy ${row.database_name} dropped.`, payload.user_id);
      return { staging_instance_id: row.id, dropped: true };
    },

    /**
     * Copies still `creating` whose job Redis lost (nothing would ever run it again): what was made is
     * dropped, then the interruption is recorded (action log, chatter) and the copy is `failed`.
     */
    async failLost(job: Job) {
      const audit = { user_id: null, job_id: publicJobId(job.queueName, job.id!), operation: 'create_staging' };
      const failed: string[] = [];
      for (const row of await db.stagingInstance.findMany({ where: { state: 'creating', job_id: { not: null } } })) {
        if (await ctx.queues.find(row.job_id!, [stagingJobs.staging_create.queue])) continue;
        if ((await db.stagingInstance.count({ where: { id: row.id, state: 'creating', job_id: row.job_id } })) === 0) continue;
        const removed = await dropCopy(row, audit).then(
          () => 'what it made was removed',
          (err: Error) => `removing what it made failed (${err.message}): drop it`,
        );
        const record = { model_name: 'svc.subscription' as const, rec_id: row.subscription_id };
        const error = `${LOST_WITH_REDIS} (job ${row.job_id})`;
        await recordInterruption(
          ctx,
          { name: stagingJobs.staging_create.name, id: row.job_id!, payload: { staging_instance_id: row.id, user_id: null } },
          {
            record: () => record,
            action_type: 'database',
            onInterrupted: (tx) =>
              tx.stagingInstance.updateMany({ where: { id: row.id, state: 'creating' }, data: { state: 'failed', error } }).then(() => {}),
          },
          'redis',
        );
        await note(row.subscription_id, `Staging copy ${row.database_name} failed: Redis lost its job ${row.job_id}; ${removed}.`, null);
        failed.push(row.database_name);
      }
      return failed;
    },

    /** Drops the copies past their expires_at, and those of a subscription whose database was dropped (not one being made or refreshed). */
    async expire(job: Job) {
      const due = await db.stagingInstance.findMany({
        where: {
          state: { notIn: ['creating', 'refreshing'] },
          OR: [{ expires_at: { lte: new Date() } }, { subscription: { database_dropped_at: { not: null } } }],
        },
      });
      for (const row of due) await service.drop({ staging_instance_id: row.id, user_id: null }, job);
      return { dropped: due.map((r) => r.database_name) };
    },
  };
  return service;
}
