// Git repositories: the resource and its rules, link/delete of the
// push webhook at the git host, the branch head recorded as a commit, and push_commit
// queued as a job (git-deploy-job.ts does the deploy).
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import type { AppContext } from '../context.js';
import type { Db, DbTx } from '../core/db.js';
import { ConflictError, NotFoundError, UserError, ValidationError } from '../core/errors.js';
import type { Page } from '../core/lists.js';
import { createRecordService, listPage } from '../core/records.js';
import type { Precondition } from '../core/conditional-write.js';
import { postMessage, type Author } from '../core/chatter.js';
import { writeActionLog } from '../core/action-log.js';
import { newWebhookToken, webhookUrl } from '../webhooks/index.js';
import type { WebhookInvocation } from '../core/webhook-methods.js';
import { createGitHost, type BranchHead } from './git-host.js';
import type { GitRepositoryOut } from './git-schemas.js';
import { gitJobs } from './git-job-specs.js';
import { gitRepositoryModel } from './git-models.js';

/** The method the repository's inbound webhook calls on a push (src/git/git-webhook-methods.ts). */
export const PUSH_METHOD = 'action_receive_push';

type Data = Record<string, unknown>;

/** Where push_commit deploys: deploy_path, or <ODOO_BASE_PATH>/custom-addons/<repo>. */
export function effectiveDeployPath(repo: { name: string; deploy_path: string | null }, basePath: string): string {
  return repo.deploy_path ?? path.posix.join(basePath, 'custom-addons', repo.name.split('/')[1] ?? repo.name);
}

async function loadRepository(client: Db | DbTx, id: number) {
  const repo = await client.gitRepository.findUnique({ where: { id }, include: { git_account: true } });
  if (!repo) throw new NotFoundError('Git repository');
  return repo;
}

export function createGitRepositoryService(ctx: Pick<AppContext, 'db' | 'secretBox' | 'config' | 'queues'>) {
  const { db, secretBox, config } = ctx;
  const host = createGitHost(ctx);
  const records = createRecordService(ctx, gitRepositoryModel);
  const target = (id: number, author: Author | null) => ({
    model_name: 'svc.saas.git.repository' as const,
    rec_id: id,
    user_id: author?.id ?? null,
  });

  /** The representation: the stored fields plus the effective deploy_path and the registered webhook's URL. */
  async function present(rows: Data[]) {
    const hookIds = rows.map((r) => r.inbound_webhook_id).filter((v): v is number => typeof v === 'number');
    const hooks = hookIds.length ? await db.webhook.findMany({ where: { id: { in: hookIds } }, select: { id: true, token: true } }) : [];
    return rows.map((row) => {
      const hook = hooks.find((h) => h.id === row.inbound_webhook_id);
      return {
        ...row,
        deploy_path: effectiveDeployPath(row as { name: string; deploy_path: string | null }, config.ODOO_BASE_PATH),
        webhook_url: hook ? webhookUrl(config.BASE_URL, hook.token) : null,
      } as unknown as GitRepositoryOut;
    });
  }
  const one = async (row: Data) => (await present([row]))[0]!;

  async function accessToken(account: { access_token: string }): Promise<string> {
    const token = account.access_token ? await secretBox.decrypt(account.access_token) : '';
    if (!token) throw new ValidationError('The git account has no access_token', 'git_account_id');
    return token;
  }

  async function checkReferences(data: Data) {
    if (typeof data.git_account_id === 'number' && !(await db.gitAccount.count({ where: { id: data.git_account_id } }))) {
      throw new ValidationError(`Git account ${data.git_account_id} does not exist`, 'git_account_id');
    }
    if (typeof data.root_server_id === 'number' && !(await db.rootServer.count({ where: { id: data.root_server_id } }))) {
      throw new ValidationError(`Root server ${data.root_server_id} does not exist`, 'root_server_id');
    }
  }

  /** Records the branch head as a commit (once per sha) and makes it last_commit_id. */
  async function recordHead(tx: DbTx, repoId: number, branch: string, head: BranchHead, author: Author | null) {
    // ON CONFLICT DO NOTHING: two deliveries of one push at once record the commit once.
    await tx.gitCommit.createMany({
      data: [{ repository_id: repoId, commit_id: head.sha, commit_message: head.message, commit_by: head.author, branch }],
      skipDuplicates: true,
    });
    const commit = await tx.gitCommit.findUniqueOrThrow({
      where: { repository_id_commit_id: { repository_id: repoId, commit_id: head.sha } },
    });
    const before = await tx.gitRepository.findUniqueOrThrow({ where: { id: repoId }, select: { last_commit_id: true } });
    const changed = before.last_commit_id !== commit.id;
    if (changed) {
      await tx.gitRepository.update({ where: { id: repoId }, data: { last_commit_id: commit.id } });
      const subject = head.message.split('\n')[0];
      await postMessage(tx, {
        model_name: 'svc.saas.git.repository',
        rec_id: repoId,
        body: `New head of ${branch}: ${head.sha.slice(0, 12)} by ${head.author || 'unknown'}: ${subject}`,
        message_type: 'notification',
        author,
      });
    }
    return { commit, changed };
  }

  function enqueueDeploy(repo: { id: number }, commitId: number, author: Author | null) {
    return ctx.queues.enqueue(gitJobs.git_push_commit, { repository_id: repo.id, commit_id: commitId, user_id: author?.id ?? null });
  }

  return {
    async list(query: { limit: number; offset: number } & Data) {
      const page = await records.list(query);
      return { ...page, items: await present(page.items) };
    },
    get: async (id: number) => one(await records.get(id)),

    async create(data: Data, author: Author | null) {
      await checkReferences(data);
      return one(await records.create(data, author));
    },

    async update(id: number, data: Data, author: Author | null, precondition?: Precondition) {
      const repo = await loadRepository(db, id);
      const moves = (['name', 'git_account_id'] as const).filter((f) => f in data && data[f] !== repo[f]);
      if (repo.webhook_id && moves.length > 0) {
        throw new ValidationError(
          `Unlink the git webhook first (actions/delete_git_webhook): ${moves.join(', ')} cannot change while it is registered`,
          moves.map((field) => ({ field, message: 'cannot change while the webhook is registered' })),
        );
      }
      await checkReferences(data);
      return one(await records.update(id, data, author, precondition));
    },

    /** Refused while a webhook is registered at the git host. */
    async remove(id: number, precondition?: Precondition) {
      const repo = await loadRepository(db, id);
      if (repo.webhook_id) {
        throw new ValidationError('This repository has a webhook registered at the git host: unlink it first (actions/delete_git_webhook)');
      }
      await records.conditionally(id, precondition, (lock) =>
        db.$transaction(async (tx) => {
          await lock(tx);
          await tx.gitRepository.delete({ where: { id } });
          if (repo.inbound_webhook_id) await tx.webhook.deleteMany({ where: { id: repo.inbound_webhook_id } });
        }),
      );
    },

    async listCommits(id: number, page: Page) {
      await loadRepository(db, id);
      return listPage(ctx, db.gitCommit, { repository_id: id }, page, {
        table: 'git_commits',
        resource: 'git-repositories/commits',
        sort: '-created_at',
      });
    },

    /**
     * action_link_git_webhook (draft → active): an inbound webhook of this service, signed with a
     * fresh secret, registered at the git host for push events.
     */
    async linkGitWebhook(id: number, author: Author | null) {
      const repo = await loadRepository(db, id);
      if (repo.state !== 'draft') throw new ConflictError(`The repository is ${repo.state}; only a draft can be linked`);
      const missing = (['name', 'branch_name'] as const).filter((f) => !repo[f]?.trim());
      if (missing.length) {
        const fields = missing.map((field) => ({ field, message: 'required to register a webhook' }));
        throw new ValidationError(`The repository needs ${missing.join(' and ')} to register a webhook`, fields);
      }
      const token = await accessToken(repo.git_account);

      const hookToken = newWebhookToken();
      const secret = randomBytes(32).toString('hex');
      const hookId = await host.createPushHook(token, repo.name, { token: hookToken, secret }, target(id, author));

      try {
        await db.$transaction(async (tx) => {
          const inbound = await tx.webhook.create({
            data: {
              token: hookToken,
              model_name: 'svc.saas.git.repository',
              rec_id: id,
              trigger_action: PUSH_METHOD,
              message_type: 'notification',
              signing_secret: await secretBox.encrypt(secret),
            },
          });
          // Only a draft without a webhook moves: of two concurrent links, one wins.
          const moved = await tx.gitRepository.updateMany({
            where: { id, state: 'draft', webhook_id: null },
            data: { state: 'active', webhook_id: hookId, inbound_webhook_id: inbound.id },
          });
          if (moved.count === 0) throw new ConflictError('The repository was linked meanwhile');
          await postMessage(tx, {
            model_name: 'svc.saas.git.repository',
            rec_id: id,
            body: `Push webhook ${hookId} registered at the git host for ${repo.name}; state: draft → active.`,
            message_type: 'notification',
            author,
          });
          await writeActionLog(tx, {
            ...target(id, author),
            action_type: 'git',
            input_text: 'link_git_webhook',
            output_text: `webhook_id: ${hookId}`,
          });
        });
      } catch (err) {
        // Nothing local refers to the hook: remove it at the host again; one left there is said so.
        await host.deleteHook(token, repo.name, hookId, target(id, author)).catch((cleanup: Error) =>
          writeActionLog(db, {
            ...target(id, author),
            action_type: 'git',
            status: 'failure',
            input_text: 'unlink_git_webhook',
            output_text: `Webhook ${hookId} of ${repo.name} is left at the git host (the link failed): ${cleanup.message}`,
          }),
        );
        throw err;
      }
      return one(await records.get(id));
    },

    /** action_delete_git_webhook (active → draft): removed at the git host, then here. */
    async deleteGitWebhook(id: number, author: Author | null) {
      const repo = await loadRepository(db, id);
      if (repo.state !== 'active' || !repo.webhook_id) throw new ConflictError('The repository has no registered webhook');
      const token = await accessToken(repo.git_account);
      const outcome = await host.deleteHook(token, repo.name, repo.webhook_id, target(id, author));
      await db.$transaction(async (tx) => {
        await tx.gitRepository.update({ where: { id }, data: { state: 'draft', webhook_id: null, inbound_webhook_id: null } });
        if (repo.inbound_webhook_id) await tx.webhook.deleteMany({ where: { id: repo.inbound_webhook_id } });
        const how = outcome === 'gone' ? 'was already gone at the git host' : 'deleted at the git host';
        await postMessage(tx, {
          model_name: 'svc.saas.git.repository',
          rec_id: id,
          body: `Push webhook ${repo.webhook_id} ${how}; state: active → draft.`,
          message_type: 'notification',
          author,
        });
        await writeActionLog(tx, { ...target(id, author), action_type: 'git', input_text: 'delete_git_webhook', output_text: how });
      });
      return one(await records.get(id));
    },

    /** action_push_commit: records the branch head from the git host and deploys it (202 + job id). */
    async pushCommit(id: number, author: Author | null) {
      const repo = await loadRepository(db, id);
      if (!repo.root_server_id) throw new UserError('Set root_server_id first: push_commit deploys to that root server');
      const head = await host.branchHead(await accessToken(repo.git_account), repo.name, repo.branch_name, target(id, author));
      const { commit } = await db.$transaction((tx) => recordHead(tx, id, repo.branch_name, head, author));
      return enqueueDeploy(repo, commit.id, author);
    },

    /**
     * The push handler an inbound webhook calls: a push to the tracked branch records its head and,
     * when the repository is active with a root server and the head is new, queues the deploy.
     * Pushes to other branches and the host's ping change nothing.
     */
    async receivePush(id: number, { tx, payload, afterCommit }: WebhookInvocation) {
      const repo = await loadRepository(tx, id);
      const ref = (payload as { ref?: unknown } | undefined)?.ref;
      if (typeof ref === 'string' && ref !== `refs/heads/${repo.branch_name}`) return;
      if ((payload as { zen?: unknown } | undefined)?.zen !== undefined) return; // the ping sent when a hook is created
      const head = await host.branchHead(await accessToken(repo.git_account), repo.name, repo.branch_name, {
        model_name: 'svc.saas.git.repository',
        rec_id: id,
      });
      const { commit, changed } = await recordHead(tx, id, repo.branch_name, head, null);
      // The job reads the commit: it is queued once the commit row is committed.
      if (changed && repo.state === 'active' && repo.root_server_id) afterCommit(() => enqueueDeploy(repo, commit.id, null));
    },
  };
}
