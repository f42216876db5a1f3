// A local git host standing in for GitHub, answering from real bare repositories on disk:
// - the REST subset svc uses on one loopback HTTP server: token check (`Authorization: token|Bearer
//   <token>`, else 401 "Bad credentials"), POST/DELETE /repos/{owner}/{repo}/hooks[/{id}],
//   GET /repos/{owner}/{repo}/commits/{branch}, and GET /repos/{owner}/{repo}/tarball/{ref}, which,
//   as GitHub does, answers 302 to another host (`codeload`, a second server on its own port) with a
//   short-lived token in the URL's query; `rateLimited` answers 403 with the rate-limit headers;
// - codeload: GET /{owner}/{repo}/legacy.tar.gz/{sha}?token=… streams a real `git archive` .tar.gz
//   whose entries sit under `<owner>-<repo>-<sha7>/`, refuses any Authorization header (a client
//   that carried the API token there would leak it) and unknown tokens.
// Every request to either server is recorded. `repo()` creates a bare repository with a work tree to
// commit from. A hostile host: `headSha` replaces the sha the commits endpoint answers,
// `cutTarballAfter` ends the tarball's connection after that many bytes, and `craftedTarballs`
// serves the test's own bytes as a commit's tarball.
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
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
  /** The API (GIT_API_URL). */
  server: RecordingServer;
  /** The archive host the tarball endpoint redirects to. */
  codeload: RecordingServer;
  url: string;
  token: string;
  hooks: Map<number, Hook>;
  rateLimited: boolean;
  /** When set, the sha the commits endpoint gives for any branch head. */
  headSha: string | null;
  /** When set, the tarball's connection is cut after this many bytes. */
  cutTarballAfter: number | null;
  /** sha → the .tar.gz served for it instead of the `git archive` of the commit. */
  craftedTarballs: Map<string, Buffer>;
  /** The short-lived download tokens handed out in redirects so far. */
  downloadTokens: string[];
  repo(name: string): Promise<TestRepo>;
  /** The .tar.gz the host serves for a commit of a repository. */
  archive(name: string, sha: string): Buffer;
  close(): Promise<void>;
}

const git = (args: string[], cwd?: string) =>
  execFileSync('git', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
/** GitHub's top-level directory of a tarball: `<owner>-<repo>-<sha7>/`. */
const archivePrefix = (name: string, sha: string) => `${name.replace('/', '-')}-${sha.slice(0, 7)}/`;
const archiveArgs = (bareDir: string, name: string, sha: string) => [
  '--git-dir',
  bareDir,
  'archive',
  '--format=tar.gz',
  `--prefix=${archivePrefix(name, sha)}`,
  sha,
];

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

  /** download token → what it may fetch */
  const downloads = new Map<string, { repo: string; sha: string }>();

  const host: FakeGitHost = {
    server: undefined as unknown as RecordingServer,
    codeload: undefined as unknown as RecordingServer,
    url: '',
    token,
    hooks,
    rateLimited: false,
    headSha: null,
    cutTarballAfter: null,
    craftedTarballs: new Map(),
    downloadTokens: [],
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
    archive(name, sha) {
      return execFileSync('git', archiveArgs(bare(name), name, sha), { maxBuffer: 1024 ** 3 });
    },
    async close() {
      await host.server.close();
      await host.codeload.close();
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
    const m = /^\/repos\/([^/]+\/[^/]+)\/(hooks|commits|tarball)(?:\/(.+))?$/.exec(req.path);
    if (!m || !exists(m[1]!)) return sendJson(res, 404, { message: 'Not Found' });
    const [, repo, kind, rest] = m;
    if (kind === 'hooks' && req.method === 'POST' && !rest) {
      const body = JSON.parse(req.body) as Omit<Hook, 'id' | 'repo'>;
      const hook = { id: nextHook++, repo: repo!, events: body.events, config: body.config };
      hooks.set(hook.id, hook);
      return sendJson(res, 201, {
        id: hook.id,
        type: 'Repository',
        active: true,
        events: hook.events,
        config: { ...hook.config, secret: '********' },
      });
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
      return sendJson(res, 200, {
        sha: host.headSha ?? sha,
        commit: { message: message.join('\n').trim(), author: { name: author } },
        author: { login: 'test-author' },
      });
    }
    if (kind === 'tarball' && req.method === 'GET' && rest) {
      let sha: string;
      try {
        sha = git(['--git-dir', bare(repo!), 'rev-parse', '--verify', '--end-of-options', `${decodeURIComponent(rest)}^{commit}`]);
      } catch {
        return sendJson(res, 404, { message: 'Not Found' });
      }
      const download = randomBytes(20).toString('hex').toUpperCase();
      downloads.set(download, { repo: repo!, sha });
      host.downloadTokens.push(download);
      res.writeHead(302, { location: `${host.codeload.url}/${repo}/legacy.tar.gz/${sha}?token=${download}`, 'content-length': '0' });
      return res.end();
    }
    return sendJson(res, 404, { message: 'Not Found' });
  }

  /** codeload: the archive itself, for the holder of a download token and nobody else. */
  function archive(req: RecordedRequest, res: ServerResponse) {
    if (req.headers.authorization !== undefined) {
      res.writeHead(400, { 'content-type': 'text/plain' });
      return res.end('Authorization header not accepted here');
    }
    const m = /^\/([^/]+\/[^/]+)\/legacy\.tar\.gz\/([0-9a-f]{40})$/.exec(req.path);
    const grant = downloads.get(req.query.get('token') ?? '');
    if (!m || !grant || grant.repo !== m[1] || grant.sha !== m[2]) {
      res.writeHead(404, { 'content-type': 'text/plain' });
      return res.end('404: Not Found');
    }
    const filename = archivePrefix(grant.repo, grant.sha).slice(0, -1);
    res.writeHead(200, { 'content-type': 'application/x-gzip', 'content-disposition': `attachment; filename=${filename}.tar.gz` });
    const crafted = host.craftedTarballs.get(grant.sha);
    if (crafted) return void res.end(crafted);
    const child = spawn('git', archiveArgs(bare(grant.repo), grant.repo, grant.sha), { stdio: ['ignore', 'pipe', 'ignore'] });
    return new Promise<void>((resolve) => {
      let sent = 0;
      const cut = host.cutTarballAfter;
      child.stdout.on('data', (chunk: Buffer) => {
        if (cut !== null && sent + chunk.length >= cut) {
          child.stdout.pause();
          child.kill();
          // The connection drops mid-body, once the headers and the first bytes are on their way.
          res.write(chunk.subarray(0, cut - sent), () => res.socket?.destroy());
          sent = cut;
          return;
        }
        sent += chunk.length;
        // Backpressure: the archive is produced as fast as the client reads it.
        if (!res.write(chunk)) {
          child.stdout.pause();
          res.once('drain', () => child.stdout.resume());
        }
      });
      child.on('close', () => {
        if (sent !== cut) res.end();
        resolve();
      });
    });
  }

  host.server = await startRecordingServer(api);
  host.codeload = await startRecordingServer(archive);
  host.url = host.server.url;
  return host;
}
