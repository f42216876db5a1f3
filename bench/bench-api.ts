// The service of a bench (HTTP on loopback and the workers), its REST API as an administrator's
// client calls it, and the records an Odoo host needs (a PostgreSQL server, the root server on the
// bench's sshd, the template on both).
import { buildApp } from '../src/app.js';
import { createAuthService } from '../src/auth/auth-service.js';
import type { AppContext } from '../src/context.js';
import { sleep } from '../src/core/sleep.js';
import { startWorkers } from '../src/worker.js';
import { TEST_USERS, type Sshd } from '../test/helpers/sshd.js';

export type BenchApi = <T = { id: number }>(method: string, url: string, body?: object) => Promise<T>;

/** Calls /api/v1 at `address` with `token`; a non-2xx answer throws with its body. */
export function benchApi(address: string, token: string): BenchApi {
  return async <T>(method: string, url: string, body?: object): Promise<T> => {
    const res = await fetch(`${address}/api/v1${url}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    const json = (await res.json()) as T;
    if (!res.ok) throw new Error(`${method} ${url}: ${res.status} ${JSON.stringify(json)}`);
    return json;
  };
}

/** The app listening on a loopback port (`address`), its workers, and an administrator's API client; close() stops both. */
export async function startBenchService(ctx: AppContext) {
  const app = await buildApp(ctx);
  const address = await app.listen({ port: 0, host: '127.0.0.1' });
  const workers = await startWorkers(ctx);
  const admin = await createAuthService(ctx).createAdmin('bench@example.com');
  return {
    address,
    api: benchApi(address, admin.token),
    async close() {
      await workers.close();
      await app.close();
    },
  };
}

/** Waits for a job to complete; a failed one throws with its error. */
export async function completedJob(api: BenchApi, jobId: string) {
  for (;;) {
    const j = await api<{ state: string; error?: string }>('GET', `/jobs/${jobId}`);
    if (j.state === 'completed') return j;
    if (j.state === 'failed') throw new Error(`job ${jobId} failed: ${j.error}`);
    await sleep(100);
  }
}

/**
 * The machine's PostgreSQL, the sshd as a confirmed root server (NOPASSWD sudo user) and a
 * template `templateDb` on both; `beforeTemplate` runs on the root server first (e.g. setup_proxy).
 */
export async function registerOdooHost(
  api: BenchApi,
  sshd: Sshd,
  templateDb: string,
  beforeTemplate?: (rootId: number) => Promise<unknown>,
) {
  const pgServer = await api('POST', '/postgresql-servers', { name: 'local', ip: '127.0.0.1', port: 5432, username: 'postgres' });
  const root = await api('POST', '/root-servers', {
    ip: sshd.host,
    port: sshd.port,
    username: TEST_USERS.sudoNoPassword.name,
    password: TEST_USERS.sudoNoPassword.password,
    sudo_user: true,
    sudo_user_no_password: true,
  });
  await api('POST', `/root-servers/${root.id}/actions/confirm`);
  await beforeTemplate?.(root.id);
  const template = await api('POST', '/database-templates', {
    name: 'Odoo',
    postgresql_server_id: pgServer.id,
    template_db_name: templateDb,
    root_server_id: root.id,
  });
  return { pgServer, root, template };
}
