// svc's own backup server when a backup cannot be made: the tenant's database or its Odoo host out of
// reach, a cloud account refusing, a disk full, the process dying mid-backup. Each backup ends
// failed with its cause (never done) and leaves no snapshot of it in any repository; svc's backup
// job fails with that cause. And backups are paced: one per Odoo host at a time, BACKUP_CONCURRENCY
// in all. Real parts: PostgreSQL, a real sshd as the Odoo host, restic, the S3 stand-in.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cp, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Caller, confirmedRootServer, request, waitForJob } from './helpers/api.js';
import { withConfig } from './helpers/app.js';
import { useBackupServer } from './helpers/backup-server.js';
import { backupServerCalls, eventually, type BackupServerCalls } from './helpers/backup-server-calls.js';
import { act } from './helpers/lifecycle.js';
import { CLOSED } from './helpers/loopback.js';
import { useOdooHost } from './helpers/odoo-host.js';
import { TENANT_ROLE } from './helpers/odoo-template.js';
import { databaseUrl } from './helpers/pg.js';
import { startS3Server, type S3Server } from './helpers/s3-server.js';
import { TEST_USERS } from './helpers/sshd.js';

const f = useOdooHost({ 'ab/logo': 'logo bytes' });
const { t } = f;
const bs = useBackupServer(t);
const S3_KEY = { access_key_id: 'AKIASVCFAILURES0001', secret_access_key: 'svc-failures-s3-secret-7c1d93' };
const CLOSED_PORT = Number(CLOSED.split(':')[1]);

let s3: S3Server;
let bc: BackupServerCalls;

beforeAll(async () => {
  execFileSync('sh', ['-c', 'id odoo >/dev/null 2>&1 || useradd --system --user-group --no-create-home --shell /usr/sbin/nologin odoo']);
  await t.ctx.db.rootServer.update({ where: { id: f.rootServerId }, data: { odoo_db_user: TENANT_ROLE } });
  s3 = await startS3Server({ accounts: { [S3_KEY.access_key_id]: S3_KEY.secret_access_key } });
  bc = backupServerCalls(t, bs);
});

afterAll(async () => {
  await s3?.stop();
});

const requestBackup = (db: string) => bc.requestBackup(db);
const settled = (db: string, id: number, timeoutMs?: number) => bc.settled(db, id, timeoutMs);
const snapshotsTagged = (tag: string) => bc.snapshotsTagged(tag);
const call = (method: string, url: string, body?: unknown) => bc.call(method, url, body);

async function expectFailedWithoutSnapshot(db: string, id: number, cause: RegExp) {
  const backup = await settled(db, id);
  expect(backup.state).toBe('failed');
  expect(backup.error).toMatch(cause);
  expect(backup.url).toBeNull();
  expect(await snapshotsTagged(`backup:${id}`)).toEqual([]);
  return backup;
}

describe('a backup that cannot be made is failed with its cause and leaves no snapshot', () => {
  it("the tenant's database out of reach (its PostgreSQL server's record at a closed port)", async () => {
    const sub = await f.fx.deployed();
    const [closed] = await t.ctx.db.$queryRaw<{ id: number }[]>`
      INSERT INTO postgresql_servers (name, ip, port, username, password, updated_at)
      VALUES ('closed', '127.0.0.1', ${CLOSED_PORT}, 'postgres', NULL, now()) RETURNING id`;
    const before = await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: sub.id } });
    await t.ctx.db.subscription.update({ where: { id: sub.id }, data: { postgresql_server_id: closed!.id } });
    try {
      const id = await requestBackup(sub.database_name);
      await expectFailedWithoutSnapshot(
        sub.database_name,
        id,
        new RegExp(`Could not connect to database ${sub.database_name} on 127\\.0\\.0\\.1:${CLOSED_PORT}`),
      );
    } finally {
      await t.ctx.db.subscription.update({ where: { id: sub.id }, data: { postgresql_server_id: before.postgresql_server_id } });
    }
  }, 180_000);

  it("its Odoo host out of reach (the root server's port closed): svc's backup job fails with that cause", async () => {
    const sub = await f.fx.deployed();
    const host = await t.ctx.db.rootServer.findUniqueOrThrow({ where: { id: f.rootServerId } });
    await t.ctx.db.rootServer.update({ where: { id: host.id }, data: { port: CLOSED_PORT } });
    try {
      const res = await act(t, sub.id, 'backup');
      expect(res.statusCode, res.body).toBe(202);
      const job = await withConfig(t, { BACKUP_POLL_MS: 100 }, () => waitForJob(t.app, t.as.admin, res.json().job_id, 150_000));
      expect(job.state).toBe('failed');
      const cause = new RegExp(`Odoo host .* \\(root server ${host.id}\\) could not be reached`);
      expect(job.error).toMatch(cause);
      const [listed] = await bs.backups(sub.database_name);
      await expectFailedWithoutSnapshot(sub.database_name, listed!.id, cause);
    } finally {
      await t.ctx.db.rootServer.update({ where: { id: host.id }, data: { port: host.port } });
    }
  }, 180_000);

  it('a cloud account refusing (its access withdrawn): the local snapshot made first is forgotten', async () => {
    const sub = await f.fx.deployed();
    const added = await call('POST', '/api/cloud-accounts', {
      provider: 's3',
      name: 'refusing',
      repository: `s3:${s3.endpoint}/failures/refusing`,
      credentials: S3_KEY,
    });
    expect(added.status, added.text).toBe(201);
    await t.ctx.db.backupServer.update({ where: { id: bs.id }, data: { enable_cloud_backup: true } });
    const packs = async () => (await readdir(path.join(bs.dir, 'repository', 'data'), { recursive: true })).length;
    const packsBefore = await packs();
    s3.refuse(true);
    try {
      const id = await requestBackup(sub.database_name);
      const backup = await settled(sub.database_name, id);
      expect(backup).toMatchObject({ state: 'failed', url: null });
      expect(backup.error).toMatch(/refused access.*Access Denied/s);
      expect(await packs()).toBeGreaterThan(packsBefore); // the local repository took the tenant's data first
      // The snapshot the local repository had (made first) was forgotten; the account's was never made.
      s3.refuse(false);
      expect(await snapshotsTagged(`db:${sub.database_name}`)).toEqual([]);
    } finally {
      s3.refuse(false);
      await t.ctx.db.backupServer.update({ where: { id: bs.id }, data: { enable_cloud_backup: false } });
      expect((await call('DELETE', `/api/cloud-accounts/${added.json().id}`)).status).toBe(204);
    }
  }, 300_000);

  it('a disk full: the work folder on a small tmpfs', async () => {
    const sub = await f.fx.deployed();
    const work = path.join(bs.dir, 'work');
    await mkdir(work, { recursive: true });
    await writeFile(path.join(f.filestore(sub.database_name), 'big'), randomBytes(2_000_000));
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=512k', 'tmpfs', work]);
    try {
      const id = await requestBackup(sub.database_name);
      await expectFailedWithoutSnapshot(sub.database_name, id, /No space left on device/);
    } finally {
      execFileSync('umount', [work]);
    }
  }, 180_000);

  it('a disk full: the local repository on a small tmpfs', async () => {
    const sub = await f.fx.deployed();
    await writeFile(path.join(f.filestore(sub.database_name), 'big'), randomBytes(3_000_000));
    const local = path.join(bs.dir, 'repository');
    const kept = await mkdtemp(path.join(tmpdir(), 'svc-repository-'));
    await cp(local, kept, { recursive: true });
    const used = Number(execFileSync('du', ['-sb', local]).toString().split('\t')[0]);
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${used + 1_000_000}`, 'tmpfs', local]);
    try {
      await cp(kept, local, { recursive: true });
      const id = await requestBackup(sub.database_name);
      await expectFailedWithoutSnapshot(sub.database_name, id, /no space left on device/i);
    } finally {
      execFileSync('umount', [local]);
      await rm(kept, { recursive: true, force: true });
    }
  }, 300_000);
});

describe('a backup server process that died mid-backup', () => {
  it('leaves a running backup whose lease ran out: failed as interrupted by the next sweep, its snapshot forgotten', async () => {
    const sub = await f.fx.deployed();
    const row = await t.ctx.db.tenantBackup.create({
      data: {
        backup_server_id: bs.id,
        db_name: sub.database_name,
        subscription_id: sub.id,
        state: 'running',
        started_at: new Date(Date.now() - 10 * 60_000),
        // Held while the test makes what the dead process left (the runner sweeps every 5 s).
        lease_until: new Date(Date.now() + 10 * 60_000),
      },
    });
    // What the dead process had stored of it: a snapshot with its tags in the local repository.
    const dir = await mkdtemp(path.join(tmpdir(), 'svc-partial-'));
    await writeFile(path.join(dir, 'dump.sql'), '-- cut short');
    await bc.restic.backup(await bc.local(), dir, { tags: [`db:${sub.database_name}`, `backup:${row.id}`], host: 'svc' });
    await rm(dir, { recursive: true, force: true });
    expect(await snapshotsTagged(`backup:${row.id}`)).toHaveLength(1);
    // Its process is gone: the lease runs out.
    await t.ctx.db.tenantBackup.update({ where: { id: row.id }, data: { lease_until: new Date(Date.now() - 60_000) } });

    const failed = await settled(sub.database_name, row.id, 30_000);
    expect(failed.state).toBe('failed');
    expect(failed.error).toMatch(/interrupted/);
    await eventually(async () => expect(await snapshotsTagged(`backup:${row.id}`)).toEqual([]));
  }, 60_000);
});

describe('backups are paced', () => {
  /** A root server record of its own for the same sshd (another Odoo host, as far as svc can tell). */
  async function anotherHost(): Promise<number> {
    const root = await confirmedRootServer(t.app, t.as.operator, f.sshd, {
      username: TEST_USERS.sudoNoPassword.name,
      password: TEST_USERS.sudoNoPassword.password,
      sudo_user: true,
      sudo_user_no_password: true,
    });
    await t.ctx.db.rootServer.update({ where: { id: root.id }, data: { odoo_db_user: TENANT_ROLE } });
    return root.id;
  }

  /** A tenant whose res_partner is held (ACCESS EXCLUSIVE) until release(): its backup's pg_dump waits on it, running. */
  async function held(db: string) {
    const client = new pg.Client({ connectionString: databaseUrl(db) });
    client.on('error', () => {}); // a test that failed leaves it to the file's clean-up
    await client.connect();
    await client.query('BEGIN');
    await client.query('LOCK TABLE public.res_partner IN ACCESS EXCLUSIVE MODE');
    let open = true;
    return async () => {
      if (!open) return;
      open = false;
      await client.query('COMMIT');
      await client.end();
    };
  }

  /**
   * Returns once the runner has looked for work after this call: a running backup with its lease
   * run out is put in twice, each failed by a tick's sweep; ticks never overlap, so the first tick
   * (which started after the call) has claimed what it would before the second one sweeps.
   */
  async function runnerLooked() {
    for (let i = 0; i < 2; i++) {
      const row = await t.ctx.db.tenantBackup.create({
        data: { backup_server_id: bs.id, db_name: 'svc_runner_sentinel', state: 'running', lease_until: new Date(Date.now() - 1000) },
      });
      await eventually(async () => expect((await t.ctx.db.tenantBackup.findUniqueOrThrow({ where: { id: row.id } })).state).toBe('failed'));
      await t.ctx.db.tenantBackup.delete({ where: { id: row.id } });
    }
  }

  const rowOf = (id: number) => t.ctx.db.tenantBackup.findUniqueOrThrow({ where: { id } });

  it('one at a time per Odoo host: the second tenant of a host waits until the first is done', async () => {
    const a = await f.fx.deployed();
    const b = await f.fx.deployed();
    const release = await held(a.database_name);
    try {
      const first = await requestBackup(a.database_name);
      await eventually(async () => expect((await rowOf(first)).state).toBe('running'));
      const second = await requestBackup(b.database_name);
      await runnerLooked();
      expect((await rowOf(first)).state).toBe('running');
      expect((await rowOf(second)).state).toBe('pending');
      await release();
      expect((await settled(a.database_name, first)).state).toBe('done');
      expect((await settled(b.database_name, second)).state).toBe('done');
      expect((await rowOf(second)).started_at!.getTime()).toBeGreaterThanOrEqual((await rowOf(first)).finished_at!.getTime());
    } finally {
      await release();
    }
  }, 180_000);

  it('BACKUP_CONCURRENCY at once in all (tenants of three hosts, 2 at a time)', async () => {
    expect(t.ctx.config.BACKUP_CONCURRENCY).toBe(2);
    const subs = [await f.fx.deployed(), await f.fx.deployed(), await f.fx.deployed()];
    for (const [i, sub] of subs.entries())
      if (i > 0) await t.ctx.db.subscription.update({ where: { id: sub.id }, data: { root_server_id: await anotherHost() } });
    const releases = [await held(subs[0]!.database_name), await held(subs[1]!.database_name)];
    try {
      const ids = [await requestBackup(subs[0]!.database_name), await requestBackup(subs[1]!.database_name)];
      await eventually(async () => {
        for (const id of ids) expect((await rowOf(id)).state).toBe('running');
      });
      ids.push(await requestBackup(subs[2]!.database_name));
      await runnerLooked();
      expect((await rowOf(ids[2]!)).state).toBe('pending');
      await releases[0]!();
      expect((await settled(subs[2]!.database_name, ids[2]!)).state).toBe('done');
      // The third took the first one's slot while the second still ran.
      expect((await rowOf(ids[2]!)).started_at!.getTime()).toBeGreaterThanOrEqual((await rowOf(ids[0]!)).finished_at!.getTime());
      expect((await rowOf(ids[1]!)).state).toBe('running');
      await releases[1]!();
      expect((await settled(subs[1]!.database_name, ids[1]!)).state).toBe('done');
    } finally {
      for (const release of releases) await release();
    }
  }, 180_000);
});

describe('secrets', () => {
  /** Every command line /proc shows while `work` runs, read every few milliseconds. */
  async function commandLinesDuring(work: () => Promise<void>): Promise<string[]> {
    const seen = new Set<string>();
    let done = false;
    const watching = (async () => {
      while (!done) {
        for (const pid of await readdir('/proc')) {
          if (!/^\d+$/.test(pid)) continue;
          const line = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
          if (line) seen.add(line.replaceAll('\0', ' ').trim());
        }
        await new Promise((r) => setTimeout(r, 10));
      }
    })();
    try {
      await work();
    } finally {
      done = true;
      await watching;
    }
    return [...seen];
  }

  it("the API key, the repositories' passwords and the cloud credentials are in no answer, log line, action log row or command line", async () => {
    const sub = await f.fx.deployed();
    const answers: string[] = [];
    const onServer = async (method: string, url: string, body?: unknown) => {
      const res = await call(method, url, body);
      answers.push(res.text);
      return res;
    };
    const onSvc = async (caller: Caller, opts: { method: 'GET' | 'POST'; url: string; payload?: object }) => {
      const res = await request(t.app, caller, opts);
      answers.push(res.body);
      return res;
    };
    const job = async (res: { json(): { job_id: string } }) => {
      const ended = await withConfig(t, { BACKUP_POLL_MS: 100 }, () => waitForJob(t.app, t.as.admin, res.json().job_id, 150_000));
      answers.push(JSON.stringify(ended));
      expect(ended.state, ended.error).toBe('completed');
    };

    const sftpDir = `/home/${TEST_USERS.key.name}/svc-failures-${randomBytes(4).toString('hex')}`;
    const sftpKnownHosts = await readFile(path.join(f.sshd.dir, 'host_ed25519.pub'), 'utf8');
    const operatorPassword = 'an-operator-chosen-restic-password-5e1b';
    const wrongSecret = 'a-wrong-s3-secret-given-once-77aa';
    const accounts = [
      await onServer('POST', '/api/cloud-accounts', {
        provider: 's3',
        name: 's3',
        repository: `s3:${s3.endpoint}/secrets/repository`,
        credentials: S3_KEY,
        password: operatorPassword,
      }),
      await onServer('POST', '/api/cloud-accounts', {
        provider: 'sftp',
        name: 'sftp',
        repository: `sftp:${TEST_USERS.key.name}@${f.sshd.host}:${sftpDir}`,
        credentials: { private_key: f.sshd.keys.ed25519Openssh, known_hosts: sftpKnownHosts, port: f.sshd.port },
      }),
    ];
    for (const a of accounts) expect(a.status, a.text).toBe(201);
    const refused = await onServer('POST', '/api/cloud-accounts', {
      provider: 's3',
      repository: `s3:${s3.endpoint}/secrets/refused`,
      credentials: { ...S3_KEY, secret_access_key: wrongSecret },
    });
    expect(refused.status, refused.text).toBe(400);
    await t.ctx.db.backupServer.update({ where: { id: bs.id }, data: { enable_cloud_backup: true } });
    try {
      const lines = await commandLinesDuring(async () => {
        await onSvc(t.as.operator, { method: 'POST', url: `/api/v1/backup-servers/${bs.id}/actions/test_connection` });
        await onSvc(t.as.operator, { method: 'POST', url: `/api/v1/backup-servers/${bs.id}/actions/sync_cloud_accounts` });
        await job(await act(t, sub.id, 'backup'));
        const [backup] = await bs.backups(sub.database_name);
        await job(
          await onSvc(t.as.admin, {
            method: 'POST',
            url: `/api/v1/subscriptions/${sub.id}/actions/restore`,
            payload: { backup_id: backup!.id },
          }),
        );
      });
      const restic = lines.filter((l) => /^restic /.test(l));
      expect(restic.some((l) => l.includes(' backup '))).toBe(true);
      expect(lines.some((l) => l.includes(`${TEST_USERS.key.name}@${f.sshd.host}`))).toBe(true); // restic's ssh to the SFTP account

      for (const url of ['/api/ping', '/api/cloud-accounts', `/api/backups?db_name=${sub.database_name}`]) await onServer('GET', url);
      for (const url of [
        `/api/v1/backup-servers/${bs.id}`,
        `/api/v1/backup-servers/${bs.id}/cloud-accounts`,
        `/api/v1/subscriptions/${sub.id}/messages`,
      ])
        await onSvc(t.as.admin, { method: 'GET', url });

      const secrets = [
        bs.apiKey,
        S3_KEY.secret_access_key,
        S3_KEY.access_key_id,
        wrongSecret,
        operatorPassword,
        TEST_USERS.sudoNoPassword.password,
      ];
      for (const repo of await t.ctx.db.backupRepository.findMany({ where: { backup_server_id: bs.id } }))
        secrets.push((await t.ctx.secretBox.decrypt(repo.password))!);
      secrets.push(...f.sshd.keys.ed25519Openssh.split('\n').filter((l) => l.length >= 20));
      expect(secrets.length).toBeGreaterThan(8);
      const logRows = await t.ctx.db.actionLog.findMany();
      const places = {
        answers: answers.join('\n'),
        log: t.ctx.logText(),
        action_log: logRows.map((r) => `${r.input_text}\n${r.output_text}`).join('\n'),
        command_lines: lines.join('\n'),
      };
      for (const [where, text] of Object.entries(places))
        for (const secret of secrets) expect(text.includes(secret), `${where} holds ${secret.slice(0, 6)}…`).toBe(false);
    } finally {
      await t.ctx.db.backupServer.update({ where: { id: bs.id }, data: { enable_cloud_backup: false } });
      for (const a of accounts) if (a.status === 201) await call('DELETE', `/api/cloud-accounts/${a.json().id}`);
      await rm(sftpDir, { recursive: true, force: true });
    }
  }, 300_000);
});
