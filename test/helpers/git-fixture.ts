// The fixture of the git deployment tests: a real sshd (the root servers' host), the git host
// (./git-host.ts) knowing `token`, a scratch directory everyone may write (the SSH users deploy
// there; ODOO_BASE_PATH is its opt/odoo), and the app with its workers pointed at them.
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';
import { request } from './api.js';
import { useTestApp, type TestApp } from './app.js';
import { startFakeGitHost, type FakeGitHost } from './git-host.js';
import { useSshd, type Sshd } from './sshd.js';

export interface GitFixture {
  t: TestApp;
  sshd: Sshd;
  host: FakeGitHost;
  scratch: string;
  /** ODOO_BASE_PATH */
  basePath: string;
}

/** `env`: configuration on top of GIT_API_URL and ODOO_BASE_PATH. */
export function useGitFixture(token: string, env: Record<string, string> = {}): GitFixture {
  const f = {} as GitFixture;
  f.sshd = useSshd();
  beforeAll(async () => {
    f.host = await startFakeGitHost(token);
    f.scratch = await mkdtemp(path.join(tmpdir(), 'svc-git-'));
    await chmod(f.scratch, 0o777);
    f.basePath = path.join(f.scratch, 'opt', 'odoo');
  });
  afterAll(async () => {
    await f.host?.close();
    if (f.scratch) await rm(f.scratch, { recursive: true, force: true });
  });
  f.t = useTestApp({ workers: true, env: () => ({ GIT_API_URL: f.host.url, ODOO_BASE_PATH: f.basePath, ...env }) });
  return f;
}

/** A git account with `token`, created by an administrator; its record. */
export async function createGitAccount(t: TestApp, token: string, fields: Record<string, unknown> = {}) {
  const res = await request(t.app, t.as.admin, {
    method: 'POST',
    url: '/api/v1/git-accounts',
    payload: { access_token: token, ...fields },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json() as { id: number; [field: string]: unknown };
}
