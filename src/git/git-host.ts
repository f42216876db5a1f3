// The git host's REST API (GitHub through Octokit at GIT_API_URL), spoken through the
// one outbound client, so each call has a timeout, a bounded answer and an action-log row without
// the token. Refusals come back as UserErrors an operator can act on (bad token, missing
// repository, missing permission, rate limit). Commit ids the host gives are checked before
// anything records or uses them: a hostile host must not put an option or a shell word anywhere.
import { Octokit } from '@octokit/rest';
import { RequestError } from '@octokit/request-error';
import type { AppContext } from '../context.js';
import { UserError } from '../core/errors.js';
import type { Download } from '../core/outbound-download.js';
import { OutboundError } from '../core/outbound-error.js';
import { createOutboundHttp } from '../core/outbound-http.js';
import type { OutboundTarget } from '../core/outbound-log.js';
import { webhookUrl } from '../webhooks/index.js';

/** A commit id: SHA-1 or SHA-256, lower-case hex, as git hosts write them. */
const COMMIT_ID = /^[0-9a-f]{40,64}$/;

/** A remote-supplied commit id, checked before it reaches a record, a command line or a path. */
export function checkCommitId(value: unknown, what: string): string {
  if (typeof value === 'string' && COMMIT_ID.test(value)) return value;
  const shown = typeof value === 'string' ? JSON.stringify(value.length > 120 ? `${value.slice(0, 120)}…` : value) : String(value);
  throw new UserError(`${what} is not a commit id (40 to 64 lower-case hexadecimal digits): ${shown}. Nothing was recorded or run.`);
}

/** Text from the host as it may be stored: PostgreSQL text holds no NUL. */
const storable = (value: unknown) => (typeof value === 'string' ? value.replaceAll('\0', '') : '');

export interface BranchHead {
  sha: string;
  message: string;
  author: string;
}

/** "owner/repo" split for Octokit; the repository name is validated on save. */
function ownerAndRepo(name: string): { owner: string; repo: string } {
  const [owner = '', repo = ''] = name.split('/');
  return { owner, repo };
}

/** A refusal of the host (status, its headers, its `message`) as a sentence: what was refused, and why. */
function refusal(status: number, header: (name: string) => unknown, said: unknown, what: string, repoName: string): UserError {
  const detail = `HTTP ${status}${typeof said === 'string' && said ? `: ${said}` : ''}`;
  if (status === 401) return new UserError(`${what}: the git host refused the access token (${detail})`);
  if ((status === 403 || status === 429) && (String(header('x-ratelimit-remaining')) === '0' || status === 429)) {
    const reset = Number(header('x-ratelimit-reset'));
    const when = Number.isFinite(reset) && reset > 0 ? `; it resets at ${new Date(reset * 1000).toISOString()}` : '';
    return new UserError(`${what}: the git host's rate limit is exhausted${when} (${detail})`);
  }
  if (status === 403) return new UserError(`${what}: the access token may not do this on ${repoName} (${detail})`);
  if (status === 404) return new UserError(`${what}: ${repoName} was not found at the git host, or the token cannot see it (${detail})`);
  return new UserError(`${what}: the git host answered ${detail}`);
}

/** An Octokit failure as a sentence: what the host refused, and why. */
function gitHostError(err: unknown, what: string, repoName: string): Error {
  if (!(err instanceof RequestError)) return err as Error;
  if (err.cause instanceof OutboundError) return new UserError(`${what}: ${err.cause.message}`);
  const headers = err.response?.headers ?? {};
  const said =
    typeof err.response?.data === 'object' && err.response?.data ? (err.response.data as { message?: string }).message : undefined;
  return refusal(err.status, (name) => headers[name], said, what, repoName);
}

export function createGitHost(ctx: Pick<AppContext, 'db' | 'config'>) {
  const http = createOutboundHttp(ctx);

  /** `secrets`: further values the call's action-log row must not hold. */
  function client(token: string, target: OutboundTarget, secrets: string[] = []) {
    return new Octokit({
      auth: token,
      baseUrl: ctx.config.GIT_API_URL,
      userAgent: 'svc',
      request: { fetch: http.fetchFor(target, { secrets: [token, ...secrets] }) },
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
    /**
     * Registers a push webhook (JSON, signed with `secret`) calling the inbound webhook of `token`;
     * answers the host's hook id. The URL's token is the inbound webhook's secret, which only
     * administrators may see: the action log (which every user reads) keeps the URL with the token
     * masked, in the request and in the host's answer that repeats it.
     */
    async createPushHook(
      token: string,
      repoName: string,
      hook: { token: string; secret: string },
      target: OutboundTarget,
    ): Promise<string> {
      const url = webhookUrl(ctx.config.BASE_URL, hook.token);
      const res = await call('Registering the webhook failed', repoName, () =>
        client(token, target, [hook.token, hook.secret]).rest.repos.createWebhook({
          ...ownerAndRepo(repoName),
          name: 'web',
          active: true,
          events: ['push'],
          config: { url, content_type: 'json', secret: hook.secret, insecure_ssl: '0' },
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

    /** The latest commit of a branch; a sha that is not a commit id is refused. */
    async branchHead(token: string, repoName: string, branch: string, target: OutboundTarget): Promise<BranchHead> {
      const res = await call(`Reading the head of ${branch} failed`, repoName, () =>
        client(token, target).rest.repos.getCommit({ ...ownerAndRepo(repoName), ref: branch }),
      );
      const { sha, commit, author } = res.data;
      return {
        sha: checkCommitId(sha, `The head of ${branch} that the git host gave`),
        message: storable(commit?.message),
        author: storable(commit?.author?.name ?? author?.login),
      };
    },

    /**
     * The tree of a commit as the host's tarball (`GET /repos/{owner}/{repo}/tarball/{sha}`, a
     * .tar.gz with one top-level directory), streamed. GitHub answers with a redirect to another
     * host whose URL carries a short-lived credential: followed without the token.
     */
    async tarball(
      token: string,
      repoName: string,
      sha: string,
      target: OutboundTarget,
      limits: { maxBytes: number; timeoutMs: number },
    ): Promise<Download> {
      const { owner, repo } = ownerAndRepo(repoName);
      const commit = checkCommitId(sha, 'The commit to deploy');
      const url = `${ctx.config.GIT_API_URL}/repos/${encodeURIComponent(owner)}/${encodeURIComponent(repo)}/tarball/${commit}`;
      const what = `Downloading the tree of ${commit.slice(0, 12)} failed`;
      const headers = {
        authorization: `token ${token}`,
        accept: 'application/vnd.github+json',
        'user-agent': 'svc',
        'x-github-api-version': '2022-11-28',
      };
      const download = http.download(
        target,
        { url, headers },
        {
          secrets: [token],
          maxRedirects: 3,
          maxResponseBytes: limits.maxBytes,
          timeoutMs: limits.timeoutMs,
          refused: (res) => {
            let said: unknown;
            try {
              said = (res.json() as { message?: unknown } | null)?.message;
            } catch {
              said = undefined;
            }
            return refusal(res.status, (name) => res.headers.get(name), said, what, repoName);
          },
        },
      );
      return download.catch((err: unknown) => {
        throw err instanceof OutboundError ? new UserError(`${what}: ${err.message}`) : err;
      });
    },
  };
}
