// [ODOO_SOURCE=<tarball>] npm run bench:backup [-- --db-mb 300 --files-mb 700 --tenants 50 --small-db-mb 5 --small-files-mb 5]
// svc's own backup server (npm run backup-server, a process of its own here, its local restic
// repository in a temporary BACKUP_DIR) against the real service on this machine: a local sshd as
// the Odoo host (root through sudo), the machine's PostgreSQL, and the host's Odoo: the real one of
// ODOO_SOURCE (its first tarball, prefork with --workers, default 2) or without it a stand-in on the
// host's Odoo port answering from each tenant's database (see backup-host.ts). One run measures:
// 1. a tenant of --db-mb of database and --files-mb of filestore (bench-tenant.ts): `pg_dump` +
//    `tar` of it to local files (one after the other and side by side; the faster is the
//    baseline), then its first backup (POST backup → done, through the backup server's API):
//    target ≤ 1.5× the baseline;
// 2. a second backup of it unchanged: what it added to the repository (restic's data_added, listed
//    as added_bytes) as a share of its size: target ≤ 2 %;
// 3. a restore of it (POST restore → done) after a few rows and a file were removed: target ≤ 2×
//    the first backup; the rows and the file are checked to be back;
// 4. --tenants small tenants (each filled with --small-db-mb and --small-files-mb), their round of
//    backups (all requested at once; the server's BACKUP_CONCURRENCY and its one-backup-per-host rule
//    apply) while a client asks each tenant's login page in turn on their Odoo host, and
//    /web/health, without pause: target 0 failed requests.
// Prints met/missed per target. Needs root (sshd, sudo, chown to odoo); with ODOO_SOURCE the OS
// packages of Odoo (run npm run test:odoo once). Port 19490 (the host's Odoo).
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chmod, mkdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { sleep } from '../src/core/sleep.js';
import { tenantSource } from '../src/backup-server/tenant-source.js';
import { captureUnit } from '../src/backup-server/unit-capture.js';
import { filestorePath } from '../src/instances/index.js';
import { basePathOf } from '../src/servers/index.js';
import { queryIn } from '../test/helpers/odoo-template.js';
import { startSmtpServer } from '../test/helpers/smtp.js';
import { freePort, startSshd } from '../test/helpers/sshd.js';
import { prepareHost, STAND_IN_QUERY, startOdooStandIn } from './backup-host.js';
import { startBenchService } from './bench-api.js';
import { createBenchContext, loadavg, runBench, verdict } from './bench-context.js';
import { fillTenant } from './bench-tenant.js';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
}
const DB_MB = arg('db-mb', 300);
const FILES_MB = arg('files-mb', 700);
const TENANTS = arg('tenants', 50);
const SMALL_DB_MB = arg('small-db-mb', 5);
const SMALL_FILES_MB = arg('small-files-mb', 5);
const WORKERS = arg('workers', 2);
const PORT = 19490;
const API_KEY = 'bench-backup-server-key-0123456789';
const ROOT = fileURLToPath(new URL('..', import.meta.url));

const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
const mb = (bytes: number) => `${(bytes / 1e6).toFixed(1)} MB`;
const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]! : 0;
};

/** A shell command's wall time. */
function timed(script: string): number {
  const t0 = performance.now();
  execFileSync('bash', ['-c', script], { stdio: ['ignore', 'ignore', 'inherit'] });
  return performance.now() - t0;
}

/** `npm run backup-server` as a process of its own, answering /api/ping. */
async function startBackupServerProcess(env: Record<string, string>, url: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/backup-server-main.ts'], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  for (let i = 0; i < 600; i++) {
    if (child.exitCode !== null) throw new Error(`the backup server exited (${child.exitCode})`);
    const ok = await fetch(`${url}/api/ping`, { headers: { 'x-api-key': API_KEY } }).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return child;
    await sleep(100);
  }
  throw new Error('the backup server did not answer /api/ping within 60 s');
}

async function stopProcess(child: ChildProcess) {
  if (child.exitCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await Promise.race([exited, sleep(30_000)]);
  if (child.exitCode === null) child.kill('SIGKILL');
}

interface Listed {
  id: number;
  state: string;
  size_bytes: number | null;
  added_bytes: number | null;
  files: number | null;
  error: string | null;
}

/** Asks each database's login page on the host in turn (X-Odoo-Database, as svc's proxy sends it), and /web/health, without pause. */
function askAllTheTime(databases: string[]) {
  const asked: { db: string | null; status: number | string }[] = [];
  let asking = true;
  const loop = (async () => {
    for (let i = 0; asking; i++) {
      const db = i % (databases.length + 1) === databases.length ? null : databases[i % (databases.length + 1)]!;
      try {
        const res = await fetch(`http://127.0.0.1:${PORT}${db ? '/web/login' : '/web/health'}`, {
          headers: db ? { 'x-odoo-database': db, 'x-forwarded-host': `${db}.odoo.test`, 'x-forwarded-proto': 'https' } : {},
          redirect: 'manual',
          signal: AbortSignal.timeout(30_000),
        });
        await res.arrayBuffer();
        asked.push({ db, status: res.status });
      } catch (err) {
        asked.push({ db, status: String((err as Error).cause ?? err) });
      }
    }
  })();
  return {
    asked,
    async stop() {
      asking = false;
      await loop;
    },
  };
}

async function main() {
  const odooSource = process.env.ODOO_SOURCE || undefined;
  const smtp = await startSmtpServer();
  const sshd = await startSshd();
  const standIn = odooSource ? null : await startOdooStandIn(PORT);
  const base = await mkdtemp(path.join(os.tmpdir(), 'svc-bench-backup-'));
  await chmod(base, 0o755);
  const bench = await createBenchContext('backup', {
    SMTP_URL: smtp.url,
    ODOO_BASE_PATH: base,
    ODOO_HTTP_PORT: String(PORT),
    SUBSCRIPTION_URL: 'https://{database_name}.odoo.test',
    ODOO_HEALTH_TIMEOUT_MS: '120000',
  });
  const { ctx } = bench;
  let closeAll = async () => {};
  let stopHost = async () => {};
  let server: ChildProcess | null = null;
  let client: ReturnType<typeof askAllTheTime> | null = null;
  try {
    const odoo = odooSource
      ? `the real Odoo of ${path.basename(odooSource)} (${WORKERS} workers)`
      : `a stand-in Odoo (each login page asked is answered from the tenant's database: ${STAND_IN_QUERY}, a new connection each)`;
    console.log(`# bench:backup — ${os.cpus().length} CPUs (${os.cpus()[0]?.model}); load average ${loadavg()}; the host's Odoo: ${odoo}`);
    const service = await startBenchService(ctx);
    closeAll = service.close;
    const { api } = service;
    const host = await prepareHost(ctx, api, sshd, { odooSource, port: PORT, workers: WORKERS });
    stopHost = host.stop;
    const rootRow = await ctx.db.rootServer.findUniqueOrThrow({ where: { id: host.rootId } });
    const filestoreOf = (db: string) => filestorePath(basePathOf(ctx.config, rootRow), db);

    // The backup server: its record in svc, then its process on a port of its own.
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const record = await api<{ id: number; backup_db_path: string; restore_db_path: string }>('POST', '/backup-servers', {
      url,
      download_url: `${url}/download`,
      api_key: API_KEY,
      enable_local_backup: true,
    });
    const backupDir = path.join(base, 'backup-server');
    server = await startBackupServerProcess(
      { ...bench.env, BACKUP_SERVER_ID: String(record.id), BACKUP_SERVER_PORT: String(port), BACKUP_DIR: backupDir },
      url,
    );
    const bs = async <T>(method: string, p: string, body?: object): Promise<T> => {
      const res = await fetch(`${url}${p}`, {
        method,
        headers: { 'x-api-key': API_KEY, ...(body ? { 'content-type': 'application/json' } : {}) },
        body: body ? JSON.stringify(body) : undefined,
      });
      if (!res.ok) throw new Error(`${method} ${p}: ${res.status} ${await res.text()}`);
      return (await res.json()) as T;
    };
    /** POST backup → done, as svc asks and follows it: the time and the listed backup. */
    const backupOf = async (db: string) => {
      const t0 = performance.now();
      const { id } = await bs<{ id: number }>('POST', record.backup_db_path, { db_name: db });
      for (;;) {
        const row = (await bs<Listed[]>('GET', `/api/backups?db_name=${db}`)).find((b) => b.id === id);
        if (row?.state === 'failed') throw new Error(`backup ${id} of ${db} failed: ${row.error}`);
        if (row?.state === 'done') return { ms: performance.now() - t0, row };
        await sleep(100);
      }
    };

    // 1. The large tenant; pg_dump + tar of it; its first backup.
    let t0 = performance.now();
    const big = await host.deploy('big');
    const bigFiles = filestoreOf(big.database);
    const sizes = await fillTenant(big.database, bigFiles, { db: DB_MB, files: FILES_MB });
    const tenantBytes = sizes.dbBytes + sizes.filesBytes;
    console.log(
      `tenant deployed and filled in ${secs(performance.now() - t0)}: database ${mb(sizes.dbBytes)}, filestore ${mb(sizes.filesBytes)} (${mb(tenantBytes)}); load average ${loadavg()}`,
    );
    const scratch = await mkdtemp(path.join(base, 'plain-'));
    await mkdir(path.join(scratch, 'unit'));
    const dump = `pg_dump -h 127.0.0.1 -p 5432 -U postgres --no-owner --no-privileges --file=${scratch}/dump.sql ${big.database}`;
    const tar = `tar -C ${bigFiles} -cf ${scratch}/filestore.tar .`;
    const oneAfterOther = timed(`${dump} && ${tar} && rm -f ${scratch}/dump.sql ${scratch}/filestore.tar`);
    const sideBySide = timed(`${dump} & d=$!; ${tar}; wait $d && rm -f ${scratch}/dump.sql ${scratch}/filestore.tar`);
    const plainMs = Math.min(oneAfterOther, sideBySide);
    console.log(
      `pg_dump + tar to local files: ${secs(oneAfterOther)} one after the other, ${secs(sideBySide)} side by side; load average ${loadavg()}`,
    );
    // Where a backup's time goes: restic alone on the same unit (dump.sql, filestore/), a fresh repository.
    const resticEnv = `export RESTIC_PASSWORD=bench RESTIC_CACHE_DIR=${scratch}/cache`;
    execFileSync('bash', [
      '-c',
      `${dump.replace('dump.sql', 'unit/dump.sql')} && cp -a ${bigFiles} ${scratch}/unit/filestore && ${resticEnv} && restic init -q -r ${scratch}/repo`,
    ]);
    const resticMs = timed(`${resticEnv} && cd ${scratch}/unit && restic backup -q -r ${scratch}/repo .`);
    await rm(scratch, { recursive: true, force: true });
    console.log(
      `restic backup alone of the same dump.sql and filestore/ (a fresh local repository): ${secs(resticMs)}; load average ${loadavg()}`,
    );
    t0 = performance.now();
    const unitDir = path.join(base, 'capture');
    await captureUnit(ctx, await tenantSource(ctx, big.database), unitDir, { user_id: null, job_id: null, operation: 'backup' });
    const captureMs = performance.now() - t0;
    await rm(unitDir, { recursive: true, force: true });
    console.log(
      `the backup server's capture alone (its code, in this process: pg_dump as the tenant's role and the filestore by tar over SSH, side by side, into a work dir): ${secs(captureMs)}; load average ${loadavg()}`,
    );
    const first = await backupOf(big.database);
    console.log(
      `first backup (POST → done): ${secs(first.ms)}; its size ${mb(first.row.size_bytes ?? 0)}, added ${mb(first.row.added_bytes ?? 0)}, ${first.row.files} files; the repository ${mb(Number(execFileSync('du', ['-sb', path.join(backupDir, 'repository')], { encoding: 'utf8' }).split('\t')[0]))} on disk; load average ${loadavg()}`,
    );

    // 2. The same tenant unchanged, backed up again.
    const second = await backupOf(big.database);
    const addedShare = (second.row.added_bytes ?? 0) / (second.row.size_bytes || 1);
    console.log(
      `second backup, unchanged (POST → done): ${secs(second.ms)}; added ${mb(second.row.added_bytes ?? 0)} of its ${mb(second.row.size_bytes ?? 0)} (${(addedShare * 100).toFixed(2)} %); load average ${loadavg()}`,
    );
    // Retention (7 daily: one backup a day) forgets the first and prunes; the restore waits for it (restic's lock).
    t0 = performance.now();
    while (performance.now() - t0 < 600_000 && (await bs<Listed[]>('GET', `/api/backups?db_name=${big.database}`)).length > 1)
      await sleep(250);
    const kept = (await bs<Listed[]>('GET', `/api/backups?db_name=${big.database}`)).map((b) => b.id);
    console.log(`retention after the second backup (forget + prune): ${secs(performance.now() - t0)}; backups listed: ${kept.join(', ')}`);

    // 3. Some rows and a file go; the restore brings them back.
    const rowsBefore = (await queryIn<{ n: number }>(big.database, 'SELECT count(*)::int AS n FROM bench_payload'))[0]!.n;
    await queryIn(big.database, 'DELETE FROM bench_payload WHERE id <= 100');
    await rm(path.join(bigFiles, 'bench', 'f1'), { force: true });
    t0 = performance.now();
    const restore = await bs<{ id: number }>('POST', record.restore_db_path, { db_name: big.database, backup_id: second.row.id });
    let restored: { state: string; error: string | null };
    for (;;) {
      restored = await bs<{ state: string; error: string | null }>('GET', `/api/restores/${restore.id}`);
      if (restored.state === 'done' || restored.state === 'failed') break;
      await sleep(100);
    }
    const restoreMs = performance.now() - t0;
    const rowsAfter = (await queryIn<{ n: number }>(big.database, 'SELECT count(*)::int AS n FROM bench_payload'))[0]!.n;
    const fileBack = execFileSync('bash', ['-c', `test -f ${bigFiles}/bench/f1 && echo yes || echo no`], { encoding: 'utf8' }).trim();
    console.log(
      `restore (POST → done): ${restored.state}${restored.error ? ` (${restored.error})` : ''} in ${secs(restoreMs)}; rows ${rowsAfter} of ${rowsBefore}, the removed file back: ${fileBack}; load average ${loadavg()}`,
    );
    const restoredRight = restored.state === 'done' && rowsAfter === rowsBefore && fileBack === 'yes';

    // 4. The small tenants' round while their host is asked without pause.
    t0 = performance.now();
    const small: string[] = [];
    for (let n = 1; n <= TENANTS; n += 5) {
      await Promise.all(
        Array.from({ length: Math.min(5, TENANTS - n + 1) }, async (_, i) => {
          const { database } = await host.deploy(`t${n + i}`);
          await fillTenant(database, filestoreOf(database), { db: SMALL_DB_MB, files: SMALL_FILES_MB });
          small[n + i - 1] = database;
        }),
      );
    }
    console.log(
      `${TENANTS} small tenants deployed and filled (${SMALL_DB_MB} MB of rows, ${SMALL_FILES_MB} MB of files each) in ${secs(performance.now() - t0)}; load average ${loadavg()}`,
    );
    client = askAllTheTime(small);
    await sleep(2000);
    t0 = performance.now();
    const ids = (await Promise.all(small.map((db) => bs<{ id: number }>('POST', record.backup_db_path, { db_name: db })))).map((r) => r.id);
    let rows: { state: string; created_at: Date; finished_at: Date | null; size_bytes: bigint | null }[] = [];
    for (;;) {
      rows = await ctx.db.tenantBackup.findMany({ where: { id: { in: ids } } });
      if (rows.every((r) => r.state === 'done' || r.state === 'failed')) break;
      await sleep(250);
    }
    const roundMs = performance.now() - t0;
    await sleep(2000);
    await client.stop();
    const asked = client.asked;
    client = null;
    const failed = asked.filter((a) => a.status !== 200);
    const done = rows.filter((r) => r.state === 'done');
    const each = done.map((r) => r.finished_at!.getTime() - r.created_at.getTime());
    const roundBytes = done.reduce((s, r) => s + Number(r.size_bytes ?? 0), 0);
    console.log(
      `round of ${TENANTS} backups (requested at once): ${secs(roundMs)}; ${done.length} done, ${rows.length - done.length} failed; ${mb(roundBytes)} in all; request → done p50 ${secs(pct(each, 50))}, max ${secs(Math.max(0, ...each))}; load average ${loadavg()}`,
    );
    console.log(
      `the host asked meanwhile: ${asked.length} requests (login pages of the ${TENANTS} tenants and /web/health), ${failed.length} failed${failed.length ? `: ${JSON.stringify(failed.slice(0, 5))}` : ''}`,
    );

    const firstRatio = first.ms / plainMs;
    const restoreRatio = restoreMs / first.ms;
    console.log(`\n# bench:backup — ${os.cpus().length} CPUs; load average at the end ${loadavg()}`);
    console.log(
      `${verdict(firstRatio <= 1.5)}: first backup of ${mb(tenantBytes)} ${secs(first.ms)} = ${firstRatio.toFixed(2)}× pg_dump + tar (${secs(plainMs)}) ≤ 1.5× (restic alone on those files ${secs(resticMs)}, the capture alone ${secs(captureMs)})`,
    );
    console.log(
      `${verdict(addedShare <= 0.02)}: second backup unchanged added ${mb(second.row.added_bytes ?? 0)} = ${(addedShare * 100).toFixed(2)} % of ${mb(second.row.size_bytes ?? 0)} ≤ 2 %`,
    );
    console.log(
      `${verdict(restoredRight && restoreRatio <= 2)}: restore ${secs(restoreMs)} = ${restoreRatio.toFixed(2)}× the first backup ≤ 2×${restoredRight ? '' : ' (NOT restored right)'}`,
    );
    console.log(
      `${verdict(failed.length === 0 && done.length === TENANTS)}: ${failed.length} failed of ${asked.length} requests to ${odooSource ? 'the real Odoo' : 'the stand-in Odoo'} of ${TENANTS} tenants during their round of backups (${done.length} of ${TENANTS} done in ${secs(roundMs)}) = 0`,
    );
  } finally {
    await client?.stop();
    if (server) await stopProcess(server);
    await stopHost();
    await closeAll();
    await bench.close(); // with the host's role, its template and every customer database and role
    standIn?.close();
    await smtp.close();
    await sshd.stop();
    await rm(base, { recursive: true, force: true });
  }
}

runBench(main);
