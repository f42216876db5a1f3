// setup_odoo sizes an Odoo host against its PostgreSQL server (src/odoo/odoo-connections.ts): every
// host svc set up on one server, at worst (each process's pool full, and the rollouts' updates),
// must fit in the server's max_connections less the reserved slots and svc's own. Real PostgreSQL
// (its max_connections read, whatever it is), the real sshd as the host (its cores read by the job).
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SVC_CONNECTIONS } from '../src/odoo/odoo-connections.js';
import { assertHostFits } from '../src/odoo/odoo-host-fit.js';
import { confirmedRootServer, request, waitForJob } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';
import { adminQuery } from './helpers/pg.js';
import { TEST_USERS, useSshd } from './helpers/sshd.js';

const base = mkdtempSync(path.join(tmpdir(), 'svc-sizing-'));
const PORT = 18797;
const sshd = useSshd();
const t = useTestApp({ workers: true, env: () => ({ ODOO_BASE_PATH: base }) });
let hostId: number;
let versionId: number;
let pgId: number;
/** Connections the server leaves Odoo hosts: max_connections, less the reserved ones and svc's. */
let forOdoo: number;

beforeAll(async () => {
  const root = await confirmedRootServer(t.app, t.as.operator, sshd, {
    username: TEST_USERS.sudoNoPassword.name,
    password: TEST_USERS.sudoNoPassword.password,
    sudo_user: true,
    sudo_user_no_password: true,
  });
  hostId = root.id;
  versionId = (
    await t.ctx.db.odooVersion.create({
      data: { name: `sizing-${process.pid}`, source_url: 'file:///nonexistent/odoo.tar.gz', source_sha256: 'a'.repeat(64) },
    })
  ).id;
  pgId = (await t.ctx.db.postgresqlServer.create({ data: { name: 'local', ip: '127.0.0.1', port: 5432, username: 'postgres' } })).id;
  const [s] = (await adminQuery<{ max: string; reserved: string }>(
    "SELECT current_setting('max_connections') AS max, current_setting('superuser_reserved_connections') AS reserved",
  )) as [{ max: string; reserved: string }];
  forOdoo = Number(s.max) - Number(s.reserved) - SVC_CONNECTIONS;
});
afterAll(() => rmSync(base, { recursive: true, force: true }));

/** Another host svc set up on the same server, whose processes take `connections` at worst (prefork, 4 each, gevent 8, one update 4). */
const otherHost = (connections: number) =>
  t.ctx.db.rootServer.create({
    data: {
      ip: '127.0.0.3',
      state: 'confirmed',
      odoo_state: 'running',
      odoo_postgresql_server_id: pgId,
      odoo_workers: Math.ceil((connections - 12) / 4),
      odoo_max_cron_threads: 0,
    },
  });

const setup = (body: Record<string, unknown>) =>
  request(t.app, t.as.operator, {
    method: 'POST',
    url: `/api/v1/root-servers/${hostId}/actions/setup_odoo`,
    payload: { odoo_version_id: versionId, postgresql_server_id: pgId, http_port: PORT, max_cron_threads: 0, ...body },
  });

describe('setup_odoo against PostgreSQL’s connections', () => {
  it('a host that fits beside the others is let through', async () => {
    const other = await otherHost(40);
    await expect(
      assertHostFits(t.ctx, await t.ctx.db.postgresqlServer.findUniqueOrThrow({ where: { id: pgId } }), {
        id: hostId,
        workers: 2,
        maxCronThreads: 0,
      }),
    ).resolves.toBeUndefined();
    await t.ctx.db.rootServer.delete({ where: { id: other.id } });
  });

  it('workers given: 409 with the numbers when it cannot fit; nothing changed, nothing queued', async () => {
    const other = await otherHost(forOdoo);
    try {
      const res = await setup({ workers: 2 });
      expect(res.statusCode, res.body).toBe(409);
      const message = res.json().error.message as string;
      expect(message).toMatch(
        /^PostgreSQL at postgres@127\.0\.0\.1:5432 allows \d+ connections \(\d+ reserved for superusers, 20 kept for svc: \d+ for Odoo hosts\)/,
      );
      expect(message).toContain(`root server ${hostId} would need up to 20 (2 workers + 0 cron × 4 + gevent 8 + 1 update(s) × 4)`);
      expect(message).toContain(`(root server ${other.id}: `);
      expect(message).toMatch(/nothing was changed$/);
      const server = await t.ctx.db.rootServer.findUniqueOrThrow({ where: { id: hostId } });
      expect(server).toMatchObject({ odoo_state: 'not_installed', odoo_db_user: null, odoo_workers: null });
    } finally {
      await t.ctx.db.rootServer.delete({ where: { id: other.id } });
    }
  });

  it('workers from the host’s cores: the job refuses before it changes anything, and the server keeps its state', async () => {
    const other = await otherHost(forOdoo - 10);
    try {
      const res = await setup({});
      expect(res.statusCode, res.body).toBe(202);
      const job = await waitForJob(t.app, t.as.operator, res.json().job_id, 60_000);
      expect(job.state).toBe('failed');
      expect(job.error).toMatch(/^PostgreSQL at postgres@127\.0\.0\.1:5432 allows \d+ connections/);
      expect(job.error).toContain(`(root server ${other.id}: `);
      const server = await t.ctx.db.rootServer.findUniqueOrThrow({ where: { id: hostId } });
      expect(server).toMatchObject({ odoo_state: 'not_installed', odoo_workers: null });
      // Nothing on the host: no configuration, no source.
      expect(existsSync(path.join(base, 'config', `odoo-${PORT}.conf`))).toBe(false);
      expect(existsSync(path.join(base, 'versions'))).toBe(false);
    } finally {
      await t.ctx.db.rootServer.delete({ where: { id: other.id } });
    }
  });
});
