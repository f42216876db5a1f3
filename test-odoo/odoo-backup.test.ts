// svc's own backup server on the real Odoo (18.0 and 19.0): a tenant deployed on a host svc set
// up gets a record and an uploaded file as its customer (JSON-RPC through the host as svc's proxy
// forwards); svc's backup action with svc's backup server (useBackupServer) stores it as one unit
// (the listed backup done with its filestore, the file counted, manifest.json naming the installed
// modules and the version); the file and the record are deleted (the file also from the filestore:
// Odoo's filestore GC does not run here) and svc's restore brings both back, the customer signing
// in; the backup server's verify restores that backup into a scratch database the host's Odoo
// serves and signs in to it. Then drop_database with its final backup; that backup's download
// (Odoo's backup zip, fetched over HTTP) is loaded by the host's own Odoo (`odoo-bin db load`) into
// a new database, which serves the customer's login and the file. Odoo's ports: 19600 (first source), 19650.
import { execFile } from 'node:child_process';
import { chmod, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { existsSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { request, waitForJob } from '../test/helpers/api.js';
import { useBackupServer } from '../test/helpers/backup-server.js';
import { credentialsIn } from '../test/helpers/customer-credentials.js';
import { queryIn } from '../test/helpers/odoo-template.js';
import { adminQuery } from '../test/helpers/pg.js';
import { textOf, useSmtpServer } from '../test/helpers/smtp.js';
import { jsonRpc, odooSources, rpcResult, useOdooFixture } from './odoo-fixture.js';
import { deploySubscription, useOdooHost } from './odoo-host.js';

const run = promisify(execFile);
const sources = odooSources();
const smtp = useSmtpServer();
const f = useOdooFixture({
  get SMTP_URL() {
    return smtp.url;
  },
  SUBSCRIPTION_URL: 'https://{database_name}.odoo.test',
  STAGING_URL: 'https://{database_name}.staging.test',
  BACKUP_POLL_MS: '500',
} as Record<string, string>);
const bs = useBackupServer(f.t);

/** Databases loaded from a backup zip by Odoo itself: no svc record names them, so this file drops them. */
const loaded: string[] = [];
afterAll(async () => {
  for (const name of loaded) {
    await adminQuery(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`).catch(() => {});
    if (f.base) await rm(path.join(f.base, 'data', 'filestore', name), { recursive: true, force: true });
  }
}, 120_000);

async function unzipList(zip: string) {
  return (await run('unzip', ['-Z1', zip])).stdout.split('\n').filter(Boolean);
}

describe.each(sources.map((s, i) => ({ ...s, port: 19600 + 50 * i })))('backups on Odoo $name', (src) => {
  const made = useOdooHost(f, src, { name: 'backup', prefix: 'svc_odoo_b' });
  const stamp = Date.now().toString(36);
  const database = `svc_odoo_b_c${src.series}_${stamp}`;
  const email = `backup-${src.series}-${Date.now()}@example.com`;
  const fileText = `an uploaded file of ${database} ${Date.now()}`;
  const filestore = () => path.join(f.base, 'data', 'filestore', database);
  // The tenant as the first steps leave it, for the next.
  const tenant = { id: 0, login: '', password: '', uid: 0, partnerId: 0, attachmentId: 0, storeFname: '' };
  let done: Awaited<ReturnType<typeof bs.backups>>[number] | undefined;
  let work: string;
  let liveShape: Awaited<ReturnType<typeof shape>>;
  let finalUrl: string;

  const act = (name: string, caller = f.t.as.operator, payload?: object) =>
    request(f.t.app, caller, { method: 'POST', url: `/api/v1/subscriptions/${tenant.id}/actions/${name}`, payload });
  const job = async (name: string, caller = f.t.as.operator, payload?: object) => {
    const res = await act(name, caller, payload);
    expect(res.statusCode, res.body).toBe(202);
    return waitForJob(f.t.app, caller, res.json().job_id, 10 * 60_000);
  };
  // The customer, through the host as svc's proxy forwards (the tenant's database in X-Odoo-Database).
  const proxied = (db: string) => ({ 'x-odoo-database': db, 'x-forwarded-for': '203.0.113.9', 'x-forwarded-host': `${db}.odoo.test` });
  const signIn = async (db: string) =>
    rpcResult((await jsonRpc(src.port, 'common', 'authenticate', [db, tenant.login, tenant.password, {}], proxied(db))).body) as
      | number
      | false;
  const call = async (db: string, model: string, method: string, args: unknown[], kw: object = {}) =>
    rpcResult(
      (await jsonRpc(src.port, 'object', 'execute_kw', [db, tenant.uid, tenant.password, model, method, args, kw], proxied(db))).body,
    );
  const fileOf = (db: string) => path.join(f.base, 'data', 'filestore', db, tenant.storeFname);
  const filesOnHost = async (dir: string) =>
    (await readdir(dir, { withFileTypes: true, recursive: true })).filter((e) => e.isFile()).length;
  const download = async (url: string, name: string) => {
    const res = await fetch(url);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/zip');
    const file = path.join(work, name);
    await writeFile(file, Buffer.from(await res.arrayBuffer()), { mode: 0o644 });
    return file;
  };
  // What the copy loaded by Odoo must hold too: every table and every installed module.
  const shape = async (db: string) =>
    queryIn<{ tables: number; modules: string }>(
      db,
      `SELECT (SELECT count(*)::int FROM pg_catalog.pg_tables WHERE schemaname = 'public') AS tables,
              (SELECT string_agg(name, ',' ORDER BY name) FROM ir_module_module WHERE state = 'installed') AS modules`,
    );

  // The tenant: a trial deployed from the template, its customer's credentials mailed; a record and
  // an uploaded file of the customer's, the file in the filestore.
  beforeAll(async () => {
    work = await mkdtemp(path.join(tmpdir(), 'svc-odoo-backup-'));
    await chmod(work, 0o755);
    const deployed = await deploySubscription(f, { templateId: made.templateId, database, email });
    expect(deployed.job.state, deployed.job.error).toBe('completed');
    tenant.id = deployed.id;
    Object.assign(tenant, credentialsIn(textOf(await smtp.waitFor(email))));
    const uid = await signIn(database);
    expect(uid).toBeGreaterThan(0);
    tenant.uid = uid as number;
    tenant.partnerId = (await call(database, 'res.partner', 'create', [{ name: 'Backed-up partner' }])) as number;
    tenant.attachmentId = (await call(database, 'ir.attachment', 'create', [
      { name: 'backup-probe.txt', datas: Buffer.from(fileText).toString('base64') },
    ])) as number;
    const [stored] = await queryIn<{ store_fname: string }>(database, 'SELECT store_fname FROM ir_attachment WHERE id = $1', [
      tenant.attachmentId,
    ]);
    expect(stored?.store_fname, 'the attachment is a file in the filestore').toBeTruthy();
    tenant.storeFname = stored!.store_fname;
    expect(readFileSync(fileOf(database), 'utf8')).toBe(fileText);
  }, 15 * 60_000);
  afterAll(async () => {
    if (work) await rm(work, { recursive: true, force: true });
  });

  test("svc's backup action, with svc's own backup server: one unit, listed done with its filestore", async () => {
    const backup = await job('backup');
    expect(backup.state, backup.error).toBe('completed');
    [done] = await bs.backups(database);
    expect(done, JSON.stringify(done)).toMatchObject({ state: 'done', filestore: true, error: null });
    expect(done!.files).toBe(await filesOnHost(filestore()));
    expect(String((backup.result as { backup: { id: unknown } }).backup.id)).toBe(String(done!.id));
  });

  test("its download is Odoo's backup zip: the dump, the attachment's file, the manifest", async () => {
    const first = await download(done!.url!, 'first.zip');
    expect(await unzipList(first)).toEqual(expect.arrayContaining(['dump.sql', 'manifest.json', `filestore/${tenant.storeFname}`]));
    const manifest = JSON.parse((await run('unzip', ['-p', first, 'manifest.json'])).stdout);
    const installed = await queryIn<{ name: string; latest_version: string }>(
      database,
      "SELECT name, latest_version FROM ir_module_module WHERE state = 'installed' ORDER BY name",
    );
    expect(manifest).toMatchObject({
      odoo_dump: '1',
      db_name: database,
      version: src.name,
      major_version: src.name,
      modules: Object.fromEntries(installed.map((m) => [m.name, m.latest_version])),
    });
    expect(Object.keys(manifest.modules)).toEqual(expect.arrayContaining(['base', 'web']));
  });

  test('after the record and file are lost, a staging copy made from that backup has them, neutralized, its own role; the live instance unchanged', async () => {
    // The file and the record are lost: unlinked by the customer, the file gone from the filestore.
    const { partnerId, attachmentId } = tenant;
    await call(database, 'ir.attachment', 'unlink', [[attachmentId]]);
    await call(database, 'res.partner', 'unlink', [[partnerId]]);
    await rm(fileOf(database));
    expect(await call(database, 'res.partner', 'search_count', [[['id', '=', partnerId]]])).toBe(0);

    // create_staging with backup_id: the record and the file are in the copy, neutralized, with its
    // own role and address; the live instance is unchanged.
    const asked = await act('create_staging', f.t.as.operator, { backup_id: done!.id });
    expect(asked.statusCode, asked.body).toBe(202);
    const staged = await waitForJob(f.t.app, f.t.as.operator, asked.json().job_id, 10 * 60_000);
    expect(staged.state, staged.error).toBe('completed');
    const stagingCopy = (staged.result as { database_name: string }).database_name;
    expect(await signIn(stagingCopy)).toBe(tenant.uid);
    expect(await call(stagingCopy, 'res.partner', 'search_count', [[['id', '=', tenant.partnerId]]])).toBe(1);
    const [copied] = (await call(stagingCopy, 'ir.attachment', 'read', [[tenant.attachmentId], ['datas']])) as { datas: string }[];
    expect(Buffer.from(copied!.datas, 'base64').toString()).toBe(fileText);
    const [neutral] = await queryIn<{ value: string }>(
      stagingCopy,
      "SELECT value FROM ir_config_parameter WHERE key = 'database.is_neutralized'",
    );
    expect(neutral?.value).toBe('true');
    const [copyOwner, liveOwner] = await Promise.all(
      [stagingCopy, database].map(
        async (db) =>
          (await adminQuery<{ o: string }>('SELECT pg_get_userbyid(datdba) AS o FROM pg_database WHERE datname = $1', [db]))[0]!.o,
      ),
    );
    expect(copyOwner).not.toBe(liveOwner);
    expect(await call(database, 'res.partner', 'search_count', [[['id', '=', tenant.partnerId]]])).toBe(0);
    const listedCopy = await request(f.t.app, f.t.as.operator, {
      method: 'GET',
      url: `/api/v1/subscriptions/${tenant.id}/staging-instances`,
    });
    expect(listedCopy.json().items).toEqual([expect.objectContaining({ database_name: stagingCopy, state: 'ready', backup_id: done!.id })]);
    const dropCopy = await request(f.t.app, f.t.as.operator, {
      method: 'DELETE',
      url: `/api/v1/subscriptions/${tenant.id}/staging-instances/${listedCopy.json().items[0].id}`,
    });
    expect(dropCopy.statusCode, dropCopy.body).toBe(202);
    expect((await waitForJob(f.t.app, f.t.as.operator, dropCopy.json().job_id, 5 * 60_000)).state).toBe('completed');
  });

  test("svc's restore (administrators) brings both back, served by the host's Odoo, Odoo's to write, nothing left beside it", async () => {
    const restored = await job('restore', f.t.as.admin, { backup_id: done!.id });
    expect(restored.state, restored.error).toBe('completed');
    expect(await signIn(database)).toBe(tenant.uid);
    expect(await call(database, 'res.partner', 'read', [[tenant.partnerId], ['name']])).toEqual([
      expect.objectContaining({ id: tenant.partnerId, name: 'Backed-up partner' }),
    ]);
    const [back] = (await call(database, 'ir.attachment', 'read', [[tenant.attachmentId], ['datas']])) as { datas: string }[];
    expect(Buffer.from(back!.datas, 'base64').toString()).toBe(fileText);
    expect(readFileSync(fileOf(database), 'utf8')).toBe(fileText);
    // The restored filestore is Odoo's to write: a new upload lands in it.
    const later = `uploaded after the restore ${Date.now()}`;
    const laterId = await call(database, 'ir.attachment', 'create', [{ name: 'later.txt', datas: Buffer.from(later).toString('base64') }]);
    const [laterBack] = (await call(database, 'ir.attachment', 'read', [[laterId], ['datas']])) as { datas: string }[];
    expect(Buffer.from(laterBack!.datas, 'base64').toString()).toBe(later);
    // Nothing of the restore is left beside the live instance.
    expect((await readdir(path.dirname(filestore()))).filter((n) => n.startsWith(database) && n !== database)).toEqual([]);
    const owned = await adminQuery<{ datname: string }>(
      'SELECT datname FROM pg_database WHERE datdba = (SELECT datdba FROM pg_database WHERE datname = $1)',
      [database],
    );
    expect(owned.map((r) => r.datname)).toEqual([database]);
  });

  test("the backup server's verify restores the latest backup into a scratch database the host's Odoo serves, signs in, removes it", async () => {
    // The backup server's verify: the latest backup restored into a scratch database, served by the
    // host's Odoo (its credentials file, its filestore) and signed in to as the tenant's
    // administrator, then removed; restic check of the repository.
    const verify = await fetch(`${bs.url}/api/verify`, { method: 'POST', headers: { 'X-API-Key': bs.apiKey } });
    const outcome = (await verify.json()) as { state: string; backup_id: number; note: string };
    expect(verify.status, JSON.stringify(outcome)).toBe(200);
    expect(outcome.state, outcome.note).toBe('ok');
    expect(outcome.backup_id).toBe((await bs.backups(database)).find((b) => b.state === 'done')!.id);
    expect(outcome.note).toMatch(
      new RegExp(`Signed in to svcvf_${outcome.backup_id}_[0-9a-f]{6} as \\S+ \\(user ${tenant.uid}\\) through Odoo`),
    );
    // The scratch it named is gone (other files' backup servers, on this cluster too, make their own).
    const scratch = new RegExp(`Signed in to (svcvf_${outcome.backup_id}_[0-9a-f]{6})`).exec(outcome.note)![1]!;
    expect(await adminQuery('SELECT datname FROM pg_database WHERE datname = $1', [scratch])).toEqual([]);
    expect((await readdir(path.dirname(filestore()))).filter((n) => n.startsWith('svcvf_'))).toEqual([]);
  });

  test('drop_database with its final backup: the database and the filestore go, the backup stays', async () => {
    liveShape = await shape(database);
    expect((await act('cancel')).statusCode).toBe(200);
    const dropped = await job('drop_database', f.t.as.admin, {});
    expect(dropped.state, dropped.error).toBe('completed');
    const finalId = (dropped.result as { backup: { id: unknown } }).backup.id;
    expect(await adminQuery('SELECT 1 FROM pg_database WHERE datname = $1', [database])).toEqual([]);
    expect(existsSync(filestore())).toBe(false);
    const final = (await bs.backups(database)).find((b) => String(b.id) === String(finalId));
    expect(final, JSON.stringify(final)).toMatchObject({ state: 'done', filestore: true });
    finalUrl = final!.url!;
  });

  test("the final backup's download, loaded by the host's own Odoo into a new database, serves the customer's login, the record and the file", async () => {
    // Its download, loaded by the host's own Odoo into a new database (Odoo's `db load`, as its user
    // with its configuration), serves the customer's login, the record and the file.
    const zip = await download(finalUrl, 'final.zip');
    expect(await unzipList(zip)).toContain(`filestore/${tenant.storeFname}`);
    const copy = `svc_odoo_b_n${src.series}_${stamp}`;
    loaded.push(copy);
    const source = path.join(f.base, 'versions', `${src.name}-backup`);
    const loadedBy = await run(
      'setpriv',
      [
        '--reuid=odoo',
        '--regid=odoo',
        '--init-groups',
        'env',
        `HOME=${path.join(f.base, 'data')}`,
        '/usr/bin/python3',
        'odoo-bin',
        'db',
        '-c',
        path.join(f.base, 'config', `odoo-${src.port}.conf`),
        'load',
        copy,
        zip,
      ],
      { cwd: source, timeout: 10 * 60_000, maxBuffer: 64 * 1024 * 1024 },
    ).catch((err: Error & { stdout?: string; stderr?: string }) => {
      throw new Error(`odoo-bin db load failed: ${err.message}\n${err.stdout ?? ''}\n${err.stderr ?? ''}`);
    });
    expect(loadedBy.stderr).not.toMatch(/Couldn't restore database|Traceback/);
    expect(await shape(copy)).toEqual(liveShape);
    expect(await signIn(copy)).toBe(tenant.uid);
    expect(await call(copy, 'res.partner', 'search_count', [[['name', '=', 'Backed-up partner']]])).toBe(1);
    const [inCopy] = (await call(copy, 'ir.attachment', 'read', [[tenant.attachmentId], ['datas']])) as { datas: string }[];
    expect(Buffer.from(inCopy!.datas, 'base64').toString()).toBe(fileText);
    expect(readFileSync(fileOf(copy), 'utf8')).toBe(fileText);
  });
});
