// Staging copies follow the rollouts of their host, on the real PostgreSQL, Redis and sshd (the host:
// this machine, through sudo), with a stand-in odoo-bin: `-u all` either "updates" the copy (a table,
// and a cron turned back on, as a module's data can) or writes part of its work and fails;
// `neutralize` turns crons and mail servers off. A rollout of the host marks its copies stale with
// the commit; the follow job refreshes them (updated, neutralized again, no longer stale); a failed
// refresh puts the copy back from its safety copy (database, filestore, oid), keeps it stale and
// says why, and is not retried until the operator asks; a refresh cut short by a crash is put back
// and run again. (The real Odoo: test-odoo/odoo-staging.test.ts.)
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FEATURES } from '../src/features.js';
import { makeSafetyCopy } from '../src/instances/safety-copy.js';
import { rolloutJobs } from '../src/rollouts/rollout-job-specs.js';
import { stagingJobs } from '../src/staging/staging-job-specs.js';
import { confirmedRootServer, request, waitForJob } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';
import { useLifecycle } from './helpers/lifecycle.js';
import { createOdooTemplate, queryIn } from './helpers/odoo-template.js';
import { adminQuery, dropDatabase } from './helpers/pg.js';
import { TEST_USERS, useSshd } from './helpers/sshd.js';

const base = mkdtempSync(path.join(tmpdir(), 'svc-staging-refresh-'));
chmodSync(base, 0o755);
const PORT = 18796;
const VERSION = `staging-refresh-test-${process.pid}`;
const source = path.join(base, 'versions', VERSION);
const store = path.join(base, 'data', 'filestore');

// The stand-in: `neutralize -d <db>`, or `-d <db> -u all`; behaviour.json says what the update does.
const FAKE_ODOO_BIN = `
import json, os, subprocess, sys
args = sys.argv[1:]
db = args[args.index("-d") + 1]
def sql(q):
    subprocess.run(["psql", "-q", "-h", "127.0.0.1", "-U", "svc_test_tenant", "-d", db, "-c", q], check=True)
if args[0] == "neutralize":
    sql("UPDATE ir_cron SET active = false; UPDATE ir_mail_server SET active = false; UPDATE ir_config_parameter SET value = 'true' WHERE key = 'database.is_neutralized'")
    sys.exit(0)
here = os.path.dirname(os.path.abspath(__file__))
how = json.load(open(os.path.join(here, "behaviour.json"))).get(db, "ok")
if how == "ok":
    sql("CREATE TABLE svc_updated (); UPDATE ir_cron SET active = true")
    sys.exit(0)
sql("CREATE TABLE svc_half_done ()")
open(os.path.join(${JSON.stringify(store)}, db, "written-by-the-update"), "w").write("x")
print("2026-11-30 12:00:00,000 1 INFO %s odoo.modules.loading: Loading module demo (3/3)" % db)
print("ValueError: the new code refuses this copy")
sys.exit(1)
`;

// Each test deploys, copies databases and runs several root sessions over SSH: seconds alone, several
// times that beside the real-Odoo suite on a 2-core machine.
const TIMEOUT_MS = 120_000;
const sshd = useSshd();
// The follow job runs when a test says, not every minute: what a test reads is never refreshed behind its back.
const features = FEATURES.map((f) => (f.name === 'staging' ? { ...f, schedules: undefined } : f));
const t = useTestApp({ workers: true, features, env: () => ({ ODOO_BASE_PATH: base }) });
const fx = useLifecycle(t);
let hostId: number;
const made: string[] = [];

beforeAll(async () => {
  try {
    execFileSync('id', ['odoo'], { stdio: 'ignore' });
  } catch {
    execFileSync('useradd', ['--system', '--user-group', '--no-create-home', '--shell', '/usr/sbin/nologin', 'odoo']);
  }
  mkdirSync(source, { recursive: true });
  writeFileSync(path.join(source, 'odoo-bin'), FAKE_ODOO_BIN);
  writeFileSync(path.join(source, 'behaviour.json'), '{}');
  // What neutralize's launcher loads first (svc's tenant_db): nothing to patch for the stand-in.
  mkdirSync(path.join(base, 'svc-addons', 'svc_instance'), { recursive: true });
  writeFileSync(path.join(base, 'svc-addons', 'svc_instance', 'tenant_db.py'), 'def install():\n    pass\n');
  mkdirSync(path.join(base, 'config'), { recursive: true });
  writeFileSync(path.join(base, 'config', `odoo-${PORT}.conf`), '[options]\n');
  mkdirSync(path.join(base, 'logs'), { recursive: true });
  mkdirSync(store, { recursive: true });
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
});
afterAll(async () => {
  for (const name of made) await dropDatabase(name);
  rmSync(base, { recursive: true, force: true });
});

/** A ready, neutralized staging copy of a deployed subscription on the host, with a file. */
async function stagingCopy(behaviour: 'ok' | 'fail', state: 'ready' | 'creating' = 'ready') {
  const sub = await fx.deployed();
  const name = `${sub.database_name}_stg_t`;
  made.push(name);
  await createOdooTemplate(name);
  await queryIn(
    name,
    `SET ROLE svc_test_tenant;
     CREATE TABLE ir_cron (id serial PRIMARY KEY, active boolean); INSERT INTO ir_cron (active) VALUES (false);
     CREATE TABLE ir_mail_server (id serial PRIMARY KEY, active boolean, smtp_host varchar); INSERT INTO ir_mail_server VALUES (1, false, 'smtp.example.com');
     INSERT INTO ir_config_parameter (key, value) VALUES ('database.is_neutralized', 'true')`,
  );
  mkdirSync(path.join(store, name), { recursive: true });
  writeFileSync(path.join(store, name, 'attachment'), 'v1');
  execFileSync('chmod', ['-R', 'a+rwX', path.join(store, name)]);
  const behaviours = JSON.parse(readFileSync(path.join(source, 'behaviour.json'), 'utf8'));
  writeFileSync(path.join(source, 'behaviour.json'), JSON.stringify({ ...behaviours, [name]: behaviour }));
  const row = await t.ctx.db.stagingInstance.create({
    data: {
      subscription_id: sub.id,
      database_name: name,
      postgresql_server_id: fx.serverId,
      root_server_id: hostId,
      url: `https://${name}.staging.test`,
      state,
      expires_at: new Date(Date.now() + 86_400_000),
    },
  });
  return { sub, row, name };
}

/** A rollout of the host, of a commit, run to its end (no tenant of its own here). */
async function rollout(sha: string) {
  const user = await t.ctx.db.user.findFirstOrThrow();
  const account = await t.ctx.db.gitAccount.create({ data: { access_token: 'x', user_id: user.id } });
  const repo = await t.ctx.db.gitRepository.create({
    data: { name: `acme/staging-${sha}`, branch_name: 'main', git_account_id: account.id, root_server_id: hostId },
  });
  const commit = await t.ctx.db.gitCommit.create({ data: { commit_id: sha, branch: 'main', repository_id: repo.id } });
  const r = await t.ctx.db.rollout.create({
    data: {
      root_server_id: hostId,
      git_commit_id: commit.id,
      deploy_path: '/deploy',
      state: 'running',
      started_at: new Date(),
      checksums: {},
    },
  });
  const job = await t.ctx.queues.enqueue(rolloutJobs.rollout_host, { root_server_id: hostId });
  expect((await waitForJob(t.app, t.as.operator, job, 120_000)).state).toBe('completed');
  return r.id;
}

/** The follow job once (this file's app has no schedule of it); answers the copies it queued, each refresh run to its end. */
async function follow() {
  const id = await t.ctx.queues.enqueue(stagingJobs.staging_follow, { user_id: null });
  const done = await waitForJob(t.app, t.as.operator, id, 60_000);
  expect(done.state, JSON.stringify(done)).toBe('completed');
  const queued = (done.result as { queued: { staging_instance_id: number; job_id: string }[] }).queued;
  const jobs = [];
  for (const q of queued) jobs.push(await waitForJob(t.app, t.as.operator, q.job_id, 120_000));
  return { queued: queued.map((q) => q.staging_instance_id), jobs };
}

const listed = async (subscriptionId: number) => {
  const res = await request(t.app, t.as.operator, { method: 'GET', url: `/api/v1/subscriptions/${subscriptionId}/staging-instances` });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().items[0];
};
const tables = async (database: string) =>
  (
    await queryIn<{ t: string }>(database, "SELECT tablename AS t FROM pg_tables WHERE schemaname = 'public' AND tablename LIKE 'svc\\_%'")
  ).map((r) => r.t);
const oidOf = async (name: string) =>
  (await adminQuery<{ oid: string }>('SELECT oid::text AS oid FROM pg_database WHERE datname = $1', [name]))[0]?.oid;
const copiesOf = async (oid: string) => ({
  databases: (await adminQuery<{ datname: string }>('SELECT datname FROM pg_database WHERE datname LIKE $1', [`svcrb\\_${oid}\\_%`])).map(
    (r) => r.datname,
  ),
  files: readdirSync(store).filter((n) => n.startsWith(`svcrb_${oid}_`)),
});
const flagOf = (name: string) => path.join(base, 'data', 'svc-maintenance', name);

describe('staging copies and rollouts', { timeout: TIMEOUT_MS }, () => {
  it("a rollout marks the host's copies stale; they are refreshed (-u all, neutralized again) and up to date", async () => {
    const { sub, row, name } = await stagingCopy('ok');
    const oid = (await oidOf(name))!;
    const sha = 'a1'.repeat(20);
    const rolloutId = await rollout(sha);
    expect(await listed(sub.id)).toMatchObject({ id: row.id, state: 'ready', stale_commit: sha, stale_rollout_id: rolloutId });

    const { queued, jobs } = await follow();
    expect(queued).toContain(row.id);
    const job = jobs[queued.indexOf(row.id)]!;
    expect(job.state, JSON.stringify(job)).toBe('completed');
    expect(job.result).toMatchObject({ state: 'ready', updated_to: sha });
    expect(await listed(sub.id)).toMatchObject({ state: 'ready', stale_commit: null, stale_rollout_id: null, error: null });
    expect(await tables(name)).toEqual(['svc_updated']);
    // The update turned a cron back on; the copy was neutralized again.
    expect(await queryIn(name, 'SELECT active FROM ir_cron')).toEqual([{ active: false }]);
    expect(readFileSync(path.join(store, name, 'attachment'), 'utf8')).toBe('v1');
    expect(await oidOf(name)).toBe(oid);
    expect(await copiesOf(oid)).toEqual({ databases: [], files: [] });
    expect(existsSync(flagOf(name))).toBe(false);
    const notes = await t.ctx.db.message.findMany({ where: { model_name: 'svc.subscription', rec_id: sub.id } });
    expect(notes.filter((m) => m.body.startsWith(`Staging copy ${name} was updated to commit ${sha.slice(0, 12)}`))).toHaveLength(1);
    // Nothing stale is left to follow.
    expect((await follow()).queued).not.toContain(row.id);
  });

  it('a failed refresh puts the copy back (database, filestore), keeps it stale and says why; the operator runs it again', async () => {
    const { sub, row, name } = await stagingCopy('fail');
    const oid = (await oidOf(name))!;
    const sha = 'b2'.repeat(20);
    await rollout(sha);
    const { queued, jobs } = await follow();
    const job = jobs[queued.indexOf(row.id)]!;
    expect(job.state).toBe('failed');
    expect(job.error).toContain(`Staging copy ${name} was not updated to commit ${sha.slice(0, 12)}: it was put back as it was`);
    expect(job.error).toContain('the new code refuses this copy');

    const item = await listed(sub.id);
    expect(item).toMatchObject({ state: 'ready', stale_commit: sha });
    expect(item.error).toContain('the new code refuses this copy');
    expect(await tables(name)).toEqual([]);
    expect(existsSync(path.join(store, name, 'written-by-the-update'))).toBe(false);
    expect(readFileSync(path.join(store, name, 'attachment'), 'utf8')).toBe('v1');
    // Put back from the safety copy: the copy's database is the safety copy now, and known by its oid.
    const now = (await oidOf(name))!;
    expect(now).not.toBe(oid);
    expect(String((await t.ctx.db.stagingInstance.findUniqueOrThrow({ where: { id: row.id } })).database_oid)).toBe(now);
    expect(await copiesOf(oid)).toEqual({ databases: [], files: [] });
    expect(existsSync(flagOf(name))).toBe(false);
    const alerts = await t.ctx.db.message.findMany({
      where: { model_name: 'svc.subscription', rec_id: sub.id, body: { startsWith: 'refresh_failed' } },
    });
    expect(alerts).toHaveLength(1);
    expect(alerts[0]!.subtype_xmlid).toBe('mail.mt_alert');

    // Not retried by itself; the operator's refresh runs it again (and it fails the same way).
    expect((await follow()).queued).not.toContain(row.id);
    const res = await request(t.app, t.as.operator, {
      method: 'POST',
      url: `/api/v1/subscriptions/${sub.id}/staging-instances/${row.id}/actions/refresh`,
    });
    expect(res.statusCode, res.body).toBe(202);
    expect((await waitForJob(t.app, t.as.operator, res.json().job_id, 120_000)).state).toBe('failed');
    expect(await tables(name)).toEqual([]);
    expect((await listed(sub.id)).stale_commit).toBe(sha);
  });

  it('a refresh cut short by a crash is put back and run again; a copy being made or refreshed is neither refreshed nor dropped (409)', async () => {
    const { sub, row, name } = await stagingCopy('ok');
    const oid = (await oidOf(name))!;
    // What a worker that died during the update leaves: the copy refreshing, its safety copy recorded, the update half done.
    const copy = `svcrb_${oid}_crashed`;
    const pg = await t.ctx.db.postgresqlServer.findUniqueOrThrow({ where: { id: fx.serverId } });
    const copyOid = await makeSafetyCopy(t.ctx.secretBox, pg, name, copy);
    execFileSync('cp', ['-al', path.join(store, name), path.join(store, copy)]);
    await t.ctx.db.stagingInstance.update({
      where: { id: row.id },
      data: { state: 'refreshing', database_oid: BigInt(oid), safety_copy: copy, safety_copy_oid: copyOid },
    });
    await queryIn(name, 'CREATE TABLE svc_half_done ()');
    writeFileSync(path.join(store, name, 'written-by-the-update'), 'x');
    const drop = await request(t.app, t.as.operator, {
      method: 'DELETE',
      url: `/api/v1/subscriptions/${sub.id}/staging-instances/${row.id}`,
    });
    expect(drop.statusCode, drop.body).toBe(409);
    expect(drop.body).toContain('being refreshed');

    const { queued, jobs } = await follow();
    const job = jobs[queued.indexOf(row.id)]!;
    expect(job.state, JSON.stringify(job)).toBe('completed');
    expect(await tables(name)).toEqual(['svc_updated']);
    expect(existsSync(path.join(store, name, 'written-by-the-update'))).toBe(false);
    expect(await oidOf(name)).toBe(String(copyOid));
    expect(await copiesOf(oid)).toEqual({ databases: [], files: [] });
    expect(await copiesOf(String(copyOid))).toEqual({ databases: [], files: [] });

    const creating = await stagingCopy('ok', 'creating');
    const refused = await request(t.app, t.as.operator, {
      method: 'POST',
      url: `/api/v1/subscriptions/${creating.sub.id}/staging-instances/${creating.row.id}/actions/refresh`,
    });
    expect(refused.statusCode, refused.body).toBe(409);
    expect(refused.body).toContain('only a ready copy is refreshed');
  });

  it('a copy that failed and whose removal failed too says so in the chatter, not that it was removed', async () => {
    const { sub, row, name } = await stagingCopy('ok', 'creating');
    // Its PostgreSQL server no longer known: the copy fails, and what it made cannot be dropped.
    await t.ctx.db.stagingInstance.update({ where: { id: row.id }, data: { postgresql_server_id: null } });
    const job = await t.ctx.queues.enqueue(stagingJobs.staging_create, { staging_instance_id: row.id, user_id: null });
    expect((await waitForJob(t.app, t.as.operator, job, 120_000)).state).toBe('failed');
    const bodies = (await t.ctx.db.message.findMany({ where: { model_name: 'svc.subscription', rec_id: sub.id } })).map((m) => m.body);
    const said = bodies.find((b) => b.startsWith(`Staging copy ${name} failed`));
    expect(said).toMatch(/failed and could not be removed \(The PostgreSQL server of staging copy .* is not known\): drop it: /);
    expect(said).not.toContain('was removed');
    expect((await t.ctx.db.stagingInstance.findUniqueOrThrow({ where: { id: row.id } })).state).toBe('failed');
  });
});
