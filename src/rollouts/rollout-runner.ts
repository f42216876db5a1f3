// A host's rollouts, run by one job per host (rollout_host): the oldest unfinished rollout first.
// Starting one: the deploy path must be on the host's addons path (else nothing happens: the code is
// not Odoo's); Odoo is restarted gracefully (the new code serves, no request refused); the
// checksums of every module on the addons path are taken once; the host's tenants are listed in the
// order of the settings. Then each tenant runs (rollout-tenant.ts), `tenants_per_host` at a time. A
// newer rollout of the host waiting makes the older one leave its tenants not yet begun to it
// (`superseded`): each is updated once, to the newest code.
import type { Job } from 'bullmq';
import type { AppContext } from '../context.js';
import { postMessage } from '../core/chatter.js';
import { ConflictError, NotFoundError } from '../core/errors.js';
import { publicJobId } from '../core/queue.js';
import type { Prisma } from '../generated/prisma/client.js';
import { createOdooService, createTemplateBuilder, hostConnections, loadOdooHost, odooJobs, odooLayout } from '../odoo/index.js';
import { runOnOdooHost } from '../instances/index.js';
import { basePathOf, openRemoteSession } from '../servers/index.js';
import { type Checksums, createTenantRollout, type RolloutHost } from './rollout-tenant.js';
import { pacedLanes } from './rollout-pacing.js';
import { checksumsScript, readAddonsPath, readChecksums } from './rollout-scripts.js';
import { rolloutSettings } from './rollout-settings.js';

const STEP_TIMEOUT_MS = 5 * 60_000;
const ACTIVE = ['pending', 'copying', 'updating', 'restoring'] as const;

/** The order of a host's tenants, as the settings say (then the oldest first). */
export function tenantOrder(order: 'trials_first' | 'paid_first' | 'oldest_first'): Prisma.SubscriptionOrderByWithRelationInput[] {
  const byAge: Prisma.SubscriptionOrderByWithRelationInput[] = [{ created_at: 'asc' }, { id: 'asc' }];
  if (order === 'trials_first') return [{ is_trial: 'desc' }, ...byAge];
  if (order === 'paid_first') return [{ is_trial: 'asc' }, ...byAge];
  return byAge;
}

export function createRolloutRunner(ctx: AppContext) {
  const db = ctx.db;
  const tenants = createTenantRollout(ctx);
  const odoo = createOdooService(ctx);

  async function end(rolloutId: number, error: string | null) {
    const r = await db.rollout.update({
      where: { id: rolloutId },
      data: { state: 'done', error, finished_at: new Date() },
      include: { git_commit: true, tenants: { select: { state: true } } },
    });
    const count = (s: string) => r.tenants.filter((t) => t.state === s).length;
    // A tenant the new code failed to update: the templates keep the code before (see runHost).
    const kept = count('failed') > 0 ? " The host's templates are not updated: a tenant's update failed." : '';
    const summary = error
      ? `Rollout ${r.id} on root server ${r.root_server_id}: ${error}`
      : `Rollout ${r.id} on root server ${r.root_server_id}: ${count('updated')} updated, ${count('unchanged')} unchanged, ${count('failed')} failed${count('superseded') ? `, ${count('superseded')} left to a newer rollout` : ''}.${kept}`;
    if (r.git_commit) {
      await postMessage(db, {
        model_name: 'svc.saas.git.repository',
        rec_id: r.git_commit.repository_id,
        body: `${r.git_commit.commit_id.slice(0, 12)}: ${summary}`,
        message_type: 'notification',
        subtype_xmlid: count('failed') > 0 || error ? 'mail.mt_alert' : 'mail.mt_note',
      });
    }
    return { failed: count('failed') };
  }

  /** Starts a pending rollout; answers false when it ended at once (not on the addons path, Odoo not running, the restart failed). */
  async function start(rolloutId: number, audit: { user_id: number | null; job_id: string }): Promise<boolean> {
    const r = await db.rollout.findUniqueOrThrow({ where: { id: rolloutId } });
    const server = await loadOdooHost(db, r.root_server_id).catch((err: Error) => err);
    if (server instanceof Error) return end(r.id, `nothing was rolled out: ${server.message}`).then(() => false);
    if (server.odoo_state !== 'running')
      return end(r.id, `nothing was rolled out: Odoo is ${server.odoo_state} on the host`).then(() => false);
    const l = odooLayout(basePathOf(ctx.config, server), server.odoo_http_port);
    // A failure here (the host unreachable, say) fails the job: the rollout stays pending, started again at the next resume.
    const check = (command: string, what: string, label?: string) =>
      runOnOdooHost(ctx, server, audit, command, STEP_TIMEOUT_MS, { what, ...(label ? { label } : {}) });
    const dirs = (await check(readAddonsPath(l), 'Reading the addons path'))
      .split(',')
      .map((d) => d.trim())
      .filter(Boolean);
    if (r.deploy_path && !dirs.includes(r.deploy_path)) {
      return end(
        r.id,
        `${r.deploy_path} is not on the addons path of Odoo on port ${server.odoo_http_port}: nothing was restarted or rolled out (setup_odoo puts the deploy paths that hold modules there)`,
      ).then(() => false);
    }
    try {
      await odoo.gracefulRestart(server.id, audit);
    } catch (err) {
      return end(
        r.id,
        `the graceful restart of Odoo failed, the old code keeps serving and no tenant was updated: ${(err as Error).message}`,
      ).then(() => false);
    }
    const sums = readChecksums(await check(checksumsScript(dirs), 'Reading the module checksums', `module checksums of ${dirs.join(',')}`));
    const settings = await rolloutSettings(db);
    const subs = await db.subscription.findMany({
      where: {
        database_created_at: { not: null },
        database_name: { not: null },
        root_server_id: server.id,
        postgresql_server_id: server.odoo_postgresql_server_id ?? -1,
      },
      orderBy: tenantOrder(settings.order),
      select: { id: true, database_name: true },
    });
    await db.$transaction([
      db.rolloutTenant.createMany({
        data: subs.map((s, i) => ({ rollout_id: r.id, subscription_id: s.id, database_name: s.database_name!, position: i + 1 })),
        skipDuplicates: true,
      }),
      db.rollout.update({ where: { id: r.id }, data: { state: 'running', started_at: new Date(), checksums: sums } }),
    ]);
    return true;
  }

  async function hostOf(rolloutId: number, audit: { user_id: number | null; job_id: string }): Promise<RolloutHost> {
    const r = await db.rollout.findUniqueOrThrow({ where: { id: rolloutId }, include: { git_commit: true } });
    const server = await loadOdooHost(db, r.root_server_id);
    const version = await db.odooVersion.findUniqueOrThrow({ where: { id: server.odoo_version_id! } });
    const l = odooLayout(basePathOf(ctx.config, server), server.odoo_http_port);
    const taken = (r.checksums ?? {}) as { sums?: Checksums; dirs?: Record<string, string> };
    return {
      rolloutId: r.id,
      serverId: server.id,
      layout: l,
      source: l.sourceOf(version.name),
      sums: taken.sums ?? {},
      dirs: taken.dirs ?? {},
      deployPath: r.deploy_path,
      commit: r.git_commit?.commit_id.slice(0, 12) ?? null,
      userId: audit.user_id,
      jobId: audit.job_id,
      perUpdate: hostConnections({ workers: server.odoo_workers ?? 1, maxCronThreads: server.odoo_max_cron_threads ?? 0 }, 0).perUpdate,
      session: () => openRemoteSession(ctx, server, audit),
      check: (command, what, timeoutMs = STEP_TIMEOUT_MS) => runOnOdooHost(ctx, server, audit, command, timeoutMs, { what }),
    };
  }

  /** Runs the rollout's unfinished tenants, `perHost` at a time, in their order; again while some are left (a retry). */
  async function runTenants(rolloutId: number, host: RolloutHost) {
    const newer = async () =>
      (await db.rollout.count({ where: { root_server_id: host.serverId, id: { gt: rolloutId }, state: { not: 'done' } } })) > 0;
    for (;;) {
      if (await newer()) {
        await db.rolloutTenant.updateMany({ where: { rollout_id: rolloutId, state: 'pending' }, data: { state: 'superseded' } });
      }
      const left = await db.rolloutTenant.findMany({
        // Also those that ended but whose clean-up a crash interrupted (a copy still named).
        where: { rollout_id: rolloutId, OR: [{ state: { in: [...ACTIVE] } }, { safety_copy: { not: null } }] },
        orderBy: { position: 'asc' },
        select: { id: true },
      });
      if (left.length === 0) return;
      const { tenants_per_host } = await rolloutSettings(db);
      // As many as PostgreSQL has connections for (rollout-pacing.ts).
      const lanes = await pacedLanes(ctx, host, tenants_per_host);
      let next = 0;
      const lane = async () => {
        while (next < left.length) {
          const row = left[next++]!;
          // A push meanwhile: the tenants not begun go to its rollout (the newest code, once).
          if (await newer()) {
            const moved = await db.rolloutTenant.updateMany({ where: { id: row.id, state: 'pending' }, data: { state: 'superseded' } });
            if (moved.count > 0) continue;
          }
          await tenants.run(host, row.id);
        }
      };
      await Promise.all(Array.from({ length: Math.max(1, Math.min(lanes, left.length)) }, lane));
    }
  }

  /**
   * The host's templates get `update` (-u all, odoo-template-build.ts) after a rollout: the copies
   * made from them next then start from the new code's schema. Only those whose database exists.
   */
  async function updateTemplates(serverId: number, userId: number | null) {
    const templates = await db.databaseTemplate.findMany({ where: { root_server_id: serverId }, select: { id: true } });
    const builder = createTemplateBuilder(ctx);
    for (const t of templates) {
      const exists = await builder.assertBuildable(t.id, 'update').then(
        () => true,
        () => false,
      );
      if (exists) await ctx.queues.enqueue(odooJobs.odoo_update_template, { database_template_id: t.id, user_id: userId });
    }
  }

  /**
   * The host's Odoo runs the rollout's code now, its staging copies included, whatever their tenants'
   * updates did: each is stale until refreshed (src/staging: within a minute, docs/staging.md).
   */
  async function staleStaging(rolloutId: number) {
    const r = await db.rollout.findUniqueOrThrow({ where: { id: rolloutId }, include: { git_commit: true } });
    await db.stagingInstance.updateMany({
      where: { root_server_id: r.root_server_id, state: { in: ['creating', 'ready', 'refreshing'] } },
      data: { stale_rollout_id: r.id, stale_commit: r.git_commit?.commit_id ?? null, error: null },
    });
  }

  return {
    /** The job of one host: its unfinished rollouts, oldest first. */
    async runHost(payload: { root_server_id: number; user_id: number | null }, job: Job) {
      const audit = { user_id: payload.user_id, job_id: publicJobId(job.queueName, job.id!) };
      const done: number[] = [];
      for (;;) {
        const r = await db.rollout.findFirst({
          where: { root_server_id: payload.root_server_id, state: { not: 'done' } },
          orderBy: { id: 'asc' },
        });
        if (!r) return { rollouts: done };
        await job.updateProgress({ rollout_id: r.id });
        if (r.state === 'pending' && !(await start(r.id, audit))) {
          done.push(r.id);
          continue;
        }
        // A host that no longer runs Odoo set up by svc (its set-up undone meanwhile): the rollout
        // ends saying so, instead of failing again at every resume.
        const host = await hostOf(r.id, audit).catch((err: Error) => err);
        if (host instanceof ConflictError || host instanceof NotFoundError) {
          await end(r.id, `stopped: ${host.message}`);
          done.push(r.id);
          continue;
        }
        if (host instanceof Error) throw host;
        await runTenants(r.id, host);
        // Code that failed a tenant's update would fail the template's too, and `-u all` is not
        // undone there: a half-updated template would be copied into every new instance.
        const { failed } = await end(r.id, null);
        await staleStaging(r.id);
        if (failed === 0) await updateTemplates(r.root_server_id, audit.user_id);
        done.push(r.id);
      }
    },
  };
}
