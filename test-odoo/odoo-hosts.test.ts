// setup_odoo, restart_odoo, stop_odoo and odoo_status with a real Odoo on this machine, for every
// source of ODOO_SOURCE: each version its own root server record, service and port on the one host.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmod, mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, test } from 'vitest';
import { request } from '../test/helpers/api.js';
import { withConfig } from '../test/helpers/app.js';
import { freePort } from '../test/helpers/sshd.js';
import { adminQuery } from '../test/helpers/pg.js';
import { passlibVerifies } from '../test/helpers/customer-credentials.js';
import { queryIn } from '../test/helpers/odoo-template.js';
import { jsonRpc, odooGet, odooSources, packagesOf, serverWideModulesOf, useOdooFixture } from './odoo-fixture.js';

const sources = odooSources();
const f = useOdooFixture();

/** A source tarball of one top directory holding `files`, in a fresh directory the host reads, and its SHA-256. */
async function tarballOf(top: string, files: Record<string, string>) {
  const dir = await mkdtemp(path.join(tmpdir(), 'svc-odoo-source-'));
  await mkdir(path.join(dir, top));
  for (const [name, text] of Object.entries(files)) await writeFile(path.join(dir, top, name), text);
  const tarball = path.join(dir, `${top}.tar.gz`);
  execFileSync('tar', ['-czf', tarball, '-C', dir, top]);
  await chmod(dir, 0o755);
  const sha = createHash('sha256')
    .update(await readFile(tarball))
    .digest('hex');
  return { dir, tarball, sha };
}

/** What each version's tests made, for the tests after them. */
const made: { host: number; versionId: number; pid: string; port: number; templateId: number }[] = [];

describe.each(sources.map((s, i) => ({ ...s, port: 18069 + 100 * i, index: i })))('Odoo $name', (src) => {
  const ctx = { port: src.port } as (typeof made)[number];
  made[src.index] = ctx;

  test('setup_odoo on a fresh directory installs and runs it, healthy, as the host role', async () => {
    const version = await f.newVersion({
      name: src.name,
      source_url: `file://${src.file}`,
      source_sha256: src.sha256,
      os_packages: packagesOf(src.series),
      server_wide_modules: serverWideModulesOf(src.series),
    });
    ctx.versionId = version.id;
    ctx.host = await f.newHost();
    const job = await f.runJob(ctx.host, 'setup_odoo', {
      odoo_version_id: version.id,
      postgresql_server_id: f.pgServerId,
      http_port: src.port,
      workers: 2,
      max_cron_threads: 0,
    });
    expect(job.state, JSON.stringify(job)).toBe('completed');
    const result = job.result as Record<string, unknown>;
    expect(result).toMatchObject({ odoo_state: 'running', http_port: src.port, workers: 2, restarted: true });
    expect(String(result.version)).toContain(`Odoo Server ${src.series}`);

    const server = await f.server(ctx.host);
    expect(server).toMatchObject({
      odoo_state: 'running',
      odoo_version_id: version.id,
      odoo_http_port: src.port,
      odoo_error: null,
      odoo_postgresql_server_id: f.pgServerId,
      odoo_db_password_set: true,
      odoo_admin_passwd_set: true,
    });
    expect(server).not.toHaveProperty('odoo_db_password');
    const health = await odooGet(src.port, '/web/health');
    expect(health.status).toBe(200);

    // The role: its own, never a superuser.
    const [role] = await adminQuery<{ rolsuper: boolean; rolcreatedb: boolean; rolcanlogin: boolean; rolcreaterole: boolean }>(
      'SELECT rolsuper, rolcreatedb, rolcanlogin, rolcreaterole FROM pg_roles WHERE rolname = $1',
      [server.odoo_db_user],
    );
    expect(role).toEqual({ rolsuper: false, rolcreatedb: true, rolcanlogin: true, rolcreaterole: false });

    // The configuration: root and odoo only, the settings a hosted Odoo needs, no clear master password.
    const conf = `${f.base}/config/odoo-${src.port}.conf`;
    const st = await stat(conf);
    expect(st.mode & 0o777).toBe(0o640);
    expect(st.uid).toBe(0);
    const text = await readFile(conf, 'utf8');
    for (const line of [
      'http_interface = 127.0.0.1',
      `http_port = ${src.port}`,
      'proxy_mode = True',
      'list_db = False',
      `data_dir = ${f.base}/data`,
      'max_cron_threads = 0',
      'workers = 2',
      `db_user = ${server.odoo_db_user}`,
    ]) {
      expect(text).toContain(`\n${line}\n`);
    }
    expect(text).toMatch(/\nadmin_passwd = \$pbkdf2-sha512\$600000\$/);
    ctx.pid = await readFile(`${f.base}/run/odoo-${src.port}/pid`, 'utf8');
  });

  test('setup_odoo again changes nothing and the service keeps running', async () => {
    const job = await f.runJob(ctx.host, 'setup_odoo', {
      odoo_version_id: ctx.versionId,
      postgresql_server_id: f.pgServerId,
      http_port: src.port,
      workers: 2,
      max_cron_threads: 0,
    });
    expect(job.state, JSON.stringify(job)).toBe('completed');
    expect(job.result).toMatchObject({ restarted: false, changed: { source: false, config: false, service: false } });
    expect(await readFile(`${f.base}/run/odoo-${src.port}/pid`, 'utf8')).toBe(ctx.pid);
    expect((await odooGet(src.port, '/web/health')).status).toBe(200);
  });

  test('odoo_status reports health, version, workers and memory', async () => {
    const res = await request(f.t.app, f.t.as.operator, { method: 'POST', url: `/api/v1/root-servers/${ctx.host}/actions/odoo_status` });
    expect(res.statusCode, res.body).toBe(200);
    const status = res.json();
    expect(status).toMatchObject({ odoo_state: 'running', service: 'running', healthy: true, http_port: src.port, workers: 2 });
    expect(status.version).toContain(`Odoo Server ${src.series}`);
    expect(status.processes).toBeGreaterThanOrEqual(3); // the master and its two workers
    expect(status.worker_processes).toBeGreaterThanOrEqual(2);
    expect(status.memory_bytes).toBeGreaterThan(50 * 1024 * 1024);
    console.log(`Odoo ${src.name}: ${status.processes} processes, ${(status.memory_bytes / 1024 ** 2).toFixed(0)} MB`);
  });

  test('the database manager and db.list are closed', async () => {
    // Without the host's secret (svc's own calls carry it), /web/database/* is not found at all.
    const manager = await odooGet(src.port, '/web/database/manager');
    expect(manager.status).toBe(404);
    const list = await jsonRpc(src.port, 'db', 'list', []);
    expect(list.body).not.toMatch(/"result"/);
    // Not even with Odoo's default master password.
    const create = await jsonRpc(src.port, 'db', 'create_database', ['admin', 'svc_odoo_t_intruder', false, 'en_US', 'x', 'x']);
    expect(create.body).not.toMatch(/"result"/);
    expect(await adminQuery("SELECT 1 FROM pg_database WHERE datname = 'svc_odoo_t_intruder'")).toEqual([]);
  });

  test('stop_odoo stops it; restart_odoo brings it back', async () => {
    const stopped = await f.runJob(ctx.host, 'stop_odoo');
    expect(stopped.state, JSON.stringify(stopped)).toBe('completed');
    expect((await f.server(ctx.host)).odoo_state).toBe('stopped');
    await expect(odooGet(src.port, '/web/health')).rejects.toThrow();
    const restarted = await f.runJob(ctx.host, 'restart_odoo');
    expect(restarted.state, JSON.stringify(restarted)).toBe('completed');
    expect((await f.server(ctx.host)).odoo_state).toBe('running');
    expect((await odooGet(src.port, '/web/health')).status).toBe(200);
    ctx.pid = await readFile(`${f.base}/run/odoo-${src.port}/pid`, 'utf8');
  });

  test("build makes the template with the host's Odoo, owned by the host's role, with its filestore; update runs -u all", async () => {
    const server = await f.server(ctx.host);
    const name = `svc_odoo_t_tpl${src.series}_${Date.now().toString(36)}`;
    const created = await request(f.t.app, f.t.as.operator, {
      method: 'POST',
      url: '/api/v1/database-templates',
      payload: { name: `Odoo ${src.name} base`, postgresql_server_id: f.pgServerId, template_db_name: name, root_server_id: ctx.host },
    });
    expect(created.statusCode, created.body).toBe(201);
    const templateId = created.json().id;
    ctx.templateId = templateId;
    const job = await f.runJob(templateId, 'build', { modules: ['base'] }, 'database-templates');
    expect(job.state, JSON.stringify(job)).toBe('completed');
    expect(job.result).toMatchObject({ template_db_name: name, owner: server.odoo_db_user, modules: ['base', 'svc_instance', 'web'] });

    const [db] = await adminQuery<{ owner: string; rolsuper: boolean }>(
      'SELECT r.rolname AS owner, r.rolsuper FROM pg_database d JOIN pg_roles r ON r.oid = d.datdba WHERE d.datname = $1',
      [name],
    );
    expect(db).toEqual({ owner: server.odoo_db_user, rolsuper: false });
    const template = (await request(f.t.app, f.t.as.operator, { method: 'GET', url: `/api/v1/database-templates/${templateId}` })).json();
    expect(template).toMatchObject({ owner_role: server.odoo_db_user, owner_password_set: true, admin_password_set: true });
    // Its identity is recorded: a copy or an update refuses any other database renamed into its name.
    const [{ oid } = { oid: '' }] = await adminQuery<{ oid: string }>('SELECT oid::text AS oid FROM pg_database WHERE datname = $1', [
      name,
    ]);
    expect(template.template_oid).toBe(Number(oid));
    // Odoo's admin/admin does not sign in to the template; the random password svc keeps does (the
    // administrator's hash checked by passlib's pbkdf2_sha512, as Odoo's CryptContext checks it).
    const signsIn = async (password: string) => {
      const [admin] = await queryIn<{ login: string; password: string }>(
        name,
        `SELECT login, password FROM res_users WHERE id = (SELECT res_id FROM ir_model_data WHERE module = 'base' AND name = 'user_admin')`,
      );
      return admin!.login === 'admin' && passlibVerifies(password, admin!.password);
    };
    const row = await f.t.ctx.db.databaseTemplate.findUniqueOrThrow({ where: { id: templateId } });
    const adminPassword = (await f.t.ctx.secretBox.reveal(row.admin_password))!;
    expect(adminPassword.length).toBeGreaterThanOrEqual(20);
    expect(await signsIn('admin')).toBe(false);
    expect(await signsIn(adminPassword)).toBe(true);
    // Its filestore is Odoo's own, where svc copies filestores from.
    const filestore = `${f.base}/data/filestore/${name}`;
    const st = await stat(filestore);
    expect(st.isDirectory()).toBe(true);
    expect(st.uid).not.toBe(0);

    // A database that exists is never overwritten.
    const again = await request(f.t.app, f.t.as.operator, {
      method: 'POST',
      url: `/api/v1/database-templates/${templateId}/actions/build`,
      payload: { modules: ['base'] },
    });
    expect(again.statusCode, again.body).toBe(409);

    const updated = await f.runJob(templateId, 'update', undefined, 'database-templates');
    expect(updated.state, JSON.stringify(updated)).toBe('completed');
    expect(updated.result).toMatchObject({ template_db_name: name, updated: 'all', owner: server.odoo_db_user });
    // update keeps the template's administrator password.
    expect((await f.t.ctx.db.databaseTemplate.findUniqueOrThrow({ where: { id: templateId } })).admin_password).toBe(row.admin_password);
    expect(await signsIn('admin')).toBe(false);
    expect(await signsIn(adminPassword)).toBe(true);
  });

  test("a new password of the host's role (its secrets were cleared, as a move of the server does) reaches the templates it built", async () => {
    const { secretBox, db } = f.t.ctx;
    const before = await db.rootServer.findUniqueOrThrow({ where: { id: ctx.host } });
    await db.rootServer.update({ where: { id: ctx.host }, data: { odoo_db_password: null, odoo_admin_passwd: null } });
    const job = await f.runJob(ctx.host, 'setup_odoo', {
      odoo_version_id: ctx.versionId,
      postgresql_server_id: f.pgServerId,
      http_port: src.port,
      workers: 2,
      max_cron_threads: 0,
    });
    expect(job.state, JSON.stringify(job)).toBe('completed');
    const server = await db.rootServer.findUniqueOrThrow({ where: { id: ctx.host } });
    const password = await secretBox.reveal(server.odoo_db_password);
    expect(password).not.toBe(await secretBox.reveal(before.odoo_db_password));
    const template = await db.databaseTemplate.findUniqueOrThrow({ where: { id: ctx.templateId } });
    expect(await secretBox.reveal(template.owner_password)).toBe(password);
    ctx.pid = await readFile(`${f.base}/run/odoo-${src.port}/pid`, 'utf8');
  });
});

test('every version set up runs at the same time, each on its own port', async () => {
  for (const [i] of sources.entries()) expect((await odooGet(18069 + 100 * i, '/web/health')).status).toBe(200);
});

describe('bad input and failures', () => {
  const first = () => made[0]!;
  const setupBody = (over: Record<string, unknown> = {}) => ({
    odoo_version_id: first().versionId,
    postgresql_server_id: f.pgServerId,
    http_port: first().port,
    workers: 2,
    max_cron_threads: 0,
    ...over,
  });
  const post = (url: string, payload: unknown, as = f.t.as.operator) =>
    request(f.t.app, as, { method: 'POST', url, payload: payload as object });

  /** The first version's Odoo still runs as it did: same process, same version, healthy. */
  async function stillRunning() {
    const server = await f.server(first().host);
    expect(server).toMatchObject({ odoo_state: 'running', odoo_version_id: first().versionId });
    expect(await readFile(`${f.base}/run/odoo-${first().port}/pid`, 'utf8')).toBe(first().pid);
    expect((await odooGet(first().port, '/web/health')).status).toBe(200);
  }

  test('a dbfilter, port, version name, package or module that could reach a shell or the configuration is refused before anything runs', async () => {
    const host = first().host;
    const logsBefore = await f.t.ctx.db.actionLog.count({ where: { model_name: 'svc.root.server', rec_id: host } });
    for (const over of [
      { dbfilter: '^%d$\nlist_db = True' },
      { dbfilter: '^%d$ ; rm -rf /' },
      { dbfilter: "'" },
      { dbfilter: '(' },
      { http_port: 80 },
      { http_port: '8069; id' },
      { workers: -1 },
      { odoo_version_id: 999_999 },
    ]) {
      const res = await post(`/api/v1/root-servers/${host}/actions/setup_odoo`, setupBody(over));
      expect(res.statusCode, `${JSON.stringify(over)}: ${res.body}`).toBe(400);
    }
    const version = { name: 'x', source_url: 'file:///srv/odoo.tar.gz', source_sha256: 'a'.repeat(64) };
    for (const over of [
      { name: '18.0; rm -rf /' },
      { name: '../../etc' },
      { name: '.hidden' },
      { name: '18 0' },
      { source_url: "file:///srv/it's.tar.gz" },
      { source_url: 'file:///srv/$(id).tar.gz' },
      { source_url: 'http://example.com/odoo.tar.gz' },
      { source_url: 'https://user:pw@example.com/odoo.tar.gz' },
      { source_sha256: 'abc' },
      { os_packages: ['python3-lxml; rm -rf /'] },
      { os_packages: ['-oAPT::Get=evil'] },
      { server_wide_modules: ['web,evil'] },
      { server_wide_modules: ['web\nlist_db = True'] },
    ]) {
      const res = await post('/api/v1/odoo-versions', { ...version, ...over }, f.t.as.admin);
      expect(res.statusCode, `${JSON.stringify(over)}: ${res.body}`).toBe(400);
    }
    // Operators read versions; only administrators write them.
    expect((await post('/api/v1/odoo-versions', version)).statusCode).toBe(403);
    expect((await request(f.t.app, f.t.as.operator, { method: 'GET', url: '/api/v1/odoo-versions' })).statusCode).toBe(200);
    expect(await f.t.ctx.db.actionLog.count({ where: { model_name: 'svc.root.server', rec_id: host } })).toBe(logsBefore);
  });

  test('a checksum that differs fails naming it, and the running Odoo keeps its version', async () => {
    const src = sources[0]!;
    const bad = await f.newVersion({
      name: `${src.name}-badsum`,
      source_url: `file://${src.file}`,
      source_sha256: '0'.repeat(64),
      os_packages: packagesOf(src.series),
    });
    const job = await f.runJob(first().host, 'setup_odoo', setupBody({ odoo_version_id: bad.id }));
    expect(job.state).toBe('failed');
    expect(job.error).toContain(`Checksum mismatch: the source's SHA-256 is ${src.sha256}`);
    await stillRunning();
  });

  test('a source that is not there, or holds no odoo-bin, fails naming it', async () => {
    const src = sources[0]!;
    const missing = await f.newVersion({
      name: `${src.name}-missing`,
      source_url: 'file:///nonexistent/odoo.tar.gz',
      source_sha256: src.sha256,
      os_packages: packagesOf(src.series),
    });
    const gone = await f.runJob(first().host, 'setup_odoo', setupBody({ odoo_version_id: missing.id }));
    expect(gone.state).toBe('failed');
    expect(gone.error).toContain('The source /nonexistent/odoo.tar.gz does not exist on the host');

    const { dir, tarball, sha } = await tarballOf('tree', { README: 'not Odoo' });
    const notOdoo = await f.newVersion({
      name: `${src.name}-notodoo`,
      source_url: `file://${tarball}`,
      source_sha256: sha,
      os_packages: packagesOf(src.series),
    });
    const refused = await f.runJob(first().host, 'setup_odoo', setupBody({ odoo_version_id: notOdoo.id }));
    expect(refused.state).toBe('failed');
    expect(refused.error).toContain('The tarball holds no odoo-bin');
    await stillRunning();
    await rm(dir, { recursive: true, force: true });
  });

  test('an https source that does not answer fails naming it', async () => {
    const src = sources[0]!;
    const port = await freePort();
    const url = `https://127.0.0.1:${port}/odoo.tar.gz`;
    const v = await f.newVersion({
      name: `${src.name}-unreachable`,
      source_url: url,
      source_sha256: src.sha256,
      os_packages: packagesOf(src.series),
    });
    const job = await f.runJob(first().host, 'setup_odoo', setupBody({ odoo_version_id: v.id }));
    expect(job.state).toBe('failed');
    expect(job.error).toContain(`Downloading the source of Odoo ${v.name} failed`);
    expect(job.error).toMatch(/refused|ECONNREFUSED/i);
    await stillRunning();
  });

  test('an Odoo that does not become healthy is failed with the end of its log', async () => {
    const script =
      "import sys\nif '--version' in sys.argv:\n    print('Odoo Server 18.0')\nelse:\n    print('fake Odoo: refusing to serve', flush=True)\n    sys.exit(1)\n";
    const { dir, tarball, sha } = await tarballOf('fake-odoo', { 'odoo-bin': script });
    const fake = await f.newVersion({
      name: 'fake-18.0',
      source_url: `file://${tarball}`,
      source_sha256: sha,
      os_packages: ['python3-lxml'],
    });
    const host = await f.newHost();
    const job = await withConfig(f.t, { ODOO_HEALTH_TIMEOUT_MS: 6000 }, () =>
      f.runJob(host, 'setup_odoo', { odoo_version_id: fake.id, postgresql_server_id: f.pgServerId, http_port: 18569, max_cron_threads: 0 }),
    );
    expect(job.state).toBe('failed');
    expect(job.error).toContain('did not become healthy');
    const server = await f.server(host);
    expect(server.odoo_state).toBe('failed');
    expect(server.odoo_error).toContain('fake Odoo: refusing to serve');
    expect((await f.runJob(host, 'stop_odoo')).state).toBe('completed');
    await rm(dir, { recursive: true, force: true });
    await stillRunning();
  });

  test("build with a module that does not exist fails with Odoo's words and leaves nothing behind (one version: each build costs a base install)", async () => {
    const name = `svc_odoo_t_bad${sources[0]!.series}_${Date.now().toString(36)}`;
    const created = await request(f.t.app, f.t.as.operator, {
      method: 'POST',
      url: '/api/v1/database-templates',
      payload: {
        name: `Odoo ${sources[0]!.name} broken`,
        postgresql_server_id: f.pgServerId,
        template_db_name: name,
        root_server_id: first().host,
      },
    });
    expect(created.statusCode, created.body).toBe(201);
    const bad = await request(f.t.app, f.t.as.operator, {
      method: 'POST',
      url: `/api/v1/database-templates/${created.json().id}/actions/build`,
      payload: { modules: ['base; rm -rf /'] },
    });
    expect(bad.statusCode).toBe(400);
    const job = await f.runJob(created.json().id, 'build', { modules: ['base', 'svc_no_such_module'] }, 'database-templates');
    expect(job.state).toBe('failed');
    expect(job.error).toContain('svc_no_such_module');
    expect(await adminQuery('SELECT 1 FROM pg_database WHERE datname = $1', [name])).toEqual([]);
    await expect(stat(`${f.base}/data/filestore/${name}`)).rejects.toThrow();
    expect((await odooGet(first().port, '/web/health')).status).toBe(200);
  });

  test('nothing secret reaches the action log, the chatter, the jobs, the answers or the logs', async () => {
    const secrets: string[] = [];
    for (const m of made) {
      const row = await f.t.ctx.db.rootServer.findUniqueOrThrow({ where: { id: m.host } });
      for (const v of [row.odoo_db_password, row.odoo_admin_passwd]) secrets.push((await f.t.ctx.secretBox.reveal(v))!);
      const template = await f.t.ctx.db.databaseTemplate.findUniqueOrThrow({ where: { id: m.templateId } });
      secrets.push((await f.t.ctx.secretBox.reveal(template.admin_password))!);
    }
    expect(secrets.every((s) => s.length >= 16)).toBe(true);
    const texts = [
      JSON.stringify(await f.t.ctx.db.actionLog.findMany()),
      JSON.stringify(await f.t.ctx.db.message.findMany()),
      f.t.ctx.logText(),
      JSON.stringify(await Promise.all(made.map((m) => f.server(m.host)))),
    ];
    for (const queue of ['odoo']) {
      const jobs = await f.t.ctx.queues.queue(queue).getJobs(['completed', 'failed']);
      texts.push(JSON.stringify(jobs.map((j) => ({ data: j.data, result: j.returnvalue, reason: j.failedReason, progress: j.progress }))));
    }
    for (const text of texts) for (const secret of secrets) expect(text).not.toContain(secret);
    // The configuration is in the action log, with the mask in place of the secrets.
    const written = await f.t.ctx.db.actionLog.findFirst({ where: { input_text: { contains: 'db_password = ********' } } });
    expect(written).not.toBeNull();
  });
});
