// ODOO_SOURCE=<tarball> npm run bench:move [-- --db-mb 300 --files-mb 700]
// A move and a staging copy (DESIGN §20) through the real service (HTTP API, jobs, workers) on this
// machine: two Odoo hosts (a local sshd, root through sudo; two host directories), the machine's
// PostgreSQL and a second cluster the bench starts, and the real Odoo of ODOO_SOURCE (its first
// tarball). One tenant is filled to about --db-mb of database (rows of its own table) and
// --files-mb of filestore (1 MB files), then:
// 1. create_staging while a client asks the live instance (JSON-RPC search_count) without pause:
//    its time, and the requests that failed (target 0);
// 2. move to the other host and cluster while the client keeps asking: the total time and the
//    freeze (target ≤ 30 s for 1 GB), and what the client saw.
// Needs root (sshd, sudo) and the OS packages of Odoo (run npm run test:odoo once). Ports 19390/19395.
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { benchOdooSource, serverWideModulesOf } from '../test/helpers/odoo-source.js';
import { startLocalCluster } from '../test/helpers/pg-cluster.js';
import { startSmtpServer, textOf } from '../test/helpers/smtp.js';
import { freePort, startSshd, TEST_USERS } from '../test/helpers/sshd.js';
import { completedJob, startBenchService } from './bench-api.js';
import { createBenchContext, loadavg, runBench, verdict } from './bench-context.js';
import { fillTenant } from './bench-tenant.js';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
}
const DB_MB = arg('db-mb', 300);
const FILES_MB = arg('files-mb', 700);
const PORT_A = 19390;
const PORT_B = 19395;

const secs = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** One JSON-RPC call to the Odoo on `port` of this machine: its answer (an HTTP error throws). */
async function jsonRpc(port: number, service: string, method: string, args: unknown[]): Promise<{ result?: unknown }> {
  const res = await fetch(`http://127.0.0.1:${port}/jsonrpc`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', method: 'call', id: 1, params: { service, method, args } }),
    signal: AbortSignal.timeout(30_000),
  });
  if (res.status !== 200) throw new Error(`HTTP ${res.status}`);
  return (await res.json()) as { result?: unknown };
}

/** Asks the instance without pause until stopped: every answer's time and whether it was right. */
function askAllTheTime(port: () => number, database: string, uid: number, password: string) {
  const asked: { at: number; ok: boolean }[] = [];
  let stop = false;
  const loop = (async () => {
    while (!stop) {
      const at = performance.now();
      let ok = false;
      try {
        const answer = await jsonRpc(port(), 'object', 'execute_kw', [database, uid, password, 'res.partner', 'search_count', [[]]]);
        ok = typeof answer.result === 'number';
      } catch {
        ok = false;
      }
      asked.push({ at, ok });
      if (!ok) await new Promise((r) => setTimeout(r, 100));
    }
  })();
  return {
    asked,
    async stop() {
      stop = true;
      await loop;
    },
  };
}

async function main() {
  const src = benchOdooSource('bench:move', process.env.ODOO_SOURCE);
  const smtp = await startSmtpServer();
  const sshd = await startSshd();
  const cluster = startLocalCluster(await freePort());
  const base = await mkdtemp(path.join(os.tmpdir(), 'svc-bench-move-'));
  await chmod(base, 0o755);
  const bench = await createBenchContext('move', {
    SMTP_URL: smtp.url,
    ODOO_BASE_PATH: base,
    SUBSCRIPTION_URL: 'https://{database_name}.odoo.test',
    STAGING_URL: 'https://{database_name}.staging.test',
    ODOO_HEALTH_TIMEOUT_MS: '120000',
  });
  const { ctx } = bench;
  let closeAll = async () => {};
  const hosts: number[] = [];
  let api: Awaited<ReturnType<typeof startBenchService>>['api'] | null = null;
  try {
    console.log(
      `Odoo ${src.series}.0; tenant ${DB_MB} MB of database + ${FILES_MB} MB of files; ${os.cpus().length} CPUs; load average ${loadavg()}`,
    );
    const service = await startBenchService(ctx);
    closeAll = service.close;
    api = service.api;
    const pgA = await api('POST', '/postgresql-servers', { name: 'local', ip: '127.0.0.1', port: 5432, username: 'postgres' });
    const pgB = await api('POST', '/postgresql-servers', { name: 'second', ip: '127.0.0.1', port: cluster.port, username: 'postgres' });
    const version = await api('POST', '/odoo-versions', {
      name: `${src.series}.0-bench-move`,
      source_url: `file://${src.file}`,
      source_sha256: src.sha256,
      os_packages: src.packages,
      server_wide_modules: serverWideModulesOf(src.series),
    });
    const host = async (pgServer: number, port: number, basePath: string) => {
      const root = await api!('POST', '/root-servers', {
        ip: sshd.host,
        port: sshd.port,
        username: TEST_USERS.sudoNoPassword.name,
        password: TEST_USERS.sudoNoPassword.password,
        sudo_user: true,
        sudo_user_no_password: true,
      });
      hosts.push(root.id);
      await api!('POST', `/root-servers/${root.id}/actions/confirm`);
      const job = await api!<{ job_id: string }>('POST', `/root-servers/${root.id}/actions/setup_odoo`, {
        odoo_version_id: version.id,
        postgresql_server_id: pgServer,
        http_port: port,
        base_path: basePath,
        workers: 0,
        max_cron_threads: 0,
      });
      await completedJob(api!, job.job_id);
      return root.id;
    };
    const hostA = await host(pgA.id, PORT_A, `${base}/a`);
    const hostB = await host(pgB.id, PORT_B, `${base}/b`);
    const templateDb = `${ctx.config.QUEUE_PREFIX}_tpl`;
    const template = await api('POST', '/database-templates', {
      name: 'bench move',
      postgresql_server_id: pgA.id,
      template_db_name: templateDb,
      root_server_id: hostA,
    });
    await completedJob(
      api,
      (await api<{ job_id: string }>('POST', `/database-templates/${template.id}/actions/build`, { modules: ['base'] })).job_id,
    );
    const email = `bench-move-${Date.now()}@example.com`;
    const partner = await api('POST', '/partners', { name: 'Bench', email });
    const database = `${ctx.config.QUEUE_PREFIX}_tenant`;
    const sub = await api('POST', '/subscriptions', {
      name: 'bench',
      partner_id: partner.id,
      database_template_id: template.id,
      database_name: database,
    });
    await api('POST', `/subscriptions/${sub.id}/actions/confirm`);
    await completedJob(api, (await api<{ job_id: string }>('POST', `/subscriptions/${sub.id}/actions/deploy`)).job_id);
    const text = textOf(await smtp.waitFor(email, 1, 60_000));
    const login = /Login: +(\S+)/.exec(text)![1]!;
    const password = /Password: +(\S+)/.exec(text)![1]!;

    // Fill it: rows of its own table (as its owner) and 1 MB files in its filestore.
    const filled = performance.now();
    const { dbBytes, filesBytes } = await fillTenant(database, `${base}/a/data/filestore/${database}`, { db: DB_MB, files: FILES_MB });
    const totalMb = (dbBytes + filesBytes) / 1e6;
    console.log(
      `tenant filled in ${secs(performance.now() - filled)}: database ${(dbBytes / 1e6).toFixed(0)} MB, filestore ${(filesBytes / 1e6).toFixed(0)} MB`,
    );

    const uid = (await jsonRpc(PORT_A, 'common', 'authenticate', [database, login, password, {}])).result as number;

    // 1. A staging copy while the live instance is asked.
    let port = PORT_A;
    let client = askAllTheTime(() => port, database, uid, password);
    let t0 = performance.now();
    const staging = await completedJob(
      api,
      (await api<{ job_id: string }>('POST', `/subscriptions/${sub.id}/actions/create_staging`)).job_id,
    );
    const stagingMs = performance.now() - t0;
    await client.stop();
    const stagingFailed = client.asked.filter((a) => !a.ok).length;
    console.log(
      `create_staging: ${secs(stagingMs)}; the live instance asked ${client.asked.length} times meanwhile, ${stagingFailed} failed; load average ${loadavg()}`,
    );
    void staging;

    // 2. The move while the client keeps asking (its port follows the instance at the switch).
    client = askAllTheTime(() => port, database, uid, password);
    t0 = performance.now();
    const job = await api<{ job_id: string }>('POST', `/subscriptions/${sub.id}/actions/move`, { root_server_id: hostB });
    const moved = (await completedJob(api, job.job_id)) as unknown as { result: { freeze_seconds: number; seconds: number } };
    port = PORT_B;
    const moveMs = performance.now() - t0;
    await new Promise((r) => setTimeout(r, 1000));
    await client.stop();
    const failedAt = client.asked.filter((a) => !a.ok).map((a) => a.at);
    const outage = failedAt.length ? Math.max(...failedAt) - Math.min(...failedAt) : 0;
    console.log(
      `move: ${secs(moveMs)} in all (the job ${moved.result.seconds.toFixed(1)} s); freeze ${moved.result.freeze_seconds.toFixed(1)} s; the client saw ${failedAt.length} failed answers of ${client.asked.length} over ${secs(outage)}; load average ${loadavg()}`,
    );
    const rate = totalMb / (moved.result.freeze_seconds || 1);
    console.log(`${verdict(stagingFailed === 0)}: the live instance answered throughout create_staging (${stagingFailed} failed)`);
    console.log(
      `${verdict(moved.result.freeze_seconds <= 30)}: freeze ${moved.result.freeze_seconds.toFixed(1)} s ≤ 30 s for a tenant of ${(totalMb / 1000).toFixed(2)} GB (${rate.toFixed(0)} MB of tenant per second of freeze)`,
    );
  } finally {
    for (const id of hosts) {
      const stop = await api?.<{ job_id: string }>('POST', `/root-servers/${id}/actions/stop_odoo`).catch(() => null);
      if (stop) await completedJob(api!, stop.job_id).catch(() => {});
    }
    await closeAll();
    cluster.stop();
    await bench.close(); // with the hosts' roles and every database and role made on this cluster
    await smtp.close();
    await sshd.stop();
    await rm(base, { recursive: true, force: true });
  }
}

runBench(main);
