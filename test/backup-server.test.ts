// svc's own backup server against real parts: svc's API and workers, the real PostgreSQL, a real
// sshd as the Odoo host holding the filestore, restic on a local repository. svc's backup, restore
// and compute_backup_state actions talk to it over HTTP exactly as to any backup server.
import { execFileSync } from 'node:child_process';
import { mkdir, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { request, waitForJob } from './helpers/api.js';
import { useBackupServer } from './helpers/backup-server.js';
import { createRepositories } from '../src/backup-server/repositories.js';
import { createRestic } from '../src/backup-server/restic.js';
import { act } from './helpers/lifecycle.js';
import { useOdooHost } from './helpers/odoo-host.js';
import { queryIn, TENANT_ROLE } from './helpers/odoo-template.js';

const f = useOdooHost({ 'ab/logo': 'logo bytes' });
const { t } = f;
const bs = useBackupServer(t);

async function job(res: { statusCode: number; body: string; json(): { job_id: string } }) {
  expect(res.statusCode, res.body).toBe(202);
  return waitForJob(t.app, t.as.admin, res.json().job_id, 120_000);
}

beforeAll(async () => {
  execFileSync('sh', ['-c', 'id odoo >/dev/null 2>&1 || useradd --system --user-group --no-create-home --shell /usr/sbin/nologin odoo']);
  await t.ctx.db.rootServer.update({ where: { id: f.rootServerId }, data: { odoo_db_user: TENANT_ROLE } });
});

describe("svc's backup server", () => {
  it('answers svc: test_connection, sync_cloud_accounts (none yet); a wrong key is refused', async () => {
    const ping = await request(t.app, t.as.operator, { method: 'POST', url: `/api/v1/backup-servers/${bs.id}/actions/test_connection` });
    expect(ping.statusCode, ping.body).toBe(200);
    const sync = await request(t.app, t.as.operator, {
      method: 'POST',
      url: `/api/v1/backup-servers/${bs.id}/actions/sync_cloud_accounts`,
    });
    expect(sync.json()).toMatchObject({ created: 0, deleted: 0 });
    const refused = await fetch(`${bs.url}/api/ping`, { headers: { 'X-API-Key': 'wrong' } });
    expect(refused.status).toBe(401);
    expect(await refused.text()).not.toContain(bs.apiKey);
  });

  it('backs up a tenant as one unit (database and filestore) and restores both after they changed', async () => {
    const sub = await f.fx.deployed();
    const db = sub.database_name;
    const files = f.filestore(db);
    await mkdir(path.join(files, 'cd'), { recursive: true });
    await writeFile(path.join(files, 'cd', 'upload'), 'an uploaded file');
    await queryIn(db, "INSERT INTO res_partner (name) VALUES ('Kept partner')");

    const backup = await job(await act(t, sub.id, 'backup'));
    expect(backup.state, backup.error).toBe('completed');
    const [done] = await bs.backups(db);
    expect(done).toMatchObject({ state: 'done', filestore: true, files: 2 });

    // The download is Odoo's backup zip; a forged or expired link is refused.
    const zip = await fetch(done!.url!);
    expect(zip.status).toBe(200);
    const zipFile = path.join(bs.dir, 'download.zip');
    await writeFile(zipFile, Buffer.from(await zip.arrayBuffer()));
    const names = execFileSync('unzip', ['-Z1', zipFile]).toString().split('\n').filter(Boolean).sort();
    expect(names).toEqual(expect.arrayContaining(['dump.sql', 'manifest.json', 'filestore/ab/logo', 'filestore/cd/upload']));
    expect(execFileSync('unzip', ['-p', zipFile, 'dump.sql']).toString()).toContain('Kept partner');
    const forged = new URL(done!.url!);
    forged.searchParams.set('expires', String(Number(forged.searchParams.get('expires')) + 1));
    expect((await fetch(forged)).status).toBe(403);

    // The tenant changes: a file and a record go, another record comes.
    await rm(path.join(files, 'cd', 'upload'));
    await queryIn(db, "DELETE FROM res_partner WHERE name = 'Kept partner'");
    await queryIn(db, "INSERT INTO res_partner (name) VALUES ('After the backup')");

    const restore = await job(
      await request(t.app, t.as.admin, {
        method: 'POST',
        url: `/api/v1/subscriptions/${sub.id}/actions/restore`,
        payload: { backup_id: done!.id },
      }),
    );
    expect(restore.state, restore.error).toBe('completed');
    const names2 = (await queryIn<{ name: string }>(db, 'SELECT name FROM res_partner ORDER BY id')).map((r) => r.name);
    expect(names2).toContain('Kept partner');
    expect(names2).not.toContain('After the backup');
    expect(await readFile(path.join(files, 'cd', 'upload'), 'utf8')).toBe('an uploaded file');
    // Nothing of the restore is left beside it.
    expect((await readdir(path.dirname(files))).filter((n) => n.startsWith(db) && n !== db)).toEqual([]);
  }, 240_000);
  it('restores into another database only when it is a staging copy of this subscription being made (400 otherwise, nothing asked of the runner)', async () => {
    const [a, b] = [await f.fx.deployed(), await f.fx.deployed()];
    const made = await job(await act(t, a.id, 'backup'));
    expect(made.state, made.error).toBe('completed');
    const [done] = await bs.backups(a.database_name);
    const restore = (target: string) =>
      fetch(`${bs.url}/svc/database/restore`, {
        method: 'POST',
        headers: { 'X-API-Key': bs.apiKey, 'content-type': 'application/json' },
        body: JSON.stringify({ db_name: a.database_name, backup_id: done!.id, target_db_name: target }),
      });
    for (const target of [b.database_name, `${a.database_name}_elsewhere`]) {
      const res = await restore(target);
      expect(res.status, target).toBe(400);
      expect(await res.text()).toMatch(/is not a staging copy of/);
    }
    expect(await t.ctx.db.backupRestore.count({ where: { db_name: a.database_name } })).toBe(0);
    const ping = await fetch(`${bs.url}/api/ping`, { headers: { 'X-API-Key': bs.apiKey } });
    expect(await ping.json()).toEqual({ ok: true, restore_into: true });
  }, 240_000);

  it("writes each dump of a database with the same \\restrict key (pg_dump's random one made every dump new to restic)", async () => {
    const sub = await f.fx.deployed();
    const firstLines: string[] = [];
    for (const n of [1, 2]) {
      const made = await job(await act(t, sub.id, 'backup'));
      expect(made.state, made.error).toBe('completed');
      const [latest] = await bs.backups(sub.database_name);
      const zip = path.join(bs.dir, `restrict-${n}.zip`);
      await writeFile(zip, Buffer.from(await (await fetch(latest!.url!)).arrayBuffer()));
      const dump = execFileSync('unzip', ['-p', zip, 'dump.sql']).toString();
      firstLines.push(dump.split('\n').find((l) => l.startsWith('\\restrict')) ?? 'none');
    }
    expect(firstLines[0]).toMatch(/^\\restrict [0-9a-f]{40}$/);
    expect(firstLines[1]).toBe(firstLines[0]);
  }, 240_000);
  it('answers 400 to unknown fields, out-of-range ids and a cloud repository on a loopback address outside OUTBOUND_ALLOW_NETS', async () => {
    const call = (method: string, url: string, body?: object) =>
      fetch(`${bs.url}${url}`, {
        method,
        headers: { 'X-API-Key': bs.apiKey, ...(body ? { 'content-type': 'application/json' } : {}) },
        body: body ? JSON.stringify(body) : undefined,
      });
    expect((await call('POST', '/svc/database/backup', { db_name: 'x', surprise: 1 })).status).toBe(400);
    expect((await call('POST', '/svc/database/restore', { db_name: 'x', backup_id: 2147483648 })).status).toBe(400);
    expect((await call('GET', '/api/restores/2147483648')).status).toBe(400);
    expect((await call('DELETE', '/api/cloud-accounts/0x1')).status).toBe(400);
    expect((await call('GET', '/api/backups?db_name=x&more=1')).status).toBe(400);
    const s3 = { access_key_id: 'a', secret_access_key: 's' };
    expect(
      (
        await call('POST', '/api/cloud-accounts', {
          provider: 's3',
          repository: 's3:http://127.0.0.1:9/b',
          credentials: { ...s3, extra: 'x' },
        })
      ).status,
    ).toBe(400);
    // The tests allow loopback (OUTBOUND_ALLOW_NETS); a backup server without that entry refuses it, by address and by name.
    const strict = createRepositories(
      { ...t.ctx, config: { ...t.ctx.config, OUTBOUND_ALLOW_NETS: [] } },
      createRestic({ cacheDir: bs.dir, PATH: t.ctx.config.PATH }),
      bs.id,
    );
    for (const repository of ['s3:http://127.0.0.1:9/b', 's3:http://localhost:9/b']) {
      await expect(strict.addCloudAccount({ provider: 's3', repository, credentials: s3 })).rejects.toThrow(/loopback address/);
    }
    await expect(
      strict.addCloudAccount({
        provider: 'sftp',
        repository: 'sftp:backup@127.0.0.1:/srv',
        credentials: { private_key: 'k', known_hosts: 'h' },
      }),
    ).rejects.toThrow(/loopback address/);
    expect(await t.ctx.db.backupRepository.count({ where: { backup_server_id: bs.id, provider: { not: 'local' } } })).toBe(0);
  });
});
