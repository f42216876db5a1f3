// A local git host standing in for GitHub (DESIGN §7), on one loopback HTTP server like the real one:
// - the REST subset svc uses: token check (`Authorization: token|Bearer <token>`, else 401 "Bad
//   credentials"), POST/DELETE /repos/{owner}/{repo}/hooks[/{id}], GET /repos/{owner}/{repo}/commits/{branch},
//   answered from real bare repositories on disk; `rateLimited` answers 403 with the rate-limit headers;
// - git's smart HTTP protocol for clones (`/{owner}/{repo}.git/...`) through the real `git http-backend`,
//   which needs HTTP Basic auth whose password is the token (401 otherwise, so git asks its
//   credential helper, as with GitHub).
// Every request is recorded. `repo()` creates a bare repository with a work tree to commit from.
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sendJson, startRecordingServer, type RecordedRequest, type RecordingServer } from './http-recorder.js';

export interface Hook {
  id: number;
  repo: string;
  events: string[];
  config: { url: string; content_type: string; secret: string };
}

export interface TestRepo {
  name: string;
  /** Writes the files (path → content), commits them and pushes to `branch`; answers the sha. */
  commit(files: Record<string, string>, message: string, branch?: string): string;
}

export interface FakeGitHost {
  server: RecordingServer;
  url: string;
  token: string;
  hooks: Map<number, Hook>;
  rateLimited: boolean;
  repo(name: string): Promise<TestRepo>;
  close(): Promise<void>;
}

const git = (args: string[], cwd?: string) => execFileSync('git', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();

export async function startFakeGitHost(token: string): Promise<FakeGitHost> {
  const root = await mkdtemp(path.join(tmpdir(), 'svc-git-host-'));
  const reposDir = path.join(root, 'repos');
  await mkdir(reposDir);
  const hooks = new Map<number, Hook>();
  let nextHook = 1000;
  const bare = (name: string) => path.join(reposDir, `${name}.git`);
  const exists = (name: string) => {
    try {
      git(['--git-dir', bare(name), 'rev-parse', '--git-dir']);
      return true;
    } catch {
      return false;
    }
  };

  const host: FakeGitHost = {
    server: undefined as unknown as RecordingServer,
    url: '',
    token,
    hooks,
    rateLimited: false,
    async repo(name) {
      await mkdir(path.dirname(bare(name)), { recursive: true });
      git(['init', '-q', '--bare', '-b', 'main', bare(name)]);
      const work = path.join(root, 'work', name);
      await mkdir(work, { recursive: true });
      git(['init', '-q', '-b', 'main'], work);
      git(['config', 'user.name', 'Test Author'], work);
      git(['config', 'user.email', 'author@svc.test'], work);
      return {
        name,
        commit(files, message, branch = 'main') {
          for (const [file, content] of Object.entries(files)) {
            mkdirSync(path.dirname(path.join(work, file)), { recursive: true });
            writeFileSync(path.join(work, file), content);
          }
          git(['add', '-A'], work);
          git(['commit', '-q', '-m', message], work);
          git(['push', '-q', '--force', bare(name), `HEAD:refs/heads/${branch}`], work);
          return git(['rev-parse', 'HEAD'], work);
        },
      };
    },
    async close() {
      await host.server.close();
      await rm(root, { recursive: true, force: true });
    },
  };

  function api(req: RecordedRequest, res: ServerResponse) {
    const auth = req.headers.authorization ?? '';
    if (auth !== `token ${token}` && auth !== `Bearer ${token}`) {
      return sendJson(res, 401, { message: 'Bad credentials', documentation_url: 'https://docs.github.com/rest' });
    }
    if (host.rateLimited) {
      res.writeHead(403, { 'content-type': 'application/json', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': '2000000000' });
      return res.end(JSON.stringify({ message: 'API rate limit exceeded' }));
    }
    const m = /^\/repos\/([^/]+\/[^/]+)\/(hooks|commits)(?:\/(.+))?$/.exec(req.path);
    if (!m || !exists(m[1]!)) return sendJson(res, 404, { message: 'Not Found' });
    const [, repo, kind, rest] = m;
    if (kind === 'hooks' && req.method === 'POST' && !rest) {
      const body = JSON.parse(req.body) as Omit<Hook, 'id' | 'repo'>;
      const hook = { id: nextHook++, repo: repo!, events: body.events, config: body.config };
      hooks.set(hook.id, hook);
      return sendJson(res, 201, { id: hook.id, type: 'Repository', active: true, events: hook.events, config: { ...hook.config, secret: '********' } });
    }
    if (kind === 'hooks' && req.method === 'DELETE' && rest) {
      const hook = hooks.get(Number(rest));
      if (!hook || hook.repo !== repo) return sendJson(res, 404, { message: 'Not Found' });
      hooks.delete(hook.id);
      res.writeHead(204);
      return res.end();
    }
    if (kind === 'commits' && req.method === 'GET' && rest) {
      let out: string;
      try {
        out = git(['--git-dir', bare(repo!), 'log', '-1', '--format=%H%n%an%n%B', `refs/heads/${decodeURIComponent(rest)}`]);
      } catch {
        return sendJson(res, 422, { message: `No commit found for SHA: ${rest}` });
      }
      const [sha, author, ...message] = out.split('\n');
      return sendJson(res, 200, { sha, commit: { message: message.join('\n').trim(), author: { name: author } }, author: { login: 'test-author' } });
    }
    return sendJson(res, 404, { message: 'Not Found' });
  }

  /** git's smart HTTP, through the real CGI program. */
  function smartHttp(req: RecordedRequest, res: ServerResponse) {
    const basic = /^Basic (.+)$/.exec(req.headers.authorization ?? '');
    const password = basic ? Buffer.from(basic[1]!, 'base64').toString().split(':').slice(1).join(':') : null;
    if (password !== token) {
      res.writeHead(401, { 'www-authenticate': 'Basic realm="git"' });
      return res.end('authentication required');
    }
    return new Promise<void>((resolve) => {
      const cgi = spawn('git', ['http-backend'], {
        env: {
          PATH: process.env.PATH,
          GIT_PROJECT_ROOT: reposDir,
          GIT_HTTP_EXPORT_ALL: '1',
          PATH_INFO: req.path,
          QUERY_STRING: req.query.toString(),
          REQUEST_METHOD: req.method,
          CONTENT_TYPE: req.headers['content-type'] ?? '',
          CONTENT_LENGTH: String(req.raw.length),
          HTTP_CONTENT_ENCODING: req.headers['content-encoding'] ?? '',
          GIT_PROTOCOL: String(req.headers['git-protocol'] ?? ''),
          REMOTE_USER: 'x-access-token',
          REMOTE_ADDR: '127.0.0.1',
        },
      });
      const chunks: Buffer[] = [];
      cgi.stdout.on('data', (c: Buffer) => chunks.push(c));
      cgi.on('close', () => {
        const out = Buffer.concat(chunks);
        const split = out.indexOf('\r\n\r\n');
        const head = out.subarray(0, split).toString().split('\r\n');
        const headers: Record<string, string> = {};
        let status = 200;
        for (const line of head) {
          const [name, ...value] = line.split(':');
          if (name!.toLowerCase() === 'status') status = Number(value.join(':').trim().split(' ')[0]);
          else headers[name!.toLowerCase()] = value.join(':').trim();
        }
        res.writeHead(status, headers);
        res.end(out.subarray(split + 4));
        resolve();
      });
      cgi.stdin.end(req.raw);
    });
  }

  host.server = await startRecordingServer((req, res) => (/\.git(\/|$)/.test(req.path) ? smartHttp(req, res) : api(req, res)));
  host.url = host.server.url;
  return host;
}

/** GIT_CLONE_URL for this host: clones over smart HTTP with the token, as from GitHub. */
export function cloneUrlOf(host: FakeGitHost): string {
  return `${host.url}/{name}.git`;
}
