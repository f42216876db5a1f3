// ODOO_SOURCE=<tarball> npm run bench:odoo [-- --visitors 20 --spread 10 --workers <n>]
// Odoo run by svc on a host (DESIGN §16), through the real service (HTTP pages, jobs, workers) on
// this machine as the host (a local sshd, root through sudo), the machine's PostgreSQL, mails on a
// local SMTP server, and the real Odoo of ODOO_SOURCE (its first tarball):
// 1. setup_odoo on a fresh ODOO_BASE_PATH of a host whose OS packages are present (the bench says
//    so first: it does not install them); target ≤ 60 s.
// 2. build of a template with base; target ≤ 30 s.
// 3. --visitors visitors within --spread seconds, with a ready standby pool of as many: from the
//    visitor's correct code until the customer has signed in to its instance with the password of
//    the ready mail (JSON-RPC common.authenticate on the host's Odoo); targets p50 ≤ 2 s, p95 ≤ 4 s.
// Prints Odoo's memory per process (odoo_status) and the machine's load. Needs root (sshd, sudo).
// Odoo's port: 18390 (the routing tests' range). No cron threads (as in test:odoo).
import { execFileSync } from 'node:child_process';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { sleep } from '../src/core/sleep.js';
import { createStandbyPool } from '../src/instances/standby-pool.js';
import { benchOdooSource, serverWideModulesOf } from '../test/helpers/odoo-source.js';
import { adminQuery } from '../test/helpers/pg.js';
import { codeFrom, startSmtpServer, textOf } from '../test/helpers/smtp.js';
import { startSshd, TEST_USERS } from '../test/helpers/sshd.js';
import { httpTransport, Visitor } from '../test/helpers/trial.js';
import { completedJob, startBenchService } from './bench-api.js';
import { createBenchContext, loadavg, runBench, verdict } from './bench-context.js';

function arg(name: string, fallback: number | undefined): number | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
}
const VISITORS = arg('visitors', 20)!;
const SPREAD_S = arg('spread', 10)!;
const WORKERS = arg('workers', undefined);
const PORT = 18390;

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
};
const secs = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
const mb = (bytes: number) => `${(bytes / 1024 ** 2).toFixed(0)} MB`;

/** JSON-RPC common.authenticate on the host's Odoo (this machine). */
async function signIn(database: string, login: string, password: string): Promise<unknown> {
  const res = await fetch(`http://127.0.0.1:${PORT}/jsonrpc`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      jsonrpc: '2.0',
      method: 'call',
      id: 1,
      params: { service: 'common', method: 'authenticate', args: [database, login, password, {}] },
    }),
  });
  return ((await res.json()) as { result?: unknown }).result;
}

async function main() {
  const src = benchOdooSource('bench:odoo', process.env.ODOO_SOURCE);
  const missing = execFileSync(
    'sh',
    ['-c', `dpkg-query -W -f='\${Package} \${Status}\\n' ${src.packages.join(' ')} 2>/dev/null | grep -c ' install ok installed$' || true`],
    {
      encoding: 'utf8',
    },
  ).trim();
  if (Number(missing) !== src.packages.length) {
    console.error(
      `Only ${missing} of the ${src.packages.length} OS packages Odoo ${src.series}.0 needs are installed: run npm run test:odoo once (it installs them), then the bench.`,
    );
    process.exit(2);
  }
  const smtp = await startSmtpServer();
  const sshd = await startSshd();
  const base = await mkdtemp(path.join(os.tmpdir(), 'svc-bench-odoo-'));
  await chmod(base, 0o755);
  const bench = await createBenchContext('odoo', {
    SMTP_URL: smtp.url,
    ODOO_BASE_PATH: base,
    SUBSCRIPTION_URL: 'https://{database_name}.odoo.test',
    TRUST_PROXY: '127.0.0.1',
    ODOO_HEALTH_TIMEOUT_MS: '120000',
  });
  const { ctx } = bench;
  const templateDb = `${ctx.config.QUEUE_PREFIX}_tpl`;
  let closeAll = async () => {};
  let rootId: number | null = null;
  let api: Awaited<ReturnType<typeof startBenchService>>['api'] | null = null;
  try {
    console.log(`Odoo ${src.series}.0 from ${src.file}; load average at start: ${loadavg()}; ${os.cpus().length} × ${os.cpus()[0]?.model}`);
    const service = await startBenchService(ctx);
    closeAll = service.close;
    api = service.api;
    const { address } = service;
    const pgServer = await api('POST', '/postgresql-servers', { name: 'local', ip: '127.0.0.1', port: 5432, username: 'postgres' });
    const root = await api('POST', '/root-servers', {
      ip: sshd.host,
      port: sshd.port,
      username: TEST_USERS.sudoNoPassword.name,
      password: TEST_USERS.sudoNoPassword.password,
      sudo_user: true,
      sudo_user_no_password: true,
    });
    rootId = root.id;
    await api('POST', `/root-servers/${root.id}/actions/confirm`);
    const version = await api('POST', '/odoo-versions', {
      name: `${src.series}.0-bench`,
      source_url: `file://${src.file}`,
      source_sha256: src.sha256,
      os_packages: src.packages,
      server_wide_modules: serverWideModulesOf(src.series),
    });

    // 1. setup_odoo on a fresh directory, the packages present.
    let t0 = performance.now();
    const setupJob = await api<{ job_id: string }>('POST', `/root-servers/${root.id}/actions/setup_odoo`, {
      odoo_version_id: version.id,
      postgresql_server_id: pgServer.id,
      http_port: PORT,
      max_cron_threads: 0,
      ...(WORKERS === undefined ? {} : { workers: WORKERS }),
    });
    const setup = (await completedJob(api, setupJob.job_id)) as { result?: { workers?: number; packages?: string } };
    const setupMs = performance.now() - t0;
    console.log(
      `setup_odoo: ${secs(setupMs)} (${setup.result?.workers} workers; packages: ${setup.result?.packages}); load average ${loadavg()}`,
    );

    // 2. build of a template with base.
    const template = await api('POST', '/database-templates', {
      name: 'Odoo bench',
      postgresql_server_id: pgServer.id,
      template_db_name: templateDb,
      root_server_id: root.id,
    });
    t0 = performance.now();
    const buildJob = await api<{ job_id: string }>('POST', `/database-templates/${template.id}/actions/build`, { modules: ['base'] });
    await completedJob(api, buildJob.job_id);
    const buildMs = performance.now() - t0;
    const [{ size }] = (await adminQuery<{ size: string }>('SELECT pg_database_size($1)::text AS size', [templateDb])) as [
      { size: string },
    ];
    console.log(`build with base: ${secs(buildMs)} (${mb(Number(size))}); load average ${loadavg()}`);

    // 3. A ready pool, then the crowd.
    const pkg = await api('POST', '/trial-packages', {
      name: 'Bench',
      url_string: 'bench',
      auto_run_subscription: true,
      database_template_id: template.id,
    });
    await api('PATCH', `/trial-packages/${pkg.id}`, { standby_pool_size: VISITORS });
    t0 = performance.now();
    const pool = createStandbyPool(ctx);
    for (;;) {
      await pool.maintain();
      const ready = await ctx.db.standbyDatabase.count({ where: { trial_package_id: pkg.id, state: 'ready' } });
      if (ready >= VISITORS) break;
      await sleep(500);
    }
    console.log(`pool of ${VISITORS} ready in ${secs(performance.now() - t0)}; load average ${loadavg()}`);

    let seq = 0;
    /** One visitor: ms from the correct code until the deployment said running, and until the customer signed in. */
    async function visitor() {
      const n = ++seq;
      const email = `visitor-${n}@example.com`;
      const v = new Visitor(httpTransport(address));
      const ip = { 'x-forwarded-for': `10.9.${Math.floor(n / 250)}.${(n % 250) + 1}` };
      await v.open('/saas/trial/bench');
      const page = await v.post(
        '/saas/trial/submit',
        {
          contact_name: `Visitor ${n}`,
          company_name: `Company ${n}`,
          email,
          mobile: '+49 170 1234567',
          company_size: '6-10',
          trial_package_id: String(pkg.id),
        },
        { headers: ip },
      );
      if (page.status !== 200) throw new Error(`submit: ${page.status}`);
      const code = codeFrom(await smtp.waitFor(email, 1, 60_000));
      const start = performance.now();
      const done = await v.post('/saas/trial/verify', { token: page.token!, code }, { headers: ip });
      if (done.status !== 200) throw new Error(`verify: ${done.status}`);
      const mail = textOf(await smtp.waitFor(email, 2, 120_000));
      const mailMs = performance.now() - start;
      const login = /Login: +(\S+)/.exec(mail)?.[1];
      const password = /Password: +(\S+)/.exec(mail)?.[1];
      const sub = await ctx.db.subscription.findFirstOrThrow({ where: { partner: { email } } });
      const uid = await signIn(sub.database_name!, login ?? '', password ?? '');
      const ms = performance.now() - start;
      if (uid !== 2) throw new Error(`visitor ${n}: the customer's sign-in to ${sub.database_name} answered ${JSON.stringify(uid)}`);
      const standby = await ctx.db.message.count({
        where: { model_name: 'svc.subscription', rec_id: sub.id, body: { contains: 'taken from standby' } },
      });
      return { ms, mailMs, standby: standby > 0 };
    }
    /** Where the deployments' time went: each step from its action-log row to the next, per job (seconds). */
    const stepTimes = async (since: number) => {
      const jobs = (await ctx.queues.queue('deployments').getJobs(['completed'])).filter((j) => j.processedOn! > since);
      const per = new Map<string, number[]>();
      for (const job of jobs) {
        const rows = await ctx.db.actionLog.findMany({
          where: { job_id: `deployments-${job.id}`, model_name: 'svc.subscription' },
          orderBy: { id: 'asc' },
        });
        const marks = [
          ...rows.map((r) => ({ step: r.input_text.split(' ').slice(0, 3).join(' '), at: r.created_at.getTime() })),
          { step: 'end', at: job.finishedOn! },
        ];
        per.set('waiting for a worker', [...(per.get('waiting for a worker') ?? []), job.processedOn! - job.timestamp]);
        for (let i = 0; i + 1 < marks.length; i++)
          per.set(marks[i]!.step, [...(per.get(marks[i]!.step) ?? []), marks[i + 1]!.at - marks[i]!.at]);
      }
      return [...per.entries()].map(([step, xs]) => `${step}: p50 ${secs(pct(xs, 50))}, max ${secs(Math.max(...xs))}`).join('; ');
    };
    console.log(`load average before the crowd: ${loadavg()}`);
    const crowdStart = Date.now();
    const runs: Promise<{ ms: number; mailMs: number; standby: boolean }>[] = [];
    for (let i = 0; i < VISITORS; i++) {
      runs.push(visitor());
      await sleep((SPREAD_S * 1000) / VISITORS);
    }
    const results = await Promise.all(runs);
    const ms = results.map((r) => r.ms);
    console.log(
      `${VISITORS} visitors within ${SPREAD_S} s, ready pool: code → customer signed in p50 ${secs(pct(ms, 50))}, p95 ${secs(pct(ms, 95))}, max ${secs(Math.max(...ms))}; ${results.filter((r) => r.standby).length} took a standby`,
    );
    const mails = results.map((r) => r.mailMs);
    console.log(
      `  of which code → ready mail: p50 ${secs(pct(mails, 50))}, p95 ${secs(pct(mails, 95))}; the customer's own sign-in after the mail: p50 ${secs(
        pct(
          results.map((r) => r.ms - r.mailMs),
          50,
        ),
      )}`,
    );
    console.log(`  deployment steps (from each step's action-log row to the next): ${await stepTimes(crowdStart)}`);
    const status = await api<{ processes: unknown[]; worker_processes: number; memory_bytes: number; process_memory_bytes: number[] }>(
      'POST',
      `/root-servers/${root.id}/actions/odoo_status`,
    );
    const per = status.process_memory_bytes;
    console.log(
      `Odoo's memory after the crowd: ${per.length} processes (${status.worker_processes} workers), ${mb(status.memory_bytes)} in all; per process ${per.map(mb).join(', ')} (largest ${mb(Math.max(...per))})`,
    );
    console.log(`load average at the end: ${loadavg()}`);

    console.log(`${verdict(setupMs <= 60_000)}: setup_odoo with the packages present ${secs(setupMs)} ≤ 60 s`);
    console.log(`${verdict(buildMs <= 30_000)}: build with base ${secs(buildMs)} ≤ 30 s`);
    console.log(`${verdict(pct(ms, 50) <= 2000)}: code → customer signed in, ready pool, p50 ${secs(pct(ms, 50))} ≤ 2 s`);
    console.log(`${verdict(pct(ms, 95) <= 4000)}: code → customer signed in, ready pool, p95 ${secs(pct(ms, 95))} ≤ 4 s`);
  } finally {
    if (api && rootId !== null) {
      const stop = await api<{ job_id: string }>('POST', `/root-servers/${rootId}/actions/stop_odoo`).catch(() => null);
      if (stop) await completedJob(api, stop.job_id).catch(() => {});
    }
    await closeAll();
    await bench.close(); // with the host's role, its template and every customer database and role
    await smtp.close();
    await sshd.stop();
    await rm(base, { recursive: true, force: true });
  }
}

runBench(main);
