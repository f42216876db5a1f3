// svc's own backup server refusing or failing a restore, and forgetting backups: a restore of a
// backup that is not this tenant's, not done, or no longer held is refused or failed before the live
// instance changes; one that fails half-way leaves the live instance as it was and nothing of
// itself behind; POST {drop_db_path} forgets a dropped database's backups (refused while it
// exists); retention prunes a tenant's backups to its subscription's policy. Real parts:
// PostgreSQL, a real sshd as the Odoo host, restic on a local repository.
import { execFileSync } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { cp, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import { LOCAL_UUID } from '../src/backup-server/repositories.js';
import { waitForJob } from './helpers/api.js';
import { withConfig } from './helpers/app.js';
import { useBackupServer } from './helpers/backup-server.js';
import { backupServerCalls, eventually, type BackupServerCalls } from './helpers/backup-server-calls.js';
import { act } from './helpers/lifecycle.js';
import { useOdooHost } from './helpers/odoo-host.js';
import { queryIn, TENANT_ROLE } from './helpers/odoo-template.js';
import { adminQuery, databaseUrl } from './helpers/pg.js';
import { startS3Server } from './helpers/s3-server.js';

const f = useOdooHost({ 'ab/logo': 'logo bytes' });
const { t } = f;
const bs = useBackupServer(t);
let bc: BackupServerCalls;

beforeAll(async () => {
  execFileSync('sh', ['-c', 'id odoo >/dev/null 2>&1 || useradd --system --user-group --no-create-home --shell /usr/sbin/nologin odoo']);
  await t.ctx.db.rootServer.update({ where: { id: f.rootServerId }, data: { odoo_db_user: TENANT_ROLE } });
  bc = backupServerCalls(t, bs);
  // A restore's databases are named svcrs_<restore id>_… / svcrb_<restore id>_…: ids of this file's own, so that
  // what another file's restores have on the cluster meanwhile is never taken for ours.
  await t.ctx.db.$executeRawUnsafe(`ALTER SEQUENCE backup_restores_id_seq RESTART WITH ${randomInt(100_000, 900_000)}`);
});

/** A done backup of `db`, asked of the backup server. */
async function doneBackup(db: string): Promise<number> {
  const id = await bc.requestBackup(db);
  const backup = await bc.settled(db, id);
  expect(backup.state, backup.error ?? '').toBe('done');
  return id;
}

/** What a restore must not change: the database (its oid and partners) and the filestore (every file and its bytes). */
async function liveState(db: string) {
  const [row] = await adminQuery<{ oid: number }>('SELECT oid::int AS oid FROM pg_database WHERE datname = $1', [db]);
  const partners = (await queryIn<{ name: string }>(db, 'SELECT name FROM res_partner ORDER BY id')).map((r) => r.name);
  const files: Record<string, string> = {};
  const dir = f.filestore(db);
  for (const e of await readdir(dir, { recursive: true, withFileTypes: true }))
    if (e.isFile()) files[path.relative(dir, path.join(e.parentPath, e.name))] = await readFile(path.join(e.parentPath, e.name), 'utf8');
  return { oid: row?.oid, partners, files };
}

/** A restore's databases left on the cluster, and folders left beside the tenant's filestore. */
async function leftovers(db: string, restoreId: number) {
  const dbs = await adminQuery<{ datname: string }>('SELECT datname FROM pg_database WHERE datname LIKE $1 OR datname LIKE $2', [
    `svcrs\\_${restoreId}\\_%`,
    `svcrb\\_${restoreId}\\_%`,
  ]);
  const beside = (await readdir(path.dirname(f.filestore(db)))).filter((n) => n.startsWith(`${db}.`));
  return [...dbs.map((d) => d.datname), ...beside];
}

/** The backup server's log lines saying what of a failed restore it could not clear away (why leftovers are there). */
const clearingFailures = () =>
  t.ctx
    .logText()
    .split('\n')
    .filter((l) => l.includes('could not be cleared away'))
    .join('\n');

/** POST {restore_db_path}, then GET /api/restores/{id} until it ended. */
async function restoreOnServer(db: string, backupId: number) {
  const res = await bc.call('POST', '/svc/database/restore', { db_name: db, backup_id: backupId });
  expect(res.status, res.text).toBe(202);
  const id = res.json().id;
  let ended: { id: number; state: string; error: string | null } | undefined;
  await eventually(async () => {
    ended = (await bc.call('GET', `/api/restores/${id}`)).json();
    expect(['done', 'failed']).toContain(ended!.state);
  }, 150_000);
  return ended!;
}

describe('POST {drop_db_path}', () => {
  it('is refused (409) while a subscription has the database; once svc dropped it, every backup of it is forgotten', async () => {
    const sub = await f.fx.deployed();
    const skipped = await f.fx.deployed();
    const other = await f.fx.deployed();
    const first = await doneBackup(sub.database_name);
    await doneBackup(skipped.database_name);
    const kept = await doneBackup(other.database_name);

    const refused = await bc.call('POST', '/svc/database/drop', { db_name: sub.database_name });
    expect(refused.status, refused.text).toBe(409);
    expect(refused.text).toContain(`subscription ${sub.id}`);
    expect((await bs.backups(sub.database_name)).map((b) => b.id)).toEqual([first]);

    // svc drops one after its final backup, the other without one (skip_backup).
    for (const [s, skip] of [
      [sub, false],
      [skipped, true],
    ] as const) {
      expect((await act(t, s.id, 'cancel')).statusCode).toBe(200);
      const drop = await act(t, s.id, 'drop_database', { skip_backup: skip }, t.as.admin);
      expect(drop.statusCode, drop.body).toBe(202);
      const job = await withConfig(t, { BACKUP_POLL_MS: 100 }, () => waitForJob(t.app, t.as.admin, drop.json().job_id, 150_000));
      expect(job.state, job.error).toBe('completed');
    }
    // The final backup is listed (the first one of the same day went by the daily retention).
    expect((await bs.backups(sub.database_name))[0]).toMatchObject({ state: 'done', filestore: true });

    for (const s of [sub, skipped]) {
      const listed = await bs.backups(s.database_name);
      expect(listed.length).toBeGreaterThan(0);
      const dropped = await bc.call('POST', '/svc/database/drop', { db_name: s.database_name });
      expect(dropped.status, dropped.text).toBe(200);
      expect(dropped.json()).toMatchObject({ db_name: s.database_name, dropped: listed.length });
      expect(await bs.backups(s.database_name)).toEqual([]);
      expect(await bc.snapshotsTagged(`db:${s.database_name}`)).toEqual([]);
    }
    // Another tenant's backup stays.
    expect((await bs.backups(other.database_name)).map((b) => b.id)).toEqual([kept]);
    expect(await bc.snapshotsTagged(`backup:${kept}`)).toHaveLength(1);
  }, 300_000);
});

/** restic's keep-daily/weekly/monthly (UTC): newest first, each rule keeps the first of each new day, ISO week or month while it has some left. */
function keptBy(list: { id: number; time: Date }[], daily: number, weekly: number, monthly: number): number[] {
  const isoWeek = (d: Date) => {
    const day = new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate()));
    day.setUTCDate(day.getUTCDate() + 4 - (day.getUTCDay() || 7)); // the week's Thursday names its year
    const yearStart = Date.UTC(day.getUTCFullYear(), 0, 1);
    return `${day.getUTCFullYear()}-W${Math.ceil(((day.getTime() - yearStart) / 86_400_000 + 1) / 7)}`;
  };
  const rules = [
    { left: daily, key: (d: Date) => d.toISOString().slice(0, 10), last: '' },
    { left: weekly, key: isoWeek, last: '' },
    { left: monthly, key: (d: Date) => d.toISOString().slice(0, 7), last: '' },
  ];
  const kept: number[] = [];
  for (const s of [...list].sort((a, b) => b.time.getTime() - a.time.getTime())) {
    let keep = false;
    for (const rule of rules) {
      if (rule.left <= 0 || rule.key(s.time) === rule.last) continue;
      rule.last = rule.key(s.time);
      rule.left--;
      keep = true;
    }
    if (keep) kept.push(s.id);
  }
  return kept.sort((a, b) => a - b);
}

describe("forgetting a dropped database's backups", () => {
  it('with a cloud account refusing: 400 naming it, the backups stay listed, and a retry once it answers forgets them', async () => {
    const sub = await f.fx.deployed();
    const db = sub.database_name;
    const s3 = await startS3Server({ accounts: { AKIASVCDROPREFUSE1: 'svc-drop-refuse-s3-secret-9c1d' } });
    const added = await bc.call('POST', '/api/cloud-accounts', {
      provider: 's3',
      name: 'refusing later',
      repository: `s3:${s3.endpoint}/drops/repository`,
      credentials: { access_key_id: 'AKIASVCDROPREFUSE1', secret_access_key: 'svc-drop-refuse-s3-secret-9c1d' },
    });
    expect(added.status, added.text).toBe(201);
    await t.ctx.db.backupServer.update({ where: { id: bs.id }, data: { enable_cloud_backup: true } });
    try {
      const id = await doneBackup(db);
      expect((await act(t, sub.id, 'cancel')).statusCode).toBe(200);
      const drop = await act(t, sub.id, 'drop_database', { skip_backup: true }, t.as.admin);
      expect((await waitForJob(t.app, t.as.admin, drop.json().job_id, 150_000)).state).toBe('completed');

      s3.refuse(true);
      const refused = await bc.call('POST', '/svc/database/drop', { db_name: db });
      expect(refused.status, refused.text).toBe(400);
      expect(refused.text).toMatch(/could not be forgotten everywhere .*refusing later \(s3\)/);
      expect((await bs.backups(db)).map((b) => b.id)).toEqual([id]);
      expect(await bc.restic.snapshots(await bc.local(), { tags: [`db:${db}`] })).toEqual([]); // the local repository's went

      s3.refuse(false);
      const retried = await bc.call('POST', '/svc/database/drop', { db_name: db });
      expect(retried.status, retried.text).toBe(200);
      expect(await bs.backups(db)).toEqual([]);
    } finally {
      await t.ctx.db.backupServer.update({ where: { id: bs.id }, data: { enable_cloud_backup: false } });
      await bc.call('DELETE', `/api/cloud-accounts/${added.json().id}`);
      await s3.stop();
    }
  }, 240_000);
});

describe('retention', () => {
  it("prunes a tenant's backups to its subscription's policy after a backup; rows whose snapshots are all gone are deleted", async () => {
    const sub = await f.fx.deployed();
    const db = sub.database_name;
    await t.ctx.db.subscription.update({
      where: { id: sub.id },
      data: { backup_keep_daily: 2, backup_keep_weekly: 2, backup_keep_monthly: 3 },
    });
    const other = await f.fx.deployed();
    const otherBackup = await doneBackup(other.database_name);

    // Backups of earlier days, as the backup server keeps them: a row and a snapshot of that time.
    const dir = await mkdtemp(path.join(tmpdir(), 'svc-retention-'));
    await writeFile(path.join(dir, 'dump.sql'), '-- an earlier backup');
    const local = await bc.local();
    const made: { id: number; time: Date }[] = [];
    for (const days of [1, 2, 3, 8, 9, 20, 35, 40, 70, 100]) {
      const time = new Date(Date.now() - days * 86_400_000);
      const row = await t.ctx.db.tenantBackup.create({
        data: {
          backup_server_id: bs.id,
          db_name: db,
          subscription_id: sub.id,
          state: 'done',
          created_at: time,
          started_at: time,
          finished_at: time,
        },
      });
      const snap = await bc.restic.backup(local, dir, { tags: [`db:${db}`, `backup:${row.id}`], host: 'svc', time });
      await t.ctx.db.tenantBackup.update({ where: { id: row.id }, data: { snapshots: { [LOCAL_UUID]: snap.snapshotId } } });
      made.push({ id: row.id, time });
    }
    await rm(dir, { recursive: true, force: true });

    const latest = await doneBackup(db);
    const [snap] = await bc.restic.snapshots(local, { tags: [`backup:${latest}`] });
    const kept = keptBy([...made, { id: latest, time: snap!.time }], 2, 2, 3);
    expect(kept).toContain(latest);
    expect(kept.length).toBeLessThan(made.length); // the policy removes some

    await eventually(async () => expect((await bs.backups(db)).map((b) => b.id).sort((a, b) => a - b)).toEqual(kept));
    const left = await bc.restic.snapshots(local, { tags: [`db:${db}`] });
    const idOf = (tags: string[]) => Number(tags.find((tag) => tag.startsWith('backup:'))!.slice('backup:'.length));
    expect(left.map((s) => idOf(s.tags)).sort((a, b) => a - b)).toEqual(kept);
    // Every row left names a snapshot still there; the other tenant's backup is untouched.
    const rows = await t.ctx.db.tenantBackup.findMany({ where: { backup_server_id: bs.id, db_name: db } });
    for (const row of rows) expect(left.map((s) => s.id)).toContain((row.snapshots as Record<string, string>)[LOCAL_UUID]);
    expect(await bc.snapshotsTagged(`backup:${otherBackup}`)).toHaveLength(1);
  }, 240_000);
  it('a repository that cannot be pruned (a cloud account refusing) does not keep another from being pruned, nor its rows', async () => {
    const sub = await f.fx.deployed();
    const db = sub.database_name;
    await t.ctx.db.subscription.update({
      where: { id: sub.id },
      data: { backup_keep_daily: 1, backup_keep_weekly: 0, backup_keep_monthly: 0 },
    });
    const s3 = await startS3Server({ accounts: { AKIASVCRETENTION01: 'svc-retention-s3-secret-2b7e' } });
    // A cloud account backups no longer go to (enable_cloud_backup off), whose access was then withdrawn.
    const added = await bc.call('POST', '/api/cloud-accounts', {
      provider: 's3',
      repository: `s3:${s3.endpoint}/retention/repository`,
      credentials: { access_key_id: 'AKIASVCRETENTION01', secret_access_key: 'svc-retention-s3-secret-2b7e' },
    });
    expect(added.status, added.text).toBe(201);
    try {
      const first = await doneBackup(db);
      s3.refuse(true);
      const second = await doneBackup(db);
      // keep-daily 1: the first one goes from the local repository, and with it its row (no repository holds it).
      await eventually(async () => expect((await bs.backups(db)).map((b) => b.id)).toEqual([second]));
      expect(await bc.restic.snapshots(await bc.local(), { tags: [`backup:${first}`] })).toEqual([]);
    } finally {
      await bc.call('DELETE', `/api/cloud-accounts/${added.json().id}`);
      await s3.stop();
    }
  }, 240_000);
});

describe('a restore refused or failed before the live instance changes', () => {
  /** A tenant whose res_partner is held (ACCESS EXCLUSIVE) until release(): its backup's pg_dump waits on it, running. */
  async function held(db: string) {
    const client = new pg.Client({ connectionString: databaseUrl(db) });
    client.on('error', () => {}); // a test that failed leaves it to the file's clean-up
    await client.connect();
    await client.query('BEGIN');
    await client.query('LOCK TABLE public.res_partner IN ACCESS EXCLUSIVE MODE');
    return async () => {
      if (!client.connection?.stream?.writable) return;
      await client.query('COMMIT').catch(() => {});
      await client.end();
    };
  }

  it("refuses (400, naming it) another tenant's backup, and one that failed, is running or pending", async () => {
    const a = await f.fx.deployed();
    const b = await f.fx.deployed();
    const ofB = await doneBackup(b.database_name);
    const failed = await t.ctx.db.tenantBackup.create({
      data: { backup_server_id: bs.id, db_name: a.database_name, subscription_id: a.id, state: 'failed', error: 'the disk was full' },
    });
    const restore = (db: string, id: number) => bc.call('POST', '/svc/database/restore', { db_name: db, backup_id: id });

    const other = await restore(a.database_name, ofB);
    expect(other.status, other.text).toBe(400);
    expect(other.text).toContain(`Backup ${ofB} is not a backup of ${a.database_name}`);
    const notDone = await restore(a.database_name, failed.id);
    expect(notDone.status, notDone.text).toBe(400);
    expect(notDone.text).toContain(`Backup ${failed.id} is failed`);

    // a's backup held running on its pg_dump; b's (same Odoo host) pending behind it.
    const release = await held(a.database_name);
    try {
      const running = await bc.requestBackup(a.database_name);
      await eventually(async () =>
        expect((await t.ctx.db.tenantBackup.findUniqueOrThrow({ where: { id: running } })).state).toBe('running'),
      );
      const pending = await bc.requestBackup(b.database_name);
      const ofRunning = await restore(a.database_name, running);
      expect(ofRunning.status, ofRunning.text).toBe(400);
      expect(ofRunning.text).toContain(`Backup ${running} is running`);
      expect((await t.ctx.db.tenantBackup.findUniqueOrThrow({ where: { id: pending } })).state).toBe('pending');
      const ofPending = await restore(b.database_name, pending);
      expect(ofPending.status, ofPending.text).toBe(400);
      expect(ofPending.text).toContain(`Backup ${pending} is pending`);
      await release();
      expect((await bc.settled(a.database_name, running)).state).toBe('done');
      expect((await bc.settled(b.database_name, pending)).state).toBe('done');
    } finally {
      await release();
    }
    expect(
      await t.ctx.db.backupRestore.count({ where: { backup_server_id: bs.id, db_name: { in: [a.database_name, b.database_name] } } }),
    ).toBe(0);
  }, 240_000);

  it("a backup whose snapshot no repository holds any more does not verify: svc's restore fails, the live instance untouched", async () => {
    const sub = await f.fx.deployed();
    const db = sub.database_name;
    const id = await doneBackup(db);
    const row = await t.ctx.db.tenantBackup.findUniqueOrThrow({ where: { id } });
    await bc.restic.forget(await bc.local(), [(row.snapshots as Record<string, string>)[LOCAL_UUID]!], { prune: true });
    await queryIn(db, "INSERT INTO res_partner (name) VALUES ('After the backup')");
    const before = await liveState(db);

    const res = await act(t, sub.id, 'restore', { backup_id: id }, t.as.admin);
    expect(res.statusCode, res.body).toBe(202);
    const job = await withConfig(t, { BACKUP_POLL_MS: 100 }, () => waitForJob(t.app, t.as.admin, res.json().job_id, 150_000));
    expect(job.state).toBe('failed');
    expect(job.error).toContain(`Backup ${id} does not verify`);
    expect(await liveState(db)).toEqual(before);
    const [restore] = await t.ctx.db.backupRestore.findMany({ where: { backup_server_id: bs.id, backup_id: id } });
    expect(restore).toMatchObject({ state: 'failed' });
    expect(await leftovers(db, restore!.id), clearingFailures()).toEqual([]);
  }, 240_000);
});

describe('a restore that fails half-way leaves the live instance as it was, and nothing of itself', () => {
  it("after the restored database and filestore took the live ones' places (a signalling sequence of the live database the restored one lacks)", async () => {
    const sub = await f.fx.deployed();
    const db = sub.database_name;
    const id = await doneBackup(db);
    await queryIn(db, "INSERT INTO res_partner (name) VALUES ('After the backup')");
    await writeFile(path.join(f.filestore(db), 'after'), 'a file added after the backup');
    // Made after the backup (as a newer Odoo makes new ones): moving it on in the restored database fails.
    await queryIn(
      db,
      `CREATE SEQUENCE public.base_registry_signaling;
       DO $$ BEGIN EXECUTE format('ALTER SEQUENCE public.base_registry_signaling OWNER TO %I',
         (SELECT pg_catalog.pg_get_userbyid(datdba) FROM pg_catalog.pg_database WHERE datname = current_database())); END $$`,
    );
    const before = await liveState(db);

    const restore = await restoreOnServer(db, id);
    expect(restore.state).toBe('failed');
    expect(restore.error).toContain("moving Odoo's signalling sequences");
    expect(restore.error).toContain('the live instance was put back as it was');
    expect(await liveState(db)).toEqual(before);
    expect(await leftovers(db, restore.id), clearingFailures()).toEqual([]);
  }, 240_000);

  it('the live filestore cannot be moved aside when the restored one takes its place (it is a mount point)', async () => {
    const sub = await f.fx.deployed();
    const db = sub.database_name;
    const id = await doneBackup(db);
    await queryIn(db, "INSERT INTO res_partner (name) VALUES ('After the backup')");
    await writeFile(path.join(f.filestore(db), 'after'), 'a file added after the backup');
    const before = await liveState(db);

    // The tenant's filestore on a file system of its own: rename(2) of a mount point fails (EBUSY).
    const live = f.filestore(db);
    const kept = await mkdtemp(path.join(tmpdir(), 'svc-filestore-'));
    await cp(live, kept, { recursive: true });
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=4m', 'tmpfs', live]);
    try {
      await cp(kept, live, { recursive: true });
      const restore = await restoreOnServer(db, id);
      expect(restore.state).toBe('failed');
      expect(restore.error).toMatch(/busy/i);
      expect(await liveState(db)).toEqual(before);
      expect(await leftovers(db, restore.id), clearingFailures()).toEqual([]);
      const subscription = await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: sub.id } });
      expect(Number(subscription.database_oid)).toBe(before.oid);
    } finally {
      execFileSync('umount', [live]);
      await rm(kept, { recursive: true, force: true });
    }
  }, 240_000);

  // Last of the file: it leaves the local repository without its data.
  it("while the database is read back (the snapshot's data unreadable in the repository once the snapshot was found)", async () => {
    const sub = await f.fx.deployed();
    const db = sub.database_name;
    const id = await doneBackup(db);
    await queryIn(db, "INSERT INTO res_partner (name) VALUES ('After the backup')");
    const before = await liveState(db);
    // Every data pack overwritten with zeros of its size: restic finds the snapshot, then cannot read its files.
    const data = path.join(bs.dir, 'repository', 'data');
    for (const e of await readdir(data, { recursive: true, withFileTypes: true }))
      if (e.isFile()) await writeFile(path.join(e.parentPath, e.name), Buffer.alloc((await stat(path.join(e.parentPath, e.name))).size));

    const restore = await restoreOnServer(db, id);
    expect(restore.state).toBe('failed');
    expect(restore.error).toContain('dumping /dump.sql');
    expect(await liveState(db)).toEqual(before);
    expect(await leftovers(db, restore.id), clearingFailures()).toEqual([]);
  }, 300_000);
});
