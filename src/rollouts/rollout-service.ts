// Rollouts for the API: a rollout with its counts and tenants, a commit's rollouts, retry_rollout
// (the failed tenants again, or a rollout that ended before it began) and the retry of one failed
// tenant, and the settings. A retry is refused on a rollout a newer one of its host followed: the
// newer one has the host's current code.
import type { AppContext } from '../context.js';
import type { Author } from '../core/chatter.js';
import { conditionalWrite, type Precondition } from '../core/conditional-write.js';
import { ConflictError, NotFoundError } from '../core/errors.js';
import type { Page } from '../core/lists.js';
import { listPage } from '../core/records.js';
import type { GitDeployEvent } from '../feature.js';
import { rolloutJobs } from './rollout-job-specs.js';
import { rolloutSettings } from './rollout-settings.js';

const TERMINAL = ['updated', 'unchanged', 'failed', 'superseded'];
const iso = (d: Date | null) => d?.toISOString() ?? null;

export function createRolloutService(ctx: Pick<AppContext, 'db' | 'queues' | 'secretBox'>) {
  const { db } = ctx;

  async function present(ids: number[]) {
    const rows = await db.rollout.findMany({
      where: { id: { in: ids } },
      include: { git_commit: true, tenants: { orderBy: { position: 'asc' } } },
    });
    const byId = new Map(rows.map((r) => [r.id, r]));
    return ids.flatMap((id) => {
      const r = byId.get(id);
      if (!r) return [];
      const count = (s: string) => r.tenants.filter((t) => t.state === s).length;
      return [
        {
          id: r.id,
          root_server_id: r.root_server_id,
          git_commit_id: r.git_commit_id,
          commit_id: r.git_commit?.commit_id ?? null,
          deploy_path: r.deploy_path,
          state: r.state,
          error: r.error,
          counts: {
            updated: count('updated'),
            unchanged: count('unchanged'),
            failed: count('failed'),
            superseded: count('superseded'),
            pending: r.tenants.filter((t) => !TERMINAL.includes(t.state)).length,
          },
          tenants: r.tenants.map((t) => ({
            subscription_id: t.subscription_id,
            database_name: t.database_name,
            position: t.position,
            state: t.state,
            modules: t.modules,
            error: t.error,
            started_at: iso(t.started_at),
            finished_at: iso(t.finished_at),
            duration_ms: t.duration_ms,
          })),
          created_at: r.created_at.toISOString(),
          started_at: iso(r.started_at),
          finished_at: iso(r.finished_at),
        },
      ];
    });
  }

  async function load(id: number) {
    const r = await db.rollout.findUnique({ where: { id } });
    if (!r) throw new NotFoundError('Rollout');
    return r;
  }

  async function assertNewest(r: { id: number; root_server_id: number }) {
    const newer = await db.rollout.findFirst({ where: { root_server_id: r.root_server_id, id: { gt: r.id } }, select: { id: true } });
    if (newer)
      throw new ConflictError(`Rollout ${newer.id} of the same host followed this one: retry that one (it has the host's current code)`);
  }

  const enqueue = (serverId: number, userId: number | null) =>
    ctx.queues.enqueue(rolloutJobs.rollout_host, { root_server_id: serverId, user_id: userId });

  /** Back to pending: the tenants given (failed ones), and the rollout when it had ended. */
  async function retry(id: number, subscriptionIds: number[] | null, author: Author | null) {
    const r = await load(id);
    await assertNewest(r);
    if (r.state === 'done' && r.started_at === null) {
      // It ended before it began (not on the addons path, restart failed): all of it again.
      await db.rollout.update({ where: { id }, data: { state: 'pending', error: null, finished_at: null } });
      return enqueue(r.root_server_id, author?.id ?? null);
    }
    const where = { rollout_id: id, state: 'failed' as const, ...(subscriptionIds ? { subscription_id: { in: subscriptionIds } } : {}) };
    const failed = await db.rolloutTenant.count({ where });
    if (failed === 0)
      throw new ConflictError(subscriptionIds ? 'That tenant did not fail in this rollout' : 'No tenant failed in this rollout');
    await db.$transaction([
      db.rolloutTenant.updateMany({
        where,
        data: { state: 'pending', error: null, modules: [], started_at: null, finished_at: null, duration_ms: null },
      }),
      db.rollout.update({ where: { id }, data: { state: 'running', finished_at: null } }),
    ]);
    return enqueue(r.root_server_id, author?.id ?? null);
  }

  return {
    async list(query: Page & { root_server_id?: number | undefined; git_commit_id?: number | undefined }) {
      const where = {
        ...(query.root_server_id ? { root_server_id: query.root_server_id } : {}),
        ...(query.git_commit_id ? { git_commit_id: query.git_commit_id } : {}),
      };
      const page = await listPage(ctx, db.rollout, where, query, { table: 'rollouts', sort: '-id', view: (r: { id: number }) => r.id });
      return { ...page, items: await present(page.items) };
    },
    async get(id: number) {
      await load(id);
      return (await present([id]))[0]!;
    },
    /** The rollouts of a commit of a repository, newest first. */
    async ofCommit(repositoryId: number, commitId: number) {
      const commit = await db.gitCommit.findFirst({ where: { id: commitId, repository_id: repositoryId }, select: { id: true } });
      if (!commit) throw new NotFoundError('Git commit');
      const rows = await db.rollout.findMany({ where: { git_commit_id: commitId }, orderBy: { id: 'desc' }, select: { id: true } });
      return { items: await present(rows.map((r) => r.id)) };
    },
    retryRollout: (id: number, author: Author | null) => retry(id, null, author),
    retryTenant: (id: number, subscriptionId: number, author: Author | null) => retry(id, [subscriptionId], author),

    getSettings: () => rolloutSettings(db),
    /** `precondition` (If-Match) holds for the row as the update locks it. */
    async updateSettings(
      data: { tenants_per_host?: number | undefined; order?: 'trials_first' | 'paid_first' | 'oldest_first' | undefined },
      precondition?: Precondition,
    ) {
      await rolloutSettings(db);
      const row = { table: 'rollout_settings', id: 1, notFound: () => new NotFoundError('Rollout settings') };
      return conditionalWrite(db, row, precondition, (lock) =>
        db.$transaction(async (tx) => {
          await lock(tx);
          return tx.rolloutSettings.update({ where: { id: 1 }, data });
        }),
      );
    },

    /** After a deploy to a host svc set Odoo up on: a rollout, run by the host's job. */
    async afterDeploy(event: GitDeployEvent) {
      const server = await db.rootServer.findUnique({ where: { id: event.root_server_id }, select: { odoo_state: true } });
      if (!server || server.odoo_state === 'not_installed') return;
      await db.rollout.create({
        data: { root_server_id: event.root_server_id, git_commit_id: event.commit_id, deploy_path: event.live_path },
      });
      await enqueue(event.root_server_id, event.user_id);
    },

    /** Queues the job of every host with an unfinished rollout (deduplicated: a running one stays alone). */
    async resume() {
      const hosts = await db.rollout.findMany({
        where: { state: { not: 'done' } },
        distinct: ['root_server_id'],
        select: { root_server_id: true },
      });
      for (const h of hosts) await enqueue(h.root_server_id, null);
      return { hosts: hosts.map((h) => h.root_server_id) };
    },
  };
}
