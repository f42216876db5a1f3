// A database template's `update` on the real PostgreSQL, Redis and sshd (the host: this machine,
// through sudo), with a stand-in odoo-bin that either "updates" the template (a table) or writes part
// of its work (a table, a filestore file) and fails as Odoo does. A failed update is undone from its
// safety copy (database, filestore) and the template's identity follows the copy, so it stays the
// template; an update cut short by a crash is put back by the next one, which then updates it once;
// a successful update leaves no copy and keeps the template's oid. (The real Odoo:
// test-odoo/odoo-template-update.test.ts.)
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeSafetyCopy } from '../src/instances/safety-copy.js';
import { confirmedRootServer, request, waitForJob } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';
import { createOdooTemplate, queryIn } from './helpers/odoo-template.js';
import { adminQuery, dropDatabase } from './helpers/pg.js';
import { TEST_USERS, useSshd } from './helpers/sshd.js';

const base = mkdtempSync(path.join(tmpdir(), 'svc-template-update-'));
chmodSync(base, 0o755);
const PORT = 18797;
const VERSION = `template-update-test-${process.pid}`;
const source = path.join(base, 'versions', VERSION);
const store = path.join(base, 'data', 'filestore');

// The stand-in: `--version`, `shell` (the asset bundles: none), or `-d <db> ... -u all`; behaviour.json says what the update does.
const FAKE_ODOO_BIN = `
import json, os, subprocess, sys
args = sys.argv[1:]
if "--version" in args:
    print("Odoo Server 18.0")
    sys.exit(0)
if args[0] == "shell":
    # The first pages' asset bundles (template-assets.py on stdin): a stand-in has none to make.
    sys.stdin.read()
    print("assets=[]")
    sys.exit(0)
db = args[args.index("-d") + 1]
here = os.path.dirname(os.path.abspath(__file__))
how = json.load(open(os.path.join(here, "behaviour.json"))).get(db, "ok")
def sql(q):
    subprocess.run(["psql", "-q", "-h", "127.0.0.1", "-U", "svc_test_tenant", "-d", db, "-c", q], check=True)
if how == "ok":
    sql("CREATE TABLE IF NOT EXISTS ir_module_module (name varchar, state varchar); INSERT INTO ir_module_module VALUES ('svc_instance', 'installed'); CREATE TABLE svc_updated ()")
    sys.exit(0)
sql("CREATE TABLE svc_half_done ()")
open(os.path.join(${JSON.stringify(store)}, db, "written-by-the-update"), "w").write("x")
print("2026-11-30 12:00:00,000 1 INFO %s odoo.modules.loading: Loading module demo (3/3)" % db)
print("2026-11-30 12:00:01,000 1 CRITICAL %s odoo.service.server: Failed to initialize database" % db)
print("ValueError: the new code refuses this template")
sys.exit(1)
`;

// Each test deploys, copies databases and runs several root sessions over SSH: seconds alone, several
// times that beside the real-Odoo suite on a 2-core machine.
const TIMEOUT_MS = 120_000;
const sshd = useSshd();
const t = useTestApp({ workers: true, env: () => ({ ODOO_BASE_PATH: base }) });
let hostId: number;
let pgServerId: number;
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
  const server = await request(t.app, t.as.operator, {
    method: 'POST',
    url: '/api/v1/postgresql-servers',
    payload: { name: 'local', ip: '127.0.0.1', port: 5432, username: 'postgres' },
  });
  expect(server.statusCode, server.body).toBe(201);
  pgServerId = server.json().id;
  const version = await t.ctx.db.odooVersion.create({
    data: { name: VERSION, source_url: 'file:///none.tar.gz', source_sha256: 'a'.repeat(64) },
  });
  await t.ctx.db.rootServer.update({
    where: { id: hostId },
    data: {
      odoo_state: 'running',
      odoo_http_port: PORT,
      odoo_version_id: version.id,
      odoo_postgresql_server_id: pgServerId,
      odoo_db_user: 'svc_test_tenant',
    },
  });
});
afterAll(async () => {
  for (const name of made) await dropDatabase(name);
  rmSync(base, { recursive: true, force: true });
});

/** A template on the host (its database the tenant role's, as the host's Odoo makes it), checked once (its identity recorded), with a file. */
async function template(behaviour: 'ok' | 'fail') {
  const name = `${t.ctx.dbName}_tu${made.length}`;
  made.push(name);
  await createOdooTemplate(name);
  mkdirSync(path.join(store, name), { recursive: true });
  writeFileSync(path.join(store, name, 'attachment'), 'v1');
  execFileSync('chmod', ['-R', 'a+rwX', path.join(store, name)]);
  writeFileSync(path.join(source, 'behaviour.json'), JSON.stringify({ [name]: behaviour }));
  const created = await request(t.app, t.as.operator, {
    method: 'POST',
    url: '/api/v1/database-templates',
    payload: { name, postgresql_server_id: pgServerId, template_db_name: name, root_server_id: hostId },
  });
  expect(created.statusCode, created.body).toBe(201);
  const id = created.json().id as number;
  const checked = await request(t.app, t.as.operator, { method: 'POST', url: `/api/v1/database-templates/${id}/actions/check` });
  expect(checked.statusCode, checked.body).toBe(200);
  return { id, name };
}

const update = async (id: number) => {
  const res = await request(t.app, t.as.operator, { method: 'POST', url: `/api/v1/database-templates/${id}/actions/update` });
  expect(res.statusCode, res.body).toBe(202);
  return waitForJob(t.app, t.as.operator, res.json().job_id, 120_000);
};
const tables = async (database: string) =>
  (
    await queryIn<{ t: string }>(database, "SELECT tablename AS t FROM pg_tables WHERE schemaname = 'public' AND tablename LIKE 'svc\\_%'")
  ).map((r) => r.t);
const oidOf = async (name: string) =>
  (await adminQuery<{ oid: string }>('SELECT oid::text AS oid FROM pg_database WHERE datname = $1', [name]))[0]?.oid;
/** What is left of safety copies of this template's (named after the oid it had). */
const leftovers = async (oid: string) => ({
  databases: (await adminQuery<{ datname: string }>('SELECT datname FROM pg_database WHERE datname LIKE $1', [`svcrb\\_${oid}\\_%`])).map(
    (r) => r.datname,
  ),
  files: readdirSync(store).filter((n) => n.startsWith(`svcrb_${oid}_`)),
});
const identity = async (id: number) => {
  const record = await t.ctx.db.databaseTemplate.findUniqueOrThrow({ where: { id } });
  return { oid: String(record.template_oid), copy: record.update_safety_copy };
};

describe('a template update', { timeout: TIMEOUT_MS }, () => {
  it('that fails is undone from its safety copy (database, filestore), says why, and the template stays the template', async () => {
    const { id, name } = await template('fail');
    const oidBefore = (await oidOf(name))!;
    const job = await update(id);
    expect(job.state).toBe('failed');
    expect(job.error).toMatch(
      /^The template was put back as it was before the update \(database and filestore, from its safety copy; oid \d+ now\)\. /,
    );
    expect(job.error).toContain('the new code refuses this template');

    // As it was: no half-done table, its filestore without the update's file.
    expect(await tables(name)).toEqual([]);
    expect(readFileSync(path.join(store, name, 'attachment'), 'utf8')).toBe('v1');
    expect(existsSync(path.join(store, name, 'written-by-the-update'))).toBe(false);
    expect(await leftovers(oidBefore)).toEqual({ databases: [], files: [] });
    // Its identity follows the copy it was put back from: check (and every copy) accepts it.
    const oidNow = (await oidOf(name))!;
    expect(oidNow).not.toBe(oidBefore);
    expect(await identity(id)).toEqual({ oid: oidNow, copy: null });
    const checked = await request(t.app, t.as.operator, { method: 'POST', url: `/api/v1/database-templates/${id}/actions/check` });
    expect(checked.statusCode, checked.body).toBe(200);
    const messages = (
      await t.ctx.db.message.findMany({ where: { model_name: 'svc.database.template', rec_id: id }, orderBy: { id: 'asc' } })
    ).map((m) => m.body);
    expect(messages.filter((b) => b.startsWith('update failed: The template was put back'))).toHaveLength(1);
    expect(messages.filter((b) => b.includes('the new code refuses this template'))).toHaveLength(1);
    expect(messages.filter((b) => b.includes(`identity recorded (put back from its safety copy after a failed update)`))).toHaveLength(1);
    expect(messages.filter((b) => b.includes('is not the database this template was built'))).toEqual([]);
  });

  it('cut short by a crash is put back by the next update, which then updates it once', async () => {
    const { id, name } = await template('ok');
    const oidBefore = (await oidOf(name))!;
    // What a worker that died during the update leaves: the copy made and recorded, the template half-updated.
    const copy = `svcrb_${oidBefore}_crashed`;
    const pg = await t.ctx.db.postgresqlServer.findUniqueOrThrow({ where: { id: pgServerId } });
    const copyOid = await makeSafetyCopy(t.ctx.secretBox, pg, name, copy);
    execFileSync('cp', ['-al', path.join(store, name), path.join(store, copy)]);
    await t.ctx.db
      .$executeRaw`UPDATE database_templates SET update_safety_copy = ${copy}, update_safety_copy_oid = ${copyOid} WHERE id = ${id}`;
    await queryIn(name, 'CREATE TABLE svc_half_done ()');
    writeFileSync(path.join(store, name, 'written-by-the-update'), 'x');

    const job = await update(id);
    expect(job.state, JSON.stringify(job)).toBe('completed');
    expect(await tables(name)).toEqual(['svc_updated']);
    expect(existsSync(path.join(store, name, 'written-by-the-update'))).toBe(false);
    expect(readFileSync(path.join(store, name, 'attachment'), 'utf8')).toBe('v1');
    expect(await identity(id)).toEqual({ oid: String(copyOid), copy: null });
    expect(await oidOf(name)).toBe(String(copyOid));
    expect(await leftovers(oidBefore)).toEqual({ databases: [], files: [] });
    expect(await leftovers(String(copyOid))).toEqual({ databases: [], files: [] });
  });

  it('that succeeds drops its safety copy; the template keeps its oid', async () => {
    const { id, name } = await template('ok');
    const oidBefore = (await oidOf(name))!;
    const job = await update(id);
    expect(job.state, JSON.stringify(job)).toBe('completed');
    expect(await tables(name)).toEqual(['svc_updated']);
    expect(await identity(id)).toEqual({ oid: oidBefore, copy: null });
    expect(await leftovers(oidBefore)).toEqual({ databases: [], files: [] });
  });
});
