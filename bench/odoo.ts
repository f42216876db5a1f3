// ODOO_SOURCE=<tarball> npm run bench:odoo [-- --visitors 20 --spread 20 --singles 5 --workers <n>]
// Odoo run by svc on a host (DESIGN §16, §23), through the real service (HTTP pages, jobs, workers)
// on this machine as the host (a local sshd, root through sudo), the machine's PostgreSQL, mails on
// a local SMTP server, the real Odoo of ODOO_SOURCE (its first tarball), and visitors in headless
// Chromium (/usr/bin/chromium; *.odoo.test resolved to this machine, the instance's address
// http://<database>.odoo.test:<port>):
// 1. setup_odoo on a fresh ODOO_BASE_PATH of a host whose OS packages are present (the bench says
//    so first: it does not install them); target ≤ 60 s.
// 2. build of a template with base (its first pages' asset bundles included); target ≤ 30 s.
// 3. A ready standby pool (--singles + --visitors), then --singles visitors one after the other: from
//    the correct code until the visitor is inside the instance's web client, signed in, its first
//    screen loaded (nothing but the bus pending); target p50 ≤ 1.5 s. The trial page takes the
//    visitor in when it can (issue 48's sign-in link); else the visitor signs in on Odoo's login
//    page with the ready mail's password. The CPU those visitors cost (svc: this process; the
//    host's commands: the sshd's processes; Odoo's processes; PostgreSQL's backends of the bench's
//    databases), each over the visitors' windows; target ≤ 1.0 s per visitor. The pool's refill is
//    held (its queue paused) while visitors are measured, and its cost per standby said apart.
// 4. --visitors visitors within --spread seconds (one Chromium, a context each): p95 ≤ 4 s.
// Prints where the time went (the deployments' steps, the page's requests) and Odoo's memory.
// Needs root (sshd, sudo). Odoo's port: 18390 (the routing tests' range). No cron threads.
import { execFileSync, spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { type Browser, chromium, type Page } from 'playwright-core';
import { sleep } from '../src/core/sleep.js';
import { createStandbyPool, installationPrefix } from '../src/instances/standby-pool.js';
import { standbyJobs } from '../src/instances/standby-job-specs.js';
import { benchOdooSource, serverWideModulesOf } from '../test/helpers/odoo-source.js';
import { adminQuery } from '../test/helpers/pg.js';
import { codeFrom, startSmtpServer, textOf } from '../test/helpers/smtp.js';
import { startSshd, TEST_USERS } from '../test/helpers/sshd.js';
import { completedJob, startBenchService } from './bench-api.js';
import { createBenchContext, loadavg, runBench, verdict } from './bench-context.js';
import { ownCpu, postgresSampler, treeCpu } from './odoo-cpu.js';

function arg(name: string, fallback: number | undefined): number | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
}
const VISITORS = arg('visitors', 20)!;
const SPREAD_S = arg('spread', 20)!;
const SINGLES = arg('singles', 5)!;
const WORKERS = arg('workers', undefined);
const PORT = 18390;
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-dev-shm-usage',
  '--disable-background-networking',
  '--no-first-run',
  '--host-resolver-rules=MAP *.odoo.test 127.0.0.1',
];

/** What Odoo's log says so far: registries loaded (how many, their seconds) and asset bundles made. */
function odooLogFacts(log: string) {
  let text = '';
  try {
    text = readFileSync(log, 'utf8');
  } catch {
    // not there yet
  }
  const loads = [...text.matchAll(/Registry loaded in ([\d.]+)s/g)].map((m) => Number(m[1]));
  return {
    registries: loads.length,
    registrySeconds: loads.reduce((a, b) => a + b, 0),
    bundles: (text.match(/Generating a new asset bundle/g) ?? []).length,
  };
}
const factsSince = (a: ReturnType<typeof odooLogFacts>, b: ReturnType<typeof odooLogFacts>, n: number) =>
  `${((b.registries - a.registries) / n).toFixed(1)} registry loads per visitor (${((b.registrySeconds - a.registrySeconds) / n).toFixed(2)} s of wall time each visitor), ${b.bundles - a.bundles} asset bundles made`;

/** A Playwright browser server (its driver process) on loopback; prints its WebSocket endpoint. */
const BROWSER_SERVER = `
const { chromium } = require(${JSON.stringify(createRequire(import.meta.url).resolve('playwright-core'))});
chromium.launchServer({ executablePath: '/usr/bin/chromium', args: ${JSON.stringify(CHROMIUM_ARGS)}, host: '127.0.0.1' })
  .then((s) => console.log(s.wsEndpoint()));
`;

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
};
const secs = (ms: number) => `${(ms / 1000).toFixed(2)} s`;
const mb = (bytes: number) => `${(bytes / 1024 ** 2).toFixed(0)} MB`;

/** The web client's first screen: its navbar and an action shown, and nothing pending but the bus for 250 ms. */
async function firstScreen(page: Page) {
  await page.locator('.o_web_client .o_main_navbar').waitFor({ timeout: 120_000 });
  await page.locator('.o_action_manager > .o_action, .o_action_manager > .o_view_controller').first().waitFor({ timeout: 120_000 });
  const pending = new Set<unknown>();
  page.on('request', (r) => {
    if (!/websocket|longpolling/.test(r.url())) pending.add(r);
  });
  page.on('requestfinished', (r) => pending.delete(r));
  page.on('requestfailed', (r) => pending.delete(r));
  for (let quiet = 0; quiet < 5; ) {
    await sleep(50);
    quiet = pending.size ? 0 : quiet + 1;
  }
}

interface VisitorResult {
  ms: number;
  /** Until the instance was ready (the page left svc, or the ready mail came). */
  readyMs: number;
  how: 'sign-in link' | 'login page with the mailed password';
  standby: boolean;
  /** The slowest requests of the page in Odoo: [ms, path]. */
  slowest: [number, string][];
}

async function main() {
  const src = benchOdooSource('bench:odoo', process.env.ODOO_SOURCE);
  const missing = execFileSync(
    'sh',
    ['-c', `dpkg-query -W -f='\${Package} \${Status}\\n' ${src.packages.join(' ')} 2>/dev/null | grep -c ' install ok installed$' || true`],
    { encoding: 'utf8' },
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
    SUBSCRIPTION_URL: `http://{database_name}.odoo.test:${PORT}`,
    TRUST_PROXY: '127.0.0.1',
    ODOO_HEALTH_TIMEOUT_MS: '120000',
  });
  const { ctx } = bench;
  const templateDb = `${ctx.config.QUEUE_PREFIX}_tpl`;
  let closeAll = async () => {};
  let rootId: number | null = null;
  let api: Awaited<ReturnType<typeof startBenchService>>['api'] | null = null;
  let browser: Browser | null = null;
  let stopDriver = () => {};
  const standbys = await installationPrefix(ctx.db);
  const pg = postgresSampler((db) => db.startsWith(ctx.config.QUEUE_PREFIX) || db.startsWith(standbys) || db.startsWith('bench_company_'));
  const cpu = () => ({ svc: ownCpu(), host: treeCpu(sshd.dir), odoo: treeCpu(`odoo-${PORT}.conf`), pg: pg.seconds() });
  type Cpu = ReturnType<typeof cpu>;
  const cpuSince = (a: Cpu, b: Cpu = cpu()) => ({ svc: b.svc - a.svc, host: b.host - a.host, odoo: b.odoo - a.odoo, pg: b.pg - a.pg });
  const total = (c: Cpu) => c.svc + c.host + c.odoo + c.pg;
  const cpuText = (c: Cpu, n: number) =>
    `${(total(c) / n).toFixed(2)} s (svc ${(c.svc / n).toFixed(2)}, commands on the host ${(c.host / n).toFixed(2)}, Odoo ${(c.odoo / n).toFixed(2)}, PostgreSQL ${(c.pg / n).toFixed(2)})`;
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
    console.log(
      `build with base: ${secs(buildMs)} (${mb(Number(size))}, its first pages' asset bundles included); load average ${loadavg()}`,
    );

    // 3. A ready pool.
    const pkg = await api('POST', '/trial-packages', {
      name: 'Bench',
      url_string: 'bench',
      auto_run_subscription: true,
      database_template_id: template.id,
    });
    const poolSize = SINGLES + VISITORS;
    await api('PATCH', `/trial-packages/${pkg.id}`, { standby_pool_size: poolSize });
    // The pool's refill waits while visitors are measured (its cost per standby is said apart).
    const refillQueue = ctx.queues.queue(standbyJobs.maintain_standby_pool.queue);
    await refillQueue.pause();
    t0 = performance.now();
    const poolCpu0 = cpu();
    const pool = createStandbyPool(ctx);
    for (;;) {
      await pool.maintain();
      const ready = await ctx.db.standbyDatabase.count({ where: { trial_package_id: pkg.id, state: 'ready' } });
      if (ready >= poolSize) break;
      await sleep(500);
    }
    const poolCpu = cpuSince(poolCpu0);
    console.log(
      `pool of ${poolSize} ready in ${secs(performance.now() - t0)}; CPU per standby made ${cpuText(poolCpu, poolSize)}; load average ${loadavg()}`,
    );

    // Chromium's driver runs in a process of its own (launchServer), so that its work is not counted as svc's.
    const driver = spawn(process.execPath, ['-e', BROWSER_SERVER], { stdio: ['ignore', 'pipe', 'inherit'] });
    stopDriver = () => driver.kill();
    const ws = await new Promise<string>((resolve, reject) => {
      driver.stdout.once('data', (d: Buffer) => resolve(d.toString().trim()));
      driver.once('exit', (code) => reject(new Error(`Chromium's driver ended (${code})`)));
    });
    browser = await chromium.connect(ws);
    let seq = 0;
    /** One visitor in its own browser context: ms from the correct code until its first screen in Odoo. */
    async function visitor(): Promise<VisitorResult> {
      const n = ++seq;
      const email = `visitor-${n}@example.com`;
      const context = await browser!.newContext({
        viewport: { width: 1280, height: 720 },
        locale: 'en-US',
        extraHTTPHeaders: { 'x-forwarded-for': `10.9.${Math.floor(n / 250)}.${(n % 250) + 1}` },
      });
      // Twenty browsers' pages on two busy cores: an action may wait long (the time is measured, not limited).
      context.setDefaultTimeout(180_000);
      try {
        const page = await context.newPage();
        await page.goto(`${address}/saas/trial/bench`);
        await page.getByLabel('Your name').fill(`Visitor ${n}`);
        await page.getByLabel('Company name').fill(`Bench Company ${n}`);
        await page.getByLabel('E-mail address').fill(email);
        await page.getByLabel('Mobile number').fill('+49 170 1234567');
        await page.getByLabel('Company size').selectOption('6-10');
        await page.getByRole('button', { name: 'Send me the code' }).click();
        const code = codeFrom(await smtp.waitFor(email, 1, 60_000));
        await page.getByLabel('Verification code').fill(code);
        const odooRequests: { at: number; url: string }[] = [];
        const slowest: [number, string][] = [];
        page.on('requestfinished', (r) => {
          if (!r.url().includes('.odoo.test')) return;
          const t = r.timing();
          slowest.push([Math.round(t.responseEnd), new URL(r.url()).pathname.slice(0, 80)]);
        });
        page.on('request', (r) => {
          if (r.url().includes('.odoo.test')) odooRequests.push({ at: performance.now(), url: r.url() });
        });
        const start = performance.now();
        await page.getByRole('button', { name: 'Confirm' }).click();
        // The trial page follows the deployment and takes the visitor in (a one-time sign-in link
        // posted to the instance); an instance without the link leaves the visitor on Odoo's login
        // page, where the ready mail's password signs in.
        await page.waitForURL(/\.odoo\.test/, { timeout: 120_000 });
        const readyMs = (odooRequests[0]?.at ?? performance.now()) - start;
        let how: VisitorResult['how'] = 'sign-in link';
        await page.waitForLoadState('domcontentloaded');
        if (new URL(page.url()).pathname.startsWith('/web/login')) {
          how = 'login page with the mailed password';
          const mail = textOf(await smtp.waitFor(email, 2, 120_000));
          await page.fill('input[name="login"]', /Login: +(\S+)/.exec(mail)?.[1] ?? '');
          await page.fill('input[name="password"]', /Password: +(\S+)/.exec(mail)?.[1] ?? '');
          await page.click('button[type="submit"]');
        }
        await firstScreen(page);
        const ms = performance.now() - start;
        const sub = await ctx.db.subscription.findFirstOrThrow({ where: { partner: { email } } });
        const standby = await ctx.db.message.count({
          where: { model_name: 'svc.subscription', rec_id: sub.id, body: { contains: 'taken from standby' } },
        });
        return { ms, readyMs, how, standby: standby > 0, slowest: slowest.sort((a, b) => b[0] - a[0]).slice(0, 5) };
      } finally {
        await context.close();
      }
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
    const report = (label: string, results: VisitorResult[]) => {
      const ms = results.map((r) => r.ms);
      console.log(
        `${label}: code → inside the web client, first screen loaded: p50 ${secs(pct(ms, 50))}, p95 ${secs(pct(ms, 95))}, max ${secs(Math.max(...ms))}; ${results.filter((r) => r.standby).length}/${results.length} took a standby; way in: ${[...new Set(results.map((r) => r.how))].join(', ')}`,
      );
      console.log(
        `  of which code → instance ready: p50 ${secs(
          pct(
            results.map((r) => r.readyMs),
            50,
          ),
        )}; ready → first screen: p50 ${secs(
          pct(
            results.map((r) => r.ms - r.readyMs),
            50,
          ),
        )}`,
      );
      const slow = results.flatMap((r) => r.slowest).sort((a, b) => b[0] - a[0]);
      console.log(
        `  slowest requests in Odoo: ${slow
          .slice(0, 6)
          .map(([t, u]) => `${u} ${t} ms`)
          .join('; ')}`,
      );
    };

    // 3. Visitors one after the other.
    const singleStart = Date.now();
    const odooLog = `${base}/logs/odoo-${PORT}.log`;
    const singleLog0 = odooLogFacts(odooLog);
    const singleCpu0 = cpu();
    const singles: VisitorResult[] = [];
    for (let i = 0; i < SINGLES; i++) singles.push(await visitor());
    const singleCpu = cpuSince(singleCpu0);
    report(`${SINGLES} visitors one after the other, ready pool`, singles);
    console.log(`  deployment steps (from each step's action-log row to the next): ${await stepTimes(singleStart)}`);
    console.log(`  CPU per visitor: ${cpuText(singleCpu, SINGLES)}; and ${cpuText(poolCpu, poolSize)} later, to make its standby again`);
    console.log(`  Odoo's log: ${factsSince(singleLog0, odooLogFacts(odooLog), SINGLES)}`);

    // 4. The crowd.
    console.log(`load average before the crowd: ${loadavg()}`);
    const crowdStart = Date.now();
    const crowdLog0 = odooLogFacts(odooLog);
    const crowdCpu0 = cpu();
    const runs: Promise<VisitorResult>[] = [];
    for (let i = 0; i < VISITORS; i++) {
      runs.push(visitor());
      await sleep((SPREAD_S * 1000) / VISITORS);
    }
    // A visitor that never got in is counted (and said), not the end of the bench.
    const settled = await Promise.allSettled(runs);
    const crowd = settled.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
    const lost = settled.flatMap((r) => (r.status === 'rejected' ? [String((r.reason as Error).message).split('\n')[0]] : []));
    if (lost.length > 0) console.log(`  ${lost.length} of ${VISITORS} visitors never got in: ${[...new Set(lost)].join('; ')}`);
    const crowdCpu = cpuSince(crowdCpu0);
    if (crowd.length > 0) report(`${VISITORS} visitors within ${SPREAD_S} s, ready pool (${crowd.length} got in)`, crowd);
    console.log(`  deployment steps (from each step's action-log row to the next): ${await stepTimes(crowdStart)}`);
    console.log(`  CPU per visitor in the crowd: ${cpuText(crowdCpu, VISITORS)}`);
    console.log(`  Odoo's log: ${factsSince(crowdLog0, odooLogFacts(odooLog), VISITORS)}`);
    await refillQueue.resume();
    const status = await api<{ worker_processes: number; memory_bytes: number; process_memory_bytes: number[] }>(
      'POST',
      `/root-servers/${root.id}/actions/odoo_status`,
    );
    const per = status.process_memory_bytes;
    console.log(
      `Odoo's memory after the crowd: ${per.length} processes (${status.worker_processes} workers), ${mb(status.memory_bytes)} in all; per process ${per.map(mb).join(', ')} (largest ${mb(Math.max(...per))})`,
    );
    console.log(`load average at the end: ${loadavg()}`);

    const singleP50 = pct(
      singles.map((r) => r.ms),
      50,
    );
    // A visitor that never got in counts as slower than any that did.
    const crowdP95 = pct([...crowd.map((r) => r.ms), ...lost.map(() => Number.POSITIVE_INFINITY)], 95);
    console.log(`${verdict(setupMs <= 60_000)}: setup_odoo with the packages present ${secs(setupMs)} ≤ 60 s`);
    console.log(`${verdict(buildMs <= 30_000)}: build with base ${secs(buildMs)} ≤ 30 s`);
    console.log(`${verdict(singleP50 <= 1500)}: one visitor, code → inside the web client signed in, p50 ${secs(singleP50)} ≤ 1.5 s`);
    console.log(`${verdict(total(singleCpu) / SINGLES <= 1.0)}: CPU per visitor ${(total(singleCpu) / SINGLES).toFixed(2)} s ≤ 1.0 s`);
    console.log(`${verdict(crowdP95 <= 4000)}: ${VISITORS} visitors within ${SPREAD_S} s, p95 ${secs(crowdP95)} ≤ 4 s`);
  } finally {
    pg.stop();
    await browser?.close();
    stopDriver();
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
