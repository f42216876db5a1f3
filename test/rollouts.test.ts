// The rollout of one host's tenants on the real PostgreSQL, Redis and sshd (the host: this machine,
// through sudo), with a stand-in odoo-bin: a Python script that records each call and, per
// database, either "updates" it (a table and a new filestore file) or writes part of its work and
// fails, as Odoo does when a module fails to load. What is checked: a failed tenant is restored
// from its safety copy (database and filestore, its oid followed), marked in its chatter, and the
// rollout goes on; a rollout resumed after a crash puts a tenant caught mid-update back and updates
// it once, finishes nothing twice, and leaves unchanged tenants alone. (The real Odoo, the restart
// and the checksums on a real deploy: test-odoo/odoo-rollout.test.ts.)
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { confirmedRootServer, request, waitForJob } from './helpers/api.js';
import { pacedLanes } from '../src/rollouts/rollout-pacing.js';
import { rolloutJobs } from '../src/rollouts/rollout-job-specs.js';
import { useTestApp } from './helpers/app.js';
import { useLifecycle } from './helpers/lifecycle.js';
import { queryIn, tenantUrl } from './helpers/odoo-template.js';
import { adminQuery } from './helpers/pg.js';
import { TEST_USERS, useSshd } from './helpers/sshd.js';

const base = mkdtempSync(path.join(tmpdir(), 'svc-rollout-'));
chmodSync(base, 0o755);
const PORT = 18799;
const VERSION = `rollout-test-${process.pid}`;
const source = path.join(base, 'versions', VERSION);
const calls = path.join(source, 'calls.log');

// The stand-in: `-d <db> -u <modules>`; behaviour.json says per database what happens.
const FAKE_ODOO_BIN = `
import json, os, subprocess, sys
args = sys.argv[1:]
db, mods = args[args.index("-d") + 1], args[args.index("-u") + 1]
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "calls.log"), "a") as f:
    f.write("%s %s\\n" % (db, mods))
how = json.load(open(os.path.join(here, "behaviour.json"))).get(db, "ok")
def sql(q):
    subprocess.run(["psql", "-q", "-h", "127.0.0.1", "-U", "postgres", "-d", db, "-c", q], check=True)
store = os.path.join(${JSON.stringify(base)}, "data", "filestore", db)
if how == "slots-once":
    # Odoo refused by PostgreSQL for want of connection slots, the first time only, after part of its work.
    if sum(1 for l in open(os.path.join(here, "calls.log")) if l.startswith(db + " ")) == 1:
        sql("CREATE TABLE svc_half_done ()")
        print('psycopg2.OperationalError: connection to server at "127.0.0.1", port 5432 failed: FATAL:  sorry, too many clients already')
        sys.exit(1)
    how = "ok"
if how == "ok":
    sql("CREATE TABLE svc_updated (modules text); INSERT INTO svc_updated VALUES ('%s')" % mods)
    sys.exit(0)
sql("CREATE TABLE svc_half_done ()")
open(os.path.join(store, "written-by-the-update"), "w").write("x")
print("2026-11-28 12:00:00,000 1 INFO %s odoo.modules.loading: Loading module demo (3/3)" % db)
print("2026-11-28 12:00:01,000 1 CRITICAL %s odoo.service.server: Failed to initialize database" % db)
print("ValueError: the new code refuses this tenant")
sys.exit(255)
`;

const sshd = useSshd();
const t = useTestApp({ workers: true, env: () => ({ ODOO_BASE_PATH: base }) });
const fx = useLifecycle(t);
let hostId: number;

beforeAll(async () => {
  try {
    execFileSync('id', ['odoo'], { stdio: 'ignore' });
  } catch {
    execFileSync('useradd', ['--system', '--user-group', '--no-create-home', '--shell', '/usr/sbin/nologin', 'odoo']);
  }
  mkdirSync(source, { recursive: true });
  writeFileSync(path.join(source, 'odoo-bin'), FAKE_ODOO_BIN);
  writeFileSync(calls, '');
  chmodSync(calls, 0o666);
  writeFileSync(path.join(source, 'behaviour.json'), '{}');
  mkdirSync(path.join(base, 'config'), { recursive: true });
  writeFileSync(path.join(base, 'config', `odoo-${PORT}.conf`), '[options]\naddons_path = /deploy\n');
  mkdirSync(path.join(base, 'logs'), { recursive: true });
  mkdirSync(path.join(base, 'data', 'filestore'), { recursive: true });
  execFileSync('chmod', ['-R', 'a+rwX', base]);
  const root = await confirmedRootServer(t.app, t.as.operator, sshd, {
    username: TEST_USERS.sudoNoPassword.name,
    password: TEST_USERS.sudoNoPassword.password,
    sudo_user: true,
    sudo_user_no_password: true,
  });
  hostId = root.id;
  const version = await t.ctx.db.odooVersion.create({
    data: { name: VERSION, source_url: 'file:///none.tar.gz', source_sha256: 'a'.repeat(64) },
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
  // The template names no host: the deployments of these tenants do not sign in through an Odoo (there is none).
});
afterAll(() => rmSync(base, { recursive: true, force: true }));

/** A deployed tenant with Odoo's module table (`demo` installed) and a filestore file. */
async function tenant() {
  const sub = await fx.deployed();
  const client = new pg.Client({ connectionString: tenantUrl(sub.database_name) });
  await client.connect();
  await client.query(
    "CREATE TABLE ir_module_module (id serial PRIMARY KEY, name varchar, state varchar); INSERT INTO ir_module_module (name, state) VALUES ('base', 'installed'), ('demo', 'installed')",
  );
  await client.end();
  const store = path.join(base, 'data', 'filestore', sub.database_name);
  mkdirSync(store, { recursive: true });
  writeFileSync(path.join(store, 'attachment'), 'v1');
  chmodSync(store, 0o777);
  return sub;
}

const tables = async (database: string) =>
  (
    await queryIn<{ t: string }>(database, "SELECT tablename AS t FROM pg_tables WHERE schemaname = 'public' AND tablename LIKE 'svc\\_%'")
  ).map((r) => r.t);

/** A rollout of the host already started (its checksums taken): `demo` changed. */
async function startedRollout(
  rows: { subscription_id: number; database_name: string; state?: 'pending' | 'updating' | 'updated'; safety_copy?: string }[],
) {
  const r = await t.ctx.db.rollout.create({
    data: {
      root_server_id: hostId,
      deploy_path: '/deploy',
      state: 'running',
      started_at: new Date(),
      checksums: { sums: { base: 'b1', demo: 'd2' }, dirs: { base: '/odoo', demo: '/deploy' } },
    },
  });
  for (const [i, row] of rows.entries()) {
    await t.ctx.db.rolloutTenant.create({
      data: {
        rollout_id: r.id,
        position: i + 1,
        modules: row.state === 'updating' ? ['demo'] : [],
        started_at: row.state ? new Date() : null,
        ...row,
      },
    });
  }
  return r.id;
}

async function runHost() {
  const job = await t.ctx.queues.enqueue(rolloutJobs.rollout_host, {
    root_server_id: hostId,
  });
  const done = await waitForJob(t.app, t.as.operator, job, 120_000);
  expect(done.state, JSON.stringify(done)).toBe('completed');
}

const rolloutOut = async (id: number) => (await request(t.app, t.as.operator, { method: 'GET', url: `/api/v1/rollouts/${id}` })).json();
const callsOf = (database: string) =>
  readFileSync(calls, 'utf8')
    .split('\n')
    .filter((l) => l.startsWith(`${database} `));

describe('a rollout', () => {
  it('restores a tenant whose update fails (database, filestore, oid), marks it, and goes on with the next', async () => {
    const bad = await tenant();
    const good = await tenant();
    writeFileSync(path.join(source, 'behaviour.json'), JSON.stringify({ [bad.database_name]: 'fail' }));
    const oidBefore = (await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: bad.id } })).database_oid;
    const goodOid = (await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: good.id } })).database_oid;
    const id = await startedRollout([
      { subscription_id: bad.id, database_name: bad.database_name },
      { subscription_id: good.id, database_name: good.database_name },
    ]);
    await runHost();

    const r = await rolloutOut(id);
    expect(r.state).toBe('done');
    expect(r.counts).toEqual({ updated: 1, unchanged: 0, failed: 1, pending: 0, superseded: 0 });
    const [first, second] = r.tenants;
    expect(first).toMatchObject({ subscription_id: bad.id, state: 'failed', modules: ['demo'] });
    expect(first.error).toMatch(/^while updating module demo: odoo-bin exited with 255\n[\s\S]*the new code refuses this tenant/);
    expect(second).toMatchObject({ subscription_id: good.id, state: 'updated', modules: ['demo'], error: null });

    // The failed one as it was: no half-done table, its filestore without the update's file.
    expect(await tables(bad.database_name)).toEqual([]);
    const badStore = path.join(base, 'data', 'filestore', bad.database_name);
    expect(readFileSync(path.join(badStore, 'attachment'), 'utf8')).toBe('v1');
    expect(existsSync(path.join(badStore, 'written-by-the-update'))).toBe(false);
    const [found] = await adminQuery<{ oid: string }>('SELECT oid::text FROM pg_database WHERE datname = $1', [bad.database_name]);
    const sub = await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: bad.id } });
    expect(String(sub.database_oid)).toBe(found!.oid);
    expect(sub.database_oid).not.toBe(oidBefore);
    const messages = await t.ctx.db.message.findMany({ where: { model_name: 'svc.subscription', rec_id: bad.id } });
    expect(messages.some((m) => m.body.startsWith('update_failed') && m.body.includes('the new code refuses this tenant'))).toBe(true);

    // The other updated once; no safety copy, filestore copy or maintenance flag left.
    expect(await tables(good.database_name)).toEqual(['svc_updated']);
    expect(callsOf(good.database_name)).toEqual([`${good.database_name} demo`]);
    // No safety copy left (named after the oid the tenant's database had when it was copied).
    const prefixes = [`svcrb_${oidBefore}_`, `svcrb_${goodOid}_`];
    const copies = await adminQuery<{ datname: string }>('SELECT datname FROM pg_database');
    expect(copies.filter((c) => prefixes.some((p) => c.datname.startsWith(p)))).toEqual([]);
    expect(readdirSync(path.join(base, 'data', 'filestore')).filter((d) => prefixes.some((p) => d.startsWith(p)))).toEqual([]);
    expect(execFileSync('ls', ['-A', path.join(base, 'data', 'svc-maintenance')], { encoding: 'utf8' }).trim()).toBe('');
    const rows = await t.ctx.db.actionLog.findMany({
      where: { model_name: 'svc.subscription', rec_id: { in: [bad.id, good.id] }, input_text: { startsWith: 'rollout' } },
    });
    expect(rows.map((l) => [l.rec_id, l.status])).toEqual(
      expect.arrayContaining([
        [bad.id, 'failure'],
        [good.id, 'success'],
      ]),
    );
    expect(rows).toHaveLength(2);

    // The next rollout compares with what the updated tenant recorded: nothing changed for it.
    const next = await startedRollout([{ subscription_id: good.id, database_name: good.database_name }]);
    await runHost();
    expect((await rolloutOut(next)).tenants[0]).toMatchObject({ state: 'unchanged', modules: [] });
    expect(callsOf(good.database_name)).toHaveLength(1);
  });

  it('a tenant whose update PostgreSQL refused for want of connections is put back and updated again, not failed', async () => {
    const sub = await tenant();
    writeFileSync(path.join(source, 'behaviour.json'), JSON.stringify({ [sub.database_name]: 'slots-once' }));
    const id = await startedRollout([{ subscription_id: sub.id, database_name: sub.database_name }]);
    await runHost();

    const r = await rolloutOut(id);
    expect(r.counts).toEqual({ updated: 1, unchanged: 0, failed: 0, pending: 0, superseded: 0 });
    expect(r.tenants[0]).toMatchObject({ state: 'updated', modules: ['demo'], error: null });
    expect(callsOf(sub.database_name)).toHaveLength(2);
    // What the refused run wrote was put back before the second run.
    expect(await tables(sub.database_name)).toEqual(['svc_updated']);
    const rows = await t.ctx.db.actionLog.findMany({
      where: { model_name: 'svc.subscription', rec_id: sub.id, input_text: { startsWith: 'rollout' } },
      orderBy: { id: 'asc' },
    });
    expect(rows.map((l) => l.status)).toEqual(['failure', 'success']);
    expect(rows[0]!.input_text).toContain(`database ${sub.database_name}: -u demo`);
    expect(rows[0]!.output_text).toMatch(/^refused for want of PostgreSQL connections \(try 1 of 5\): .*sorry, too many clients already/);
  });

  it("updates at once only as many tenants as PostgreSQL has connections for, saying so in the host's action log", async () => {
    const [{ max }] = (await adminQuery<{ max: string }>("SELECT current_setting('max_connections') AS max")) as [{ max: string }];
    await t.ctx.db.rootServer.update({ where: { id: hostId }, data: { odoo_workers: 2, odoo_max_cron_threads: 0 } });
    const audit = { serverId: hostId, rolloutId: 1, userId: null, jobId: 'paced-test' };
    try {
      // Room for a few updates of 4 connections each (2 workers, 4 each, and gevent's 8 planned; svc's 20), not for 32.
      const some = await pacedLanes(t.ctx, audit, 32);
      expect(some).toBeGreaterThanOrEqual(1);
      expect(some).toBeLessThan(Math.ceil(Number(max) / 4));
      expect(await pacedLanes(t.ctx, audit, 1)).toBe(1);
      // Another host of the server that may take every connection: one at a time.
      const other = await t.ctx.db.rootServer.create({
        data: {
          ip: '127.0.0.2',
          state: 'confirmed',
          odoo_state: 'running',
          odoo_postgresql_server_id: fx.serverId,
          odoo_workers: Math.ceil(Number(max) / 4),
          odoo_max_cron_threads: 0,
        },
      });
      expect(await pacedLanes(t.ctx, audit, 32)).toBe(1);
      await t.ctx.db.rootServer.delete({ where: { id: other.id } });
      const said = await t.ctx.db.actionLog.findMany({ where: { model_name: 'svc.root.server', rec_id: hostId, job_id: 'paced-test' } });
      expect(said.map((l) => l.output_text)).toEqual([
        expect.stringMatching(
          new RegExp(`^${some} tenant\\(s\\) at once, not 32 \\(tenants_per_host\\): PostgreSQL allows ${max} connections`),
        ),
        expect.stringMatching(/^1 tenant\(s\) at once, not 32 /),
      ]);
    } finally {
      await t.ctx.db.rootServer.update({ where: { id: hostId }, data: { odoo_workers: null, odoo_max_cron_threads: null } });
    }
  });

  it('resumed after a crash: the tenant caught mid-update is put back and updated once; finished ones are not run again', async () => {
    const caught = await tenant();
    const finished = await tenant();
    writeFileSync(path.join(source, 'behaviour.json'), '{}');
    // As the crash left it: the safety copy made, then part of the update written.
    const copy = `svcrb_crash_${Date.now().toString(36)}`;
    await adminQuery(`CREATE DATABASE "${copy}" OWNER svc_test_tenant TEMPLATE "${caught.database_name}"`);
    const [copied] = await adminQuery<{ oid: string }>('SELECT oid::text FROM pg_database WHERE datname = $1', [copy]);
    execFileSync('cp', ['-a', path.join(base, 'data', 'filestore', caught.database_name), path.join(base, 'data', 'filestore', copy)]);
    await queryIn(caught.database_name, 'CREATE TABLE svc_half_done ()');
    writeFileSync(path.join(base, 'data', 'filestore', caught.database_name, 'written-by-the-update'), 'x');
    // And one that ended updated, but whose clean-up the crash cut short: its copy and flag remain.
    const leftover = `svcrb_left_${Date.now().toString(36)}`;
    await adminQuery(`CREATE DATABASE "${leftover}" OWNER svc_test_tenant TEMPLATE "${finished.database_name}"`);
    mkdirSync(path.join(base, 'data', 'svc-maintenance'), { recursive: true });
    writeFileSync(path.join(base, 'data', 'svc-maintenance', finished.database_name), 'on');
    const id = await startedRollout([
      { subscription_id: finished.id, database_name: finished.database_name, state: 'updated', safety_copy: leftover },
      { subscription_id: caught.id, database_name: caught.database_name, state: 'updating', safety_copy: copy },
    ]);
    await t.ctx.db.rolloutTenant.updateMany({
      where: { rollout_id: id, subscription_id: caught.id },
      data: { safety_copy_oid: BigInt(copied!.oid) },
    });
    await runHost();

    const r = await rolloutOut(id);
    expect(r.counts).toEqual({ updated: 2, unchanged: 0, failed: 0, pending: 0, superseded: 0 });
    expect(await tables(caught.database_name)).toEqual(['svc_updated']);
    expect(existsSync(path.join(base, 'data', 'filestore', caught.database_name, 'written-by-the-update'))).toBe(false);
    expect(callsOf(caught.database_name)).toEqual([`${caught.database_name} demo`]);
    expect(callsOf(finished.database_name)).toEqual([]);
    expect(await adminQuery('SELECT datname FROM pg_database WHERE datname = ANY($1::text[])', [[copy, leftover]])).toEqual([]);
    expect(existsSync(path.join(base, 'data', 'svc-maintenance', finished.database_name))).toBe(false);
    expect(r.tenants.find((x: { subscription_id: number }) => x.subscription_id === finished.id).state).toBe('updated');
  });

  it('a maintenance flag that could not be cleared after a failed safety copy is reported and cleared by the next run', {
    timeout: 240_000,
  }, async () => {
    const sub = await tenant();
    // Its database dropped while the rollout was copying it: the copy fails. Its maintenance flag is
    // on, and cannot be removed (a directory in its place): the clean-up fails too.
    const copy = `svcrb_gone_${Date.now().toString(36)}`;
    const id = await startedRollout([{ subscription_id: sub.id, database_name: sub.database_name }]);
    await t.ctx.db.rolloutTenant.updateMany({
      where: { rollout_id: id },
      data: { state: 'copying', modules: ['demo'], safety_copy: copy, started_at: new Date() },
    });
    await adminQuery(`DROP DATABASE "${sub.database_name}" WITH (FORCE)`);
    const flag = path.join(base, 'data', 'svc-maintenance', sub.database_name);
    mkdirSync(path.join(flag, 'stuck'), { recursive: true });

    const job = await t.ctx.queues.enqueue(rolloutJobs.rollout_host, { root_server_id: hostId });
    const failed = await waitForJob(t.app, t.as.operator, job, 120_000);
    expect(failed.state).toBe('failed');
    expect(failed.error).toMatch(/clean-up after the rollout of .* failed[\s\S]*Clearing the maintenance flag on Odoo host/);
    const row = await t.ctx.db.rolloutTenant.findFirstOrThrow({ where: { rollout_id: id } });
    expect(row).toMatchObject({ state: 'failed', safety_copy: copy });
    expect(row.error).toMatch(/^The safety copy could not be made/);
    const said = await t.ctx.db.actionLog.findMany({ where: { model_name: 'svc.subscription', rec_id: sub.id, status: 'failure' } });
    expect(said.some((l) => /clean-up/.test(l.input_text ?? '') && /Clearing the maintenance flag/.test(l.output_text ?? ''))).toBe(true);

    // The flag as a file again (the page still shown): the next run clears it and forgets the copy.
    rmSync(flag, { recursive: true });
    writeFileSync(flag, 'on');
    await runHost();
    expect(existsSync(flag)).toBe(false);
    expect(await t.ctx.db.rolloutTenant.findFirstOrThrow({ where: { rollout_id: id } })).toMatchObject({
      state: 'failed',
      safety_copy: null,
    });
    expect((await rolloutOut(id)).state).toBe('done');
  });

  it('a second push during a rollout: the tenants not begun go to the newer rollout, and each tenant is updated once', async () => {
    const one = await tenant();
    const two = await tenant();
    writeFileSync(path.join(source, 'behaviour.json'), '{}');
    const older = await startedRollout([
      { subscription_id: one.id, database_name: one.database_name },
      { subscription_id: two.id, database_name: two.database_name },
    ]);
    const newer = await startedRollout([
      { subscription_id: one.id, database_name: one.database_name },
      { subscription_id: two.id, database_name: two.database_name },
    ]);
    await runHost();
    expect((await rolloutOut(older)).counts).toEqual({ updated: 0, unchanged: 0, failed: 0, pending: 0, superseded: 2 });
    expect((await rolloutOut(newer)).counts).toEqual({ updated: 2, unchanged: 0, failed: 0, pending: 0, superseded: 0 });
    expect(callsOf(one.database_name)).toHaveLength(1);
    expect(callsOf(two.database_name)).toHaveLength(1);
  });

  it('retry_rollout runs its failed tenants again; a rollout a newer one followed cannot be retried (409)', async () => {
    const sub = await tenant();
    writeFileSync(path.join(source, 'behaviour.json'), JSON.stringify({ [sub.database_name]: 'fail' }));
    const id = await startedRollout([{ subscription_id: sub.id, database_name: sub.database_name }]);
    await runHost();
    expect((await rolloutOut(id)).counts.failed).toBe(1);

    writeFileSync(path.join(source, 'behaviour.json'), '{}');
    const retried = await request(t.app, t.as.operator, { method: 'POST', url: `/api/v1/rollouts/${id}/actions/retry_rollout` });
    expect(retried.statusCode, retried.body).toBe(202);
    expect((await waitForJob(t.app, t.as.operator, retried.json().job_id, 120_000)).state).toBe('completed');
    expect((await rolloutOut(id)).counts).toMatchObject({ updated: 1, failed: 0 });
    expect(await tables(sub.database_name)).toEqual(['svc_updated']);

    await startedRollout([]);
    const refused = await request(t.app, t.as.operator, { method: 'POST', url: `/api/v1/rollouts/${id}/actions/retry_rollout` });
    expect(refused.statusCode).toBe(409);
    await runHost();
  });

  it('a rollout on a host whose Odoo is no longer set up ends, saying so (it does not fail again at every resume)', async () => {
    const other = await t.ctx.db.rootServer.create({ data: { name: 'gone', ip: '127.0.0.1', state: 'confirmed' } });
    const r = await t.ctx.db.rollout.create({ data: { root_server_id: other.id, state: 'running', started_at: new Date() } });
    const job = await t.ctx.queues.enqueue(rolloutJobs.rollout_host, { root_server_id: other.id });
    expect((await waitForJob(t.app, t.as.operator, job, 60_000)).state).toBe('completed');
    expect(await t.ctx.db.rollout.findUniqueOrThrow({ where: { id: r.id } })).toMatchObject({
      state: 'done',
      error: expect.stringMatching(/^stopped: Odoo is not set up on this root server/),
    });
  });

  it('settings: operators read, administrators change them (ETag, If-Match); bad values are refused', async () => {
    const url = '/api/v1/rollout-settings';
    const got = await request(t.app, t.as.operator, { method: 'GET', url });
    expect(got.json()).toMatchObject({ tenants_per_host: 1, order: 'trials_first' });
    expect((await request(t.app, t.as.operator, { method: 'PATCH', url, payload: { tenants_per_host: 2 } })).statusCode).toBe(403);
    expect((await request(t.app, t.as.admin, { method: 'PATCH', url, payload: { tenants_per_host: 0 } })).statusCode).toBe(400);
    expect((await request(t.app, t.as.admin, { method: 'PATCH', url, payload: { order: 'newest_first' } })).statusCode).toBe(400);
    const stale = await request(t.app, t.as.admin, {
      method: 'PATCH',
      url,
      headers: { 'if-match': '"stale"' },
      payload: { order: 'paid_first' },
    });
    expect(stale.statusCode).toBe(412);
    const changed = await request(t.app, t.as.admin, {
      method: 'PATCH',
      url,
      headers: { 'if-match': String(got.headers.etag) },
      payload: { tenants_per_host: 2, order: 'paid_first' },
    });
    expect(changed.statusCode, changed.body).toBe(200);
    expect(changed.json()).toMatchObject({ tenants_per_host: 2, order: 'paid_first' });
    await request(t.app, t.as.admin, { method: 'PATCH', url, payload: { tenants_per_host: 1, order: 'trials_first' } });
  });
});
