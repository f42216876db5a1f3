// The git host's REST API (DESIGN §7: GitHub through Octokit at GIT_API_URL), spoken through the
// one outbound client, so each call has a timeout, a bounded answer and an action-log row without
// the token. Refusals come back as UserErrors an operator can act on (bad token, missing
// repository, missing permission, rate limit).
import { Octokit } from '@octokit/rest';
import { RequestError } from '@octokit/request-error';
import type { AppContext } from '../context.js';
import { UserError } from '../core/errors.js';
import { createOutboundHttp, OutboundError, type OutboundTarget } from '../core/outbound-http.js';

export interface BranchHead {
  sha: string;
  message: string;
  author: string;
}

/** "owner/repo" split for Octokit; the repository name is validated on save. */
export function ownerAndRepo(name: string): { owner: string; repo: string } {
  const [owner = '', repo = ''] = name.split('/');
  return { owner, repo };
}

/** An Octokit failure as a sentence: what the host refused, and why. */
export function gitHostError(err: unknown, what: string, repoName: string): Error {
  if (!(err instanceof RequestError)) return err as Error;
  if (err.cause instanceof OutboundError) return new UserError(`${what}: ${err.cause.message}`);
  const headers = err.response?.headers ?? {};
  const said = typeof err.response?.data === 'object' && err.response?.data ? (err.response.data as { message?: string }).message : undefined;
  const detail = `HTTP ${err.status}${said ? `: ${said}` : ''}`;
  if (err.status === 401) return new UserError(`${what}: the git host refused the access token (${detail})`);
  if ((err.status === 403 || err.status === 429) && (headers['x-ratelimit-remaining'] === '0' || err.status === 429)) {
    const reset = Number(headers['x-ratelimit-reset']);
    const when = Number.isFinite(reset) && reset > 0 ? `; it resets at ${new Date(reset * 1000).toISOString()}` : '';
    return new UserError(`${what}: the git host's rate limit is exhausted${when} (${detail})`);
  }
  if (err.status === 403) return new UserError(`${what}: the access token may not do this on ${repoName} (${detail})`);
  if (err.status === 404) return new UserError(`${what}: ${repoName} was not found at the git host, or the token cannot see it (${detail})`);
  return new UserError(`${what}: the git host answered ${detail}`);
}

export type GitHost = ReturnType<typeof createGitHost>;

export function createGitHost(ctx: Pick<AppContext, 'db' | 'config'>) {
  const http = createOutboundHttp(ctx);

  function client(token: string, target: OutboundTarget) {
    return new Octokit({
      auth: token,
      baseUrl: ctx.config.GIT_API_URL,
      userAgent: 'svc',
      request: { fetch: http.fetchFor(target, { secrets: [token] }) },
      log: { debug() {}, info() {}, warn() {}, error() {} },
    });
  }

  async function call<T>(what: string, repoName: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw gitHostError(err, what, repoName);
    }
  }

  return {
    /** Registers a push webhook (JSON, with a secret); answers the host's hook id. */
    async createPushHook(token: string, repoName: string, hook: { url: string; secret: string }, target: OutboundTarget): Promise<string> {
      const res = await call('Registering the webhook failed', repoName, () =>
        client(token, target).rest.repos.createWebhook({
          ...ownerAndRepo(repoName),
          name: 'web',
          active: true,
          events: ['push'],
          config: { url: hook.url, content_type: 'json', secret: hook.secret, insecure_ssl: '0' },
        }),
      );
      return String(res.data.id);
    },

    /** Removes the hook. A 404 counts as removed: the hook (or the repository) is gone already. */
    async deleteHook(token: string, repoName: string, hookId: string, target: OutboundTarget): Promise<'deleted' | 'gone'> {
      try {
        await client(token, target).rest.repos.deleteWebhook({ ...ownerAndRepo(repoName), hook_id: Number(hookId) });
        return 'deleted';
      } catch (err) {
        if (err instanceof RequestError && err.status === 404 && !(err.cause instanceof OutboundError)) return 'gone';
        throw gitHostError(err, 'Deleting the webhook failed', repoName);
      }
    },

    /** The latest commit of a branch. */
    async branchHead(token: string, repoName: string, branch: string, target: OutboundTarget): Promise<BranchHead> {
      const res = await call(`Reading the head of ${branch} failed`, repoName, () =>
        client(token, target).rest.repos.getCommit({ ...ownerAndRepo(repoName), ref: branch }),
      );
      const { sha, commit, author } = res.data;
      return { sha, message: commit.message, author: commit.author?.name ?? author?.login ?? '' };
    },
  };
}
