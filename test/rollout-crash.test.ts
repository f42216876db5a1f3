// kill -9 of the worker in the middle of a tenant's update: the rollout resumes in another worker,
// which waits for the update still running on the host (its lock), puts the tenant back from its
// safety copy and updates it once from there. Real PostgreSQL, Redis, sshd (the host: this
// machine, through sudo) and a worker process started as `npm start`; the stand-in odoo-bin writes
// part of its work, then takes its time the first time it is called for a database.
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { rolloutJobs } from '../src/rollouts/rollout-job-specs.js';
import { startWorkers, type Workers } from '../src/worker.js';
import { confirmedRootServer, request } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';
import { useLifecycle } from './helpers/lifecycle.js';
import { queryIn, tenantUrl } from './helpers/odoo-template.js';
import { startService, type ServiceProcess } from './helpers/spawn.js';
import { TEST_USERS, useSshd } from './helpers/sshd.js';

const TIMINGS = { JOB_LOCK_MS: '2000', JOB_STALLED_INTERVAL_MS: '1000' };
const base = mkdtempSync(path.join(tmpdir(), 'svc-rollout-crash-'));
chmodSync(base, 0o755);
const PORT = 18798;
const VERSION = `rollout-crash-${process.pid}`;
const source = path.join(base, 'versions', VERSION);
const calls = path.join(source, 'calls.log');

// The first call for a database writes part of its work and takes 8 s; later ones update at once.
const FAKE_ODOO_BIN = `
import os, subprocess, sys, time
args = sys.argv[1:]
db, mods = args[args.index("-d") + 1], args[args.index("-u") + 1]
here = os.path.dirname(os.path.abspath(__file__))
log = os.path.join(here, "calls.log")
first = not any(l.startswith(db + " ") for l in open(log))
with open(log, "a") as f:
    f.write("%s %s\\n" % (db, mods))
def sql(q):
    subprocess.run(["psql", "-q", "-h", "127.0.0.1", "-U", "postgres", "-d", db, "-c", q], check=True)
if first:
    sql("CREATE TABLE svc_half_done ()")
    time.sleep(8)
sql("CREATE TABLE svc_updated (modules text); INSERT INTO svc_updated VALUES ('%s')" % mods)
`;

const sshd = useSshd();
const t = useTestApp({ env: () => ({ ODOO_BASE_PATH: base, ...TIMINGS }) });
const fx = useLifecycle(t);
let hostId: number;
let worker: ServiceProcess | null = null;
let workers: Workers | null = null;

beforeAll(async () => {
  try {
    execFileSync('id', ['odoo'], { stdio: 'ignore' });
  } catch {
    execFileSync('useradd', ['--system', '--user-group', '--no-create-home', '--shell', '/usr/sbin/nologin', 'odoo']);
  }
  mkdirSync(source, { recursive: true });
  writeFileSync(path.join(source, 'odoo-bin'), FAKE_ODOO_BIN);
  writeFileSync(calls, '');
  mkdirSync(path.join(base, 'config'), { recursive: true });
  writeFileSync(path.join(base, 'config', `odoo-${PORT}.conf`), '[options]\naddons_path = /deploy\n');
  mkdirSync(path.join(base, 'data', 'filestore'), { recursive: true });
  mkdirSync(path.join(base, 'logs'), { recursive: true });
  execFileSync('chmod', ['-R', 'a+rwX', base]);
  const root = await confirmedRootServer(t.app, t.as.operator, sshd, {
    username: TEST_USERS.sudoNoPassword.name,
    password: TEST_USERS.sudoNoPassword.password,
    sudo_user: true,
    sudo_user_no_password: true,
  });
  hostId = root.id;
  const version = await t.ctx.db.odooVersion.create({
    data: { name: VERSION, source_url: 'file:///none.tar.gz', source_sha256: 'b'.repeat(64) },
  });
  await t.ctx.db.rootServer.update({
    where: { id: hostId },
    data: {
      odoo_state: 'running',
      odoo_http_port: PORT,
      odoo_version_id: version.id,
      odoo_postgresql_server_id: fx.serverId,
      odoo_db_user: 'svc_test_tenant',
    },
  });
});
afterAll(async () => {
  await worker?.kill9();
  await workers?.close();
  rmSync(base, { recursive: true, force: true });
});

describe('kill -9 of the worker during a tenant update', () => {
  it('resumes: the tenant is put back from its copy and updated once; no copy or flag is left', async () => {
    workers = await startWorkers(t.ctx); // for the deployment
    const sub = await fx.deployed();
    await workers.close();
    workers = null;
    const client = new pg.Client({ connectionString: tenantUrl(sub.database_name) });
    await client.connect();
    await client.query(
      "CREATE TABLE ir_module_module (id serial PRIMARY KEY, name varchar, state varchar); INSERT INTO ir_module_module (name, state) VALUES ('demo', 'installed')",
    );
    await client.end();
    mkdirSync(path.join(base, 'data', 'filestore', sub.database_name), { recursive: true });
    writeFileSync(path.join(base, 'data', 'filestore', sub.database_name, 'attachment'), 'v1');

    const rollout = await t.ctx.db.rollout.create({
      data: {
        root_server_id: hostId,
        deploy_path: '/deploy',
        state: 'running',
        started_at: new Date(),
        checksums: { sums: { demo: 'd2' }, dirs: { demo: '/deploy' } },
      },
    });
    await t.ctx.db.rolloutTenant.create({
      data: { rollout_id: rollout.id, subscription_id: sub.id, database_name: sub.database_name, position: 1 },
    });

    worker = await startService({
      SVC_ROLE: 'worker',
      DATABASE_URL: t.ctx.config.DATABASE_URL,
      REDIS_URL: t.ctx.config.REDIS_URL,
      QUEUE_PREFIX: t.ctx.config.QUEUE_PREFIX,
      SVC_MASTER_KEY_FILE: t.ctx.config.SVC_MASTER_KEY_FILE,
      ODOO_BASE_PATH: base,
      LOG_LEVEL: 'info',
      METRICS_PORT: '0',
      ...TIMINGS,
    });
    await t.ctx.queues.enqueue(rolloutJobs.rollout_host, { root_server_id: hostId });
    // The update runs on the host, part of it written: the worker dies.
    await vi.waitUntil(() => readFileSync(calls, 'utf8').includes(sub.database_name), { timeout: 60_000, interval: 100 });
    const row = await t.ctx.db.rolloutTenant.findFirstOrThrow({ where: { rollout_id: rollout.id } });
    expect(row.state).toBe('updating');
    await worker.kill9();
    worker = null;

    workers = await startWorkers(t.ctx);
    await vi.waitUntil(async () => (await t.ctx.db.rollout.findUniqueOrThrow({ where: { id: rollout.id } })).state === 'done', {
      timeout: 90_000,
      interval: 250,
    });
    const out = (await request(t.app, t.as.operator, { method: 'GET', url: `/api/v1/rollouts/${rollout.id}` })).json();
    expect(out.counts).toEqual({ updated: 1, unchanged: 0, failed: 0, pending: 0, superseded: 0 });
    // What the interrupted update wrote is gone; the complete one is there, once.
    expect(
      await queryIn(sub.database_name, "SELECT tablename AS t FROM pg_tables WHERE schemaname = 'public' AND tablename LIKE 'svc\\_%'"),
    ).toEqual([{ t: 'svc_updated' }]);
    expect(await queryIn(sub.database_name, 'SELECT modules FROM svc_updated')).toEqual([{ modules: 'demo' }]);
    const done = await t.ctx.db.rolloutTenant.findFirstOrThrow({ where: { rollout_id: rollout.id } });
    expect(done.safety_copy).toBeNull();
    expect(existsSync(path.join(base, 'data', 'svc-maintenance', sub.database_name))).toBe(false);
    expect(readFileSync(path.join(base, 'data', 'filestore', sub.database_name, 'attachment'), 'utf8')).toBe('v1');
  }, 180_000);
});
