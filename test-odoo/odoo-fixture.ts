// The fixture of the real-Odoo suite: the app with its workers, the tests' own sshd as the Odoo host
// (its sudo NOPASSWD user: commands run as root on this machine), ODOO_BASE_PATH in a fresh
// directory, the local PostgreSQL as the host's database server, and an Odoo version per tarball of
// ODOO_SOURCE (file:// on the host, with its real SHA-256). Teardown stops every Odoo it started and
// drops the roles and databases it made.
import { chmod, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';
import { confirmedRootServer, request, waitForJob } from '../test/helpers/api.js';
import { useTestApp, type TestApp } from '../test/helpers/app.js';
import { TEST_USERS, useSshd, type Sshd } from '../test/helpers/sshd.js';
import { describeOdooSource, type OdooSource, odooSourceFiles } from '../test/helpers/odoo-source.js';

export { packagesOf, serverWideModulesOf } from '../test/helpers/odoo-source.js';

/** The tarballs of ODOO_SOURCE, described (the suite's script checked that they exist). */
export function odooSources(): OdooSource[] {
  const list = odooSourceFiles(process.env.ODOO_SOURCE);
  if (list.length === 0) throw new Error('ODOO_SOURCE is not set: run the suite with npm run test:odoo (it says how to get a source)');
  return list.map(describeOdooSource);
}

export interface OdooFixture {
  t: TestApp;
  sshd: Sshd;
  base: string;
  pgServerId: number;
  /** A confirmed root server on the tests' sshd (root through sudo). */
  newHost(): Promise<number>;
  /** Creates an Odoo version (administrator). */
  newVersion(body: Record<string, unknown>): Promise<{ id: number; name: string }>;
  /** Posts an action and waits for its job. */
  runJob(
    id: number,
    action: string,
    payload?: object,
    resource?: string,
  ): Promise<{ state: string; result?: unknown; error?: string; [k: string]: unknown }>;
  server(id: number): Promise<Record<string, unknown>>;
}

export function useOdooFixture(env: Record<string, string> = {}): OdooFixture {
  const f = {} as OdooFixture;
  const hosts: number[] = [];
  f.sshd = useSshd();
  beforeAll(async () => {
    f.base = await mkdtemp(path.join(tmpdir(), 'svc-odoo-'));
    await chmod(f.base, 0o755);
  });
  f.t = useTestApp({
    workers: true,
    env: () => ({ ODOO_BASE_PATH: f.base, ODOO_HEALTH_TIMEOUT_MS: '120000', ...env }),
  });
  beforeAll(async () => {
    const res = await request(f.t.app, f.t.as.operator, {
      method: 'POST',
      url: '/api/v1/postgresql-servers',
      payload: { name: 'local', ip: '127.0.0.1', port: 5432, username: 'postgres' },
    });
    expect(res.statusCode, res.body).toBe(201);
    f.pgServerId = res.json().id;
  });
  f.newHost = async () => {
    const root = await confirmedRootServer(f.t.app, f.t.as.operator, f.sshd, {
      username: TEST_USERS.sudoNoPassword.name,
      password: TEST_USERS.sudoNoPassword.password,
      sudo_user: true,
      sudo_user_no_password: true,
    });
    hosts.push(root.id);
    return root.id;
  };
  f.newVersion = async (body) => {
    const res = await request(f.t.app, f.t.as.admin, { method: 'POST', url: '/api/v1/odoo-versions', payload: body });
    expect(res.statusCode, res.body).toBe(201);
    return res.json();
  };
  f.runJob = async (id, action, payload, resource = 'root-servers') => {
    const res = await request(f.t.app, f.t.as.operator, { method: 'POST', url: `/api/v1/${resource}/${id}/actions/${action}`, payload });
    expect(res.statusCode, res.body).toBe(202);
    return waitForJob(f.t.app, f.t.as.operator, res.json().job_id, 20 * 60_000);
  };
  f.server = async (id) => (await request(f.t.app, f.t.as.operator, { method: 'GET', url: `/api/v1/root-servers/${id}` })).json();

  afterAll(async () => {
    // Every Odoo this file started stops; the app's clean-up then drops its roles and databases
    // (what the file's svc database records: test/helpers/cluster-cleanup.ts).
    for (const id of hosts) {
      const server = await f.t.ctx.db.rootServer.findUnique({ where: { id } });
      if (server?.odoo_http_port != null && server.odoo_state !== 'not_installed') {
        await f.runJob(id, 'stop_odoo').catch(() => {});
      }
    }
    if (f.base) await rm(f.base, { recursive: true, force: true });
  }, 5 * 60_000);
  return f;
}

/** GET on the host's Odoo, straight from the test (it is this machine). */
export async function odooGet(port: number, url: string, init: RequestInit = {}) {
  return fetch(`http://127.0.0.1:${port}${url}`, { redirect: 'manual', ...init, signal: AbortSignal.timeout(30_000) });
}

/**
 * JSON-RPC straight to the host's Odoo on 127.0.0.1. Without the host's secret (`svcHeaders`) it is
 * any request, which svc's addon lets reach tenants' databases only; with it, one of svc's own.
 */
export async function jsonRpc(port: number, service: string, method: string, args: unknown[], headers: Record<string, string> = {}) {
  const res = await odooGet(port, '/jsonrpc', {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', method: 'call', id: 1, params: { service, method, args } }),
  });
  return { status: res.status, body: (await res.text()) as string };
}

/** The header svc's own calls to the host's Odoo carry: the host's secret, from Odoo's configuration file on this machine. */
export async function svcHeaders(base: string, port: number): Promise<Record<string, string>> {
  const config = await readFile(`${base}/config/odoo-${port}.conf`, 'utf8');
  const secret = /^\[svc\]\nhost_secret = (\S+)$/m.exec(config)?.[1];
  if (!secret) throw new Error(`no [svc] host_secret in the configuration of port ${port}`);
  return { 'X-Svc-Host-Secret': secret };
}

/** A JSON-RPC answer's result; an Error with Odoo's error when it has one. */
export function rpcResult(body: string) {
  const answer = JSON.parse(body);
  if (answer.error) throw new Error(JSON.stringify(answer.error));
  return answer.result;
}
