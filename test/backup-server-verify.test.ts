// svc's backup server verifies its backups (issue 47, point 5): a tenant's latest backup restored
// into a scratch database beside it, served by the host's Odoo and signed in to, then removed;
// restic check of each repository; the outcome on the backup server record and in its chatter.
// The Odoo host is the real sshd of the other backup-server tests; its Odoo is a stand-in on
// loopback (npm test runs no Odoo) that answers JSON-RPC's common.authenticate as svc's addon and
// Odoo do: the database is opened as the role its credentials file names, and the password checked
// against res_users' pbkdf2 hash. The real Odoo is the sign-in of test-odoo's backup suite.
import { execFileSync } from 'node:child_process';
import { pbkdf2Sync, timingSafeEqual } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRestic } from '../src/backup-server/restic.js';
import { backupWindowOpen, type VerifyOutcome } from '../src/backup-server/verify.js';
import { request, waitForJob } from './helpers/api.js';
import { useBackupServer } from './helpers/backup-server.js';
import { act } from './helpers/lifecycle.js';
import { useOdooHost } from './helpers/odoo-host.js';
import { queryIn, TENANT_ROLE, tenantUrl } from './helpers/odoo-template.js';
import { adminQuery } from './helpers/pg.js';

const f = useOdooHost({ 'ab/logo': 'logo bytes' });
const { t } = f;
// The weekly verify on: the first one starts by itself once there is a backup.
const bs = useBackupServer(t, {}, { BACKUP_VERIFY_DAYS: 7 });
const HOST_SECRET = 'host-secret-of-the-stand-in-odoo';

interface SignIn {
  db: string;
  login: string;
  /** The role the credentials file named (what the host's Odoo connects as). */
  role: string;
  /** The files of the database's filestore when it was served. */
  files: string[];
  uid: number | false;
}
const signIns: SignIn[] = [];
let refuseSignIns = false;

/** passlib's pbkdf2_sha512 hash of Odoo checked as Odoo checks it. */
function passwordMatches(password: string, hash: string): boolean {
  const [, scheme, rounds, salt, checksum] = hash.split('$');
  if (scheme !== 'pbkdf2-sha512') return false;
  const ab64 = (s: string) => Buffer.from(s.replaceAll('.', '+'), 'base64');
  const want = ab64(checksum!);
  const got = pbkdf2Sync(password, ab64(salt!), Number(rounds), want.length, 'sha512');
  return timingSafeEqual(want, got);
}

async function filesOf(dir: string): Promise<string[]> {
  if (!existsSync(dir)) return [];
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  return entries.filter((e) => e.isFile()).map((e) => path.relative(dir, path.join(e.parentPath, e.name)));
}

/** The host's Odoo as far as a sign-in goes: POST /jsonrpc common.authenticate. */
async function authenticate(req: http.IncomingMessage): Promise<{ result?: unknown; error?: unknown }> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  const [dbName, login, password] = JSON.parse(Buffer.concat(chunks).toString()).params.args as string[];
  const error = (message: string) => ({ error: { code: 200, message: 'Odoo Server Error', data: { message } } });
  if (req.headers['x-svc-host-secret'] !== HOST_SECRET) return error('not through the host');
  let creds: { user: string };
  try {
    creds = JSON.parse(await readFile(path.join(f.base, 'config', 'tenant-roles', dbName!), 'utf8'));
  } catch {
    return error(`database ${dbName} is not served (no credentials file)`);
  }
  const client = new pg.Client({ connectionString: tenantUrl(dbName!, creds.user) });
  await client.connect();
  try {
    const { rows } = await client.query('SELECT id, password FROM res_users WHERE login = $1 AND active', [login]);
    const ok = !refuseSignIns && rows[0] !== undefined && passwordMatches(password!, rows[0].password);
    const uid = ok ? (rows[0].id as number) : false;
    signIns.push({ db: dbName!, login: login!, role: creds.user, files: await filesOf(f.filestore(dbName!)), uid });
    return { result: uid };
  } finally {
    await client.end();
  }
}

const odoo = http.createServer((req, res) => {
  authenticate(req)
    .then((answer) => res.end(JSON.stringify({ jsonrpc: '2.0', id: 1, ...answer })))
    .catch((err: Error) => res.end(JSON.stringify({ jsonrpc: '2.0', id: 1, error: { message: err.message } })));
});

beforeAll(async () => {
  execFileSync('sh', ['-c', 'id odoo >/dev/null 2>&1 || useradd --system --user-group --no-create-home --shell /usr/sbin/nologin odoo']);
  await t.ctx.db.rootServer.update({ where: { id: f.rootServerId }, data: { odoo_db_user: TENANT_ROLE } });
  // No daily schedule: the file backs up when it means to, and a due verify never waits for the window to close.
  await t.ctx.db.settings.upsert({
    where: { id: 1 },
    create: { backup_schedule_enabled: false },
    update: { backup_schedule_enabled: false },
  });
  await new Promise<void>((resolve) => odoo.listen(0, '127.0.0.1', resolve));
});
afterAll(() => new Promise<void>((resolve) => odoo.close(() => resolve())));

/** The host runs svc's Odoo (the stand-in): set after a deployment, which then needs no sign-in of its own. */
async function hostRunsOdoo() {
  await t.ctx.db.rootServer.update({
    where: { id: f.rootServerId },
    data: {
      odoo_state: 'running',
      odoo_http_port: (odoo.address() as AddressInfo).port,
      odoo_host_secret: await t.ctx.secretBox.encrypt(HOST_SECRET),
    },
  });
}

async function backUp(subscriptionId: number) {
  const res = await act(t, subscriptionId, 'backup');
  expect(res.statusCode, res.body).toBe(202);
  const job = await waitForJob(t.app, t.as.admin, res.json().job_id, 120_000);
  expect(job.state, job.error).toBe('completed');
}

const record = () => t.ctx.db.backupServer.findUniqueOrThrow({ where: { id: bs.id } });
const chatter = () => t.ctx.db.message.findMany({ where: { model_name: 'svc.saas.backup.server', rec_id: bs.id }, orderBy: { id: 'asc' } });

async function verifyNow(key = bs.apiKey) {
  return fetch(`${bs.url}/api/verify`, { method: 'POST', headers: { 'X-API-Key': key } });
}

/** The scratch database and what the host had of it: all gone. */
async function expectScratchGone(scratch: string) {
  expect(await adminQuery('SELECT 1 FROM pg_database WHERE datname = $1', [scratch])).toHaveLength(0);
  expect(existsSync(path.join(f.base, 'config', 'tenant-roles', scratch))).toBe(false);
  expect(existsSync(f.filestore(scratch))).toBe(false);
}

describe("svc's backup server verifies its backups", () => {
  let sub: Awaited<ReturnType<typeof f.fx.deployed>>;
  let firstBackup: number;

  it('restores the latest backup into a scratch database by itself once one is due, signs in through the host’s Odoo, removes the scratch and records the outcome', async () => {
    sub = await f.fx.deployed();
    const db = sub.database_name;
    await mkdir(path.join(f.filestore(db), 'cd'), { recursive: true });
    await writeFile(path.join(f.filestore(db), 'cd', 'upload'), 'an uploaded file');
    await hostRunsOdoo();
    expect((await record()).verify_state).toBeNull();

    await backUp(sub.id);
    const [done] = await bs.backups(db);
    firstBackup = done!.id;
    // Never verified: the runner starts one by itself.
    let server = await record();
    for (let i = 0; i < 120 && (server.verify_state === null || server.verify_state === 'running'); i++) {
      await new Promise((r) => setTimeout(r, 1000));
      server = await record();
    }
    expect(server.verify_state, server.verify_note ?? '').toBe('ok');
    expect(server.verified_at).toBeInstanceOf(Date);
    expect(server.verify_scratch).toBeNull();

    // Served by the host's Odoo as the tenant's own role, with its filestore under the scratch's name, and signed in to as the administrator.
    expect(signIns).toHaveLength(1);
    const [signIn] = signIns;
    const { database_role } = await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: sub.id } });
    expect(signIn).toMatchObject({ role: database_role, uid: 2 });
    expect(signIn!.db).toMatch(new RegExp(`^svcvf_${firstBackup}_[0-9a-f]{6}$`));
    expect(signIn!.files.sort()).toEqual(['ab/logo', 'cd/upload']);
    await expectScratchGone(signIn!.db);

    expect(server.verify_note).toContain(`Backup ${firstBackup} of ${db}`);
    expect(server.verify_note).toContain(`Signed in to ${signIn!.db} as ${signIn!.login} (user 2)`);
    expect(server.verify_note).toContain('restic check of repository local (local): no errors');
    const [listed] = await bs.backups(db);
    expect((listed as unknown as { verified_at: string | null }).verified_at).toBe(server.verified_at!.toISOString());
    const messages = await chatter();
    expect(messages.at(-1)).toMatchObject({ subtype_xmlid: 'mail.mt_note', body: expect.stringContaining('Backups verified.') });

    // svc's API shows the outcome, read-only.
    const shown = await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/backup-servers/${bs.id}` });
    expect(shown.json()).toMatchObject({
      verify_state: 'ok',
      verified_at: server.verified_at!.toISOString(),
      verify_note: server.verify_note,
    });
    expect(shown.json()).not.toHaveProperty('verify_scratch');
    expect(shown.json()).not.toHaveProperty('verify_lease_until');
    const patched = await request(t.app, t.as.operator, {
      method: 'PATCH',
      url: `/api/v1/backup-servers/${bs.id}`,
      payload: { verify_state: 'ok' },
    });
    expect(patched.statusCode).toBe(400);
  }, 300_000);

  it('fails a verify whose backup cannot be restored (its snapshot forgotten): the cause on the record, an alert in the chatter, no scratch', async () => {
    expect((await verifyNow('wrong')).status).toBe(401);
    const repo = await t.ctx.db.backupRepository.findFirstOrThrow({ where: { backup_server_id: bs.id, provider: 'local' } });
    const backup = await t.ctx.db.tenantBackup.findUniqueOrThrow({ where: { id: firstBackup } });
    const restic = createRestic({ cacheDir: path.join(bs.dir, 'cache'), PATH: t.ctx.config.PATH });
    await restic.forget(
      { provider: 'local', location: repo.location, password: (await t.ctx.secretBox.decrypt(repo.password))! },
      [(backup.snapshots as Record<string, string>)[repo.uuid]!],
      { prune: true },
    );
    const before = signIns.length;

    const res = await verifyNow();
    expect(res.status).toBe(200);
    const outcome = (await res.json()) as VerifyOutcome;
    expect(outcome).toMatchObject({ state: 'failed', backup_id: firstBackup, db_name: sub.database_name });
    expect(outcome.note).toContain(`Backup ${firstBackup} does not verify: no repository holds its snapshot any more`);

    const server = await record();
    expect(server).toMatchObject({ verify_state: 'failed', verify_note: outcome.note, verify_scratch: null });
    expect(server.verified_at!.toISOString()).toBe(outcome.verified_at);
    expect((await chatter()).at(-1)).toMatchObject({
      message_type: 'notification',
      subtype_xmlid: 'mail.mt_alert',
      body: expect.stringContaining(`Backup verify failed.\nThe restore test of backup ${firstBackup}`),
    });
    // Nothing was restored, nothing served; the backup keeps the verified_at of the verify it passed.
    expect(signIns).toHaveLength(before);
    expect(await adminQuery("SELECT datname FROM pg_database WHERE datname LIKE 'svcvf\\_%'")).toEqual([]);
    expect((await t.ctx.db.tenantBackup.findUniqueOrThrow({ where: { id: firstBackup } })).verified_at).toEqual(backup.verified_at);
  }, 120_000);

  it('fails a verify whose sign-in is refused, after the scratch was made: the scratch, its credentials file and filestore are removed all the same', async () => {
    await backUp(sub.id);
    const [latest] = await bs.backups(sub.database_name);
    refuseSignIns = true;
    try {
      const res = await verifyNow();
      expect(res.status).toBe(200);
      const outcome = (await res.json()) as VerifyOutcome;
      expect(outcome).toMatchObject({ state: 'failed', backup_id: latest!.id });
      expect(outcome.note).toContain("refused the customer's sign-in");
      expect(outcome.note).toContain('its credentials file and its filestore were removed');
      expect(outcome.note).toContain('restic check of repository local (local): no errors');
      const scratch = signIns.at(-1)!.db;
      expect(scratch).toMatch(new RegExp(`^svcvf_${latest!.id}_`));
      // It had been made and served: the restored filestore was there under the scratch's name.
      expect(signIns.at(-1)!.files.sort()).toEqual(['ab/logo', 'cd/upload']);
      await expectScratchGone(scratch);
      expect((await t.ctx.db.tenantBackup.findUniqueOrThrow({ where: { id: latest!.id } })).verified_at).toBeNull();
      expect((await chatter()).at(-1)).toMatchObject({ subtype_xmlid: 'mail.mt_alert' });
      // The tenant itself was not touched.
      expect((await queryIn<{ n: number }>(sub.database_name, 'SELECT count(*)::int AS n FROM res_users'))[0]!.n).toBeGreaterThan(0);
    } finally {
      refuseSignIns = false;
    }
  }, 180_000);

  it('answers 409 while a verify runs; one whose process died is failed as interrupted and its scratch removed', async () => {
    const scratch = 'svcvf_999_abcdef';
    await t.ctx.db.backupServer.update({
      where: { id: bs.id },
      data: {
        verify_state: 'running',
        verify_lease_until: new Date(Date.now() + 60_000),
        verify_scratch: { database: scratch, postgresql_server_id: f.fx.serverId, root_server_id: f.rootServerId },
      },
    });
    expect((await verifyNow()).status).toBe(409);

    // What a verify that died had made: the database, its credentials file, its filestore.
    await adminQuery(`CREATE DATABASE ${scratch}`);
    await mkdir(path.join(f.base, 'config', 'tenant-roles'), { recursive: true });
    await writeFile(path.join(f.base, 'config', 'tenant-roles', scratch), '{}');
    await mkdir(path.join(f.filestore(scratch), 'ab'), { recursive: true });
    await writeFile(path.join(f.filestore(scratch), 'ab', 'logo'), 'logo bytes');
    await t.ctx.db.backupServer.update({ where: { id: bs.id }, data: { verify_lease_until: new Date(Date.now() - 1000) } });

    let server = await record();
    for (let i = 0; i < 60 && server.verify_state === 'running'; i++) {
      await new Promise((r) => setTimeout(r, 1000));
      server = await record();
    }
    expect(server).toMatchObject({ verify_state: 'failed', verify_scratch: null, verify_lease_until: null });
    expect(server.verify_note).toContain('Interrupted: the backup server stopped while the verify ran.');
    expect(server.verify_note).toContain(`Its scratch database ${scratch} was removed.`);
    await expectScratchGone(scratch);
    expect((await chatter()).at(-1)).toMatchObject({ subtype_xmlid: 'mail.mt_alert' });
  }, 120_000);

  it('a due verify waits for the daily backup window to close (UTC hours, across midnight; a 24-hour window or no schedule: never)', () => {
    const at = (h: number) => new Date(Date.UTC(2026, 11, 1, h, 30));
    const window = (start: number, hours: number, enabled = true) => ({
      backup_schedule_enabled: enabled,
      backup_window_start_hour: start,
      backup_window_hours: hours,
    });
    expect([0, 1, 6, 7].map((h) => backupWindowOpen(at(h), window(1, 6)))).toEqual([false, true, true, false]);
    expect([21, 22, 23, 0, 1, 2].map((h) => backupWindowOpen(at(h), window(22, 3)))).toEqual([false, true, true, true, false, false]);
    expect(backupWindowOpen(at(3), window(1, 24))).toBe(false);
    expect(backupWindowOpen(at(3), window(1, 6, false))).toBe(false);
    expect(backupWindowOpen(at(3), null)).toBe(false);
  });
});
