// svc's own backup server dying in the middle of a restore: the restore's row stays running until
// its lease runs out; then the sweep of the backup server's runner fails it and, from what it finds
// (the restore's svcrs_/svcrb_ databases, the live one's oid against the subscription's record, the
// folders beside the filestore), puts the live instance back as it was, or clears away the safety
// copy of a restore that had finished; what fits no step of a restore is left untouched and
// described. Each test makes what a run that died at that point would have left. Real parts:
// PostgreSQL, a real sshd as the Odoo host, the backup server's runner sweeping every few seconds.
import { execFileSync } from 'node:child_process';
import { cp, mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { restoreNames } from '../src/backup-server/restore-recovery.js';
import { useBackupServer } from './helpers/backup-server.js';
import { eventually } from './helpers/backup-server-calls.js';
import { useOdooHost } from './helpers/odoo-host.js';
import { queryIn, TENANT_ROLE } from './helpers/odoo-template.js';
import { adminQuery } from './helpers/pg.js';

const f = useOdooHost({ 'ab/logo': 'logo bytes' });
const { t } = f;
const bs = useBackupServer(t);
const made: string[] = [];

beforeAll(async () => {
  execFileSync('sh', ['-c', 'id odoo >/dev/null 2>&1 || useradd --system --user-group --no-create-home --shell /usr/sbin/nologin odoo']);
  await t.ctx.db.rootServer.update({ where: { id: f.rootServerId }, data: { odoo_db_user: TENANT_ROLE } });
});

afterAll(async () => {
  for (const name of made) await adminQuery(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
});

const oidOf = async (name: string) =>
  (await adminQuery<{ oid: number }>('SELECT oid::int AS oid FROM pg_database WHERE datname = $1', [name]))[0]?.oid;
const rename_ = (from: string, to: string) => adminQuery(`ALTER DATABASE "${from}" RENAME TO "${to}"`);
const flag = (db: string) => path.join(f.base, 'data', 'svc-maintenance', db);
const exists = (p: string) =>
  stat(p).then(
    () => true,
    () => false,
  );

/** A database's rows and oid, and a filestore's files with their bytes. */
async function stateOf(db: string, dir: string) {
  const partners = (await queryIn<{ name: string }>(db, 'SELECT name FROM res_partner ORDER BY id')).map((r) => r.name);
  const files: Record<string, string> = {};
  for (const e of await readdir(dir, { recursive: true, withFileTypes: true }))
    if (e.isFile()) files[path.relative(dir, path.join(e.parentPath, e.name))] = await readFile(path.join(e.parentPath, e.name), 'utf8');
  return { oid: await oidOf(db), partners, files };
}

/** The restore's databases on the cluster and the folders beside the tenant's filestore. */
async function leftovers(db: string, id: number) {
  const dbs = await adminQuery<{ datname: string }>('SELECT datname FROM pg_database WHERE datname LIKE $1 OR datname LIKE $2', [
    `svcrs\\_${id}\\_%`,
    `svcrb\\_${id}\\_%`,
  ]);
  const beside = (await readdir(path.dirname(f.filestore(db)))).filter((n) => n.startsWith(`${db}.`));
  return [...dbs.map((d) => d.datname), ...beside];
}

/**
 * A tenant with a done backup and a restore of it running in a backup-server process (its lease
 * still ahead while the test makes what the run left): the restore's names, and what was restored
 * beside the live instance (database `restored`, its filestore in .svc-restore), different from it.
 */
async function restoreUnderWay() {
  const sub = await f.fx.deployed();
  const db = sub.database_name;
  await queryIn(db, "INSERT INTO res_partner (name) VALUES ('After the backup')");
  await writeFile(path.join(f.filestore(db), 'after'), 'a file added after the backup');
  const backup = await t.ctx.db.tenantBackup.create({
    data: { backup_server_id: bs.id, db_name: db, subscription_id: sub.id, state: 'done', snapshots: {}, finished_at: new Date() },
  });
  const row = await t.ctx.db.backupRestore.create({
    data: {
      backup_server_id: bs.id,
      backup_id: backup.id,
      db_name: db,
      target_db_name: db,
      state: 'running',
      started_at: new Date(),
      lease_until: new Date(Date.now() + 10 * 60_000),
    },
  });
  const names = await restoreNames(t.ctx.db, row.id);
  made.push(names.restored, names.safety);
  const live = await stateOf(db, f.filestore(db));
  expect(Number((await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: sub.id } })).database_oid)).toBe(live.oid);

  const [{ owner }] = (await adminQuery<{ owner: string }>(
    'SELECT pg_catalog.pg_get_userbyid(datdba) AS owner FROM pg_database WHERE datname = $1',
    [db],
  )) as [{ owner: string }];
  await adminQuery(`CREATE DATABASE "${names.restored}" OWNER "${owner}" TEMPLATE "${db}"`);
  await queryIn(names.restored, "DELETE FROM res_partner WHERE name = 'After the backup'");
  await queryIn(names.restored, "INSERT INTO res_partner (name) VALUES ('Restored')");
  const restoredDir = `${f.filestore(db)}.svc-restore`;
  await cp(f.filestore(db), restoredDir, { recursive: true });
  await rm(path.join(restoredDir, 'after'));
  await writeFile(path.join(restoredDir, 'restored'), 'a file of the backup');
  const fromBackup = await stateOf(names.restored, restoredDir);
  return { sub, db, id: row.id, ...names, live, fromBackup, dir: f.filestore(db), restoredDir, old: `${f.filestore(db)}.svc-old` };
}

/** The run's process is gone: its lease runs out, and the backup server's runner sweeps the row. */
async function swept(id: number, state: 'failed' | 'done' = 'failed') {
  await t.ctx.db.backupRestore.update({ where: { id }, data: { lease_until: new Date(Date.now() - 1000) } });
  let row = await t.ctx.db.backupRestore.findUniqueOrThrow({ where: { id } });
  await eventually(async () => {
    row = await t.ctx.db.backupRestore.findUniqueOrThrow({ where: { id } });
    expect(row.state, row.error ?? '').toBe(state);
  }, 60_000);
  return row;
}

const recordedOid = async (subId: number) => Number((await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: subId } })).database_oid);
const maintenanceOn = async (db: string) => {
  await mkdir(path.dirname(flag(db)), { recursive: true });
  await writeFile(flag(db), 'on');
};

describe('a restore whose backup server died is put right by the next sweep', () => {
  it('before the swap (restored beside the live instance): what it restored goes, the live instance is as it was', async () => {
    const r = await restoreUnderWay();
    const row = await swept(r.id);
    expect(row.error).toBe(
      `interrupted: the backup server stopped before the swap: ${r.restored} dropped; the live instance was left as it was`,
    );
    expect(await stateOf(r.db, r.dir)).toEqual(r.live);
    expect(await recordedOid(r.sub.id)).toBe(r.live.oid);
    expect(await leftovers(r.db, r.id)).toEqual([]);
  }, 120_000);

  it('half-way through renaming the databases (the live one set aside, none under its name): put back', async () => {
    const r = await restoreUnderWay();
    await maintenanceOn(r.db);
    await rename_(r.db, r.safety);
    const row = await swept(r.id);
    expect(row.error).toContain(`during the swap, with ${r.db} renamed to ${r.safety}: renamed back`);
    expect(row.error).toContain('the live instance was put back as it was');
    expect(await stateOf(r.db, r.dir)).toEqual(r.live);
    expect(await recordedOid(r.sub.id)).toBe(r.live.oid);
    expect(await leftovers(r.db, r.id)).toEqual([]);
    expect(await exists(flag(r.db))).toBe(false);
  }, 120_000);

  it('half-way through renaming the databases with the filestores already swapped (the restored one in the live place): put back', async () => {
    const r = await restoreUnderWay();
    await maintenanceOn(r.db);
    await rename_(r.db, r.safety);
    await rename(r.dir, r.old);
    await rename(r.restoredDir, r.dir);
    const row = await swept(r.id);
    expect(row.error).toContain('the live instance was put back as it was');
    expect(await stateOf(r.db, r.dir)).toEqual(r.live);
    expect(await recordedOid(r.sub.id)).toBe(r.live.oid);
    expect(await leftovers(r.db, r.id)).toEqual([]);
    expect(await exists(flag(r.db))).toBe(false);
  }, 120_000);

  it('the restored database under the live name but not recorded, the live filestore moved aside: put back', async () => {
    const r = await restoreUnderWay();
    await maintenanceOn(r.db);
    await rename_(r.db, r.safety);
    await rename_(r.restored, r.db);
    await rename(r.dir, r.old); // stopped inside the filestores' swap: the restored one still beside
    const row = await swept(r.id);
    expect(row.error).toContain(`after the restored database took ${r.db}'s name, before it was recorded`);
    expect(row.error).toContain('the live instance was put back as it was');
    expect(await stateOf(r.db, r.dir)).toEqual(r.live);
    expect(await recordedOid(r.sub.id)).toBe(r.live.oid);
    expect(await leftovers(r.db, r.id)).toEqual([]);
    expect(await exists(flag(r.db))).toBe(false);
  }, 120_000);

  it('after the restore was done and recorded, before its safety copy was dropped: the safety copy goes, the restored instance stays, the restore is done', async () => {
    const r = await restoreUnderWay();
    await rename_(r.db, r.safety);
    await rename_(r.restored, r.db);
    await rename(r.dir, r.old);
    await rename(r.restoredDir, r.dir);
    await t.ctx.db.subscription.update({ where: { id: r.sub.id }, data: { database_oid: BigInt(r.fromBackup.oid!) } });
    // Done, not failed: the instance is the restored one, as svc's restore asked.
    const row = await swept(r.id, 'done');
    expect(row.error).toBeNull();
    expect(await stateOf(r.db, r.dir)).toEqual(r.fromBackup);
    expect(await recordedOid(r.sub.id)).toBe(r.fromBackup.oid);
    expect(await leftovers(r.db, r.id)).toEqual([]);
  }, 120_000);

  it('what fits no step of a restore (neither database the recorded one) is left as it is, the error saying what is where', async () => {
    const r = await restoreUnderWay();
    await maintenanceOn(r.db);
    await rename_(r.db, r.safety);
    await rename_(r.restored, r.db);
    await t.ctx.db.subscription.update({ where: { id: r.sub.id }, data: { database_oid: 4242n } });
    const row = await swept(r.id);
    expect(row.error).toBe(
      `interrupted: the backup server stopped during the swap, and what it left fits no step of it: ${r.db} (oid ${r.fromBackup.oid}) and ` +
        `${r.safety} (oid ${r.live.oid}) both exist, the subscription records oid 4242; on the Odoo host: ` +
        `${r.dir} ${r.restoredDir}; nothing was changed: tell which is the live database and put it back by hand`,
    );
    expect(await stateOf(r.db, r.dir)).toMatchObject({ oid: r.fromBackup.oid, files: r.live.files });
    expect(await oidOf(r.safety)).toBe(r.live.oid);
    expect(await exists(r.restoredDir)).toBe(true);
    expect(await exists(flag(r.db))).toBe(false);
  }, 120_000);
});
