// npm run bench:trial [-- --mb 430] [--visitors 20] [--spread 10] [--alone 5]
// From a visitor's correct code to the trial_ready mail, through the real service: HTTP pages, the
// trial processing and deployment jobs, a real Odoo-shaped template of --mb megabytes on the
// machine's PostgreSQL (made by the bench), its filestore on a local sshd host, the mails on a
// local SMTP server. The template keeps Odoo's default password hashing (600,000 rounds).
// 1. and 2. CREATE DATABASE ... TEMPLATE alone and a deployment without a standby, --alone times
//    each, taking turns: what a copy costs on this machine now, and what a deployment adds to it.
// 3. --visitors visitors within --spread seconds, without a standby pool.
// 4. The same with a ready pool of --visitors standbys.
// Prints p50/p95 per case and met/missed for the targets: with a ready standby p50 ≤ 1.5 s and
// p95 ≤ 3 s; without one, a deployment adds ≤ 20 % to the plain copy. Needs root (sshd, sudo).
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { sleep } from '../src/core/sleep.js';
import { createStandbyPool } from '../src/instances/standby-pool.js';
import { createOdooTemplate } from '../test/helpers/odoo-template.js';
import { adminQuery, databaseUrl, dropDatabase } from '../test/helpers/pg.js';
import { codeFrom, startSmtpServer } from '../test/helpers/smtp.js';
import { startSshd } from '../test/helpers/sshd.js';
import { registerOdooHost, startBenchService } from './bench-api.js';
import { httpTransport, Visitor } from '../test/helpers/trial.js';
import { createBenchContext, loadavg, runBench, verdict } from './bench-context.js';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
}
const MB = arg('mb', 430);
const VISITORS = arg('visitors', 20);
const SPREAD_S = arg('spread', 10);
const ALONE = arg('alone', 5);

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
};
const secs = (ms: number) => `${(ms / 1000).toFixed(2)} s`;

async function main() {
  const smtp = await startSmtpServer();
  const sshd = await startSshd();
  const base = await mkdtemp(path.join(os.tmpdir(), 'svc-bench-odoo-'));
  const bench = await createBenchContext('trial', {
    SMTP_URL: smtp.url,
    ODOO_BASE_PATH: base,
    SUBSCRIPTION_URL: 'https://{database_name}.odoo.test',
    TRUST_PROXY: '127.0.0.1',
  });
  const { ctx } = bench;
  const template = `${ctx.config.QUEUE_PREFIX}_tpl`;
  const copies: string[] = [];
  let closeAll = async () => {};
  try {
    console.log(`load average at start: ${loadavg()}; ${os.cpus().length} × ${os.cpus()[0]?.model}`);
    // The template: Odoo's tables, then rows until it is --mb megabytes.
    let t0 = performance.now();
    await createOdooTemplate(template, { rounds: null });
    const client = new pg.Client({ connectionString: databaseUrl(template) });
    await client.connect();
    await client.query('CREATE TABLE mail_message (id serial PRIMARY KEY, body text)');
    const rowsPerMb = 4800; // ~220 bytes per row with its index
    for (let done = 0; done < MB * rowsPerMb; done += 500_000) {
      await client.query(
        `INSERT INTO mail_message (body) SELECT md5(random()::text) || md5(random()::text) || md5(random()::text) || md5(random()::text)
           FROM generate_series(1, $1)`,
        [Math.min(500_000, MB * rowsPerMb - done)],
      );
    }
    await client.query('VACUUM ANALYZE mail_message');
    const [{ size }] = (await client.query<{ size: string }>('SELECT pg_database_size(current_database())::text AS size')).rows as [
      { size: string },
    ];
    await client.end();
    // Its filestore: 300 attachments of 32 KiB.
    const store = path.join(base, 'data', 'filestore', template);
    for (let d = 0; d < 30; d++) {
      const dir = path.join(store, d.toString(16).padStart(2, '0'));
      await mkdir(dir, { recursive: true });
      for (let f = 0; f < 10; f++) await writeFile(path.join(dir, `${d}-${f}`), Buffer.alloc(32 * 1024, d + f));
    }
    console.log(`template ${template}: ${(Number(size) / 1e6).toFixed(0)} MB, made in ${secs(performance.now() - t0)}`);

    /** CREATE DATABASE ... TEMPLATE alone (the copy a deployment starts with), timed. */
    const plainCopy = async (n: number) => {
      const name = `${template}_plain${n}`;
      const start = performance.now();
      await adminQuery(`CREATE DATABASE "${name}" TEMPLATE "${template}"`);
      const ms = performance.now() - start;
      await dropDatabase(name);
      return ms;
    };
    await plainCopy(0); // the first copy reads the template from disk
    // The service: HTTP, workers, an operator's records.
    const service = await startBenchService(ctx);
    closeAll = service.close;
    const { api, address } = service;
    const { template: tpl } = await registerOdooHost(api, sshd, template);
    const pkg = await api('POST', '/trial-packages', {
      name: 'Bench',
      url_string: 'bench',
      auto_run_subscription: true,
      database_template_id: tpl.id,
    });

    let seq = 0;
    /** One visitor from the form to the ready mail; answers ms from the correct code to the mail. */
    async function visitor(): Promise<{ ms: number; standby: boolean }> {
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
      await smtp.waitFor(email, 2, 120_000);
      const ms = performance.now() - start;
      const sub = await ctx.db.subscription.findFirstOrThrow({ where: { partner: { email } } });
      copies.push(sub.database_name!);
      const standby = await ctx.db.message.count({
        where: { model_name: 'svc.subscription', rec_id: sub.id, body: { contains: 'taken from standby' } },
      });
      return { ms, standby: standby > 0 };
    }
    const deployTimes = async (since: Date) => {
      const jobs = (await ctx.queues.queue('deployments').getJobs(['completed'])).filter((j) => j.finishedOn! > since.getTime());
      return Promise.all(
        jobs.map(async (j) => {
          // Until the instance runs (its chatter says so), and until the job ended (the mail sent).
          const ready = await ctx.db.message.findFirstOrThrow({
            where: { model_name: 'svc.subscription', rec_id: j.data.subscription_id, body: { startsWith: 'Database ' } },
            orderBy: { id: 'desc' },
          });
          return { running: ready.created_at.getTime() - j.processedOn!, job: j.finishedOn! - j.processedOn! };
        }),
      );
    };

    // 1. and 2. The plain copy and a deployment, one at a time and taking turns (the machine's drift hits both alike).
    const plain: number[] = [];
    const alone: number[] = [];
    let since = new Date();
    for (let i = 0; i < ALONE; i++) {
      plain.push(await plainCopy(i + 1));
      alone.push((await visitor()).ms);
    }
    console.log(`CREATE DATABASE ... TEMPLATE alone: ${plain.map(secs).join(', ')} (median ${secs(pct(plain, 50))})`);
    const aloneDeploy = await deployTimes(since);
    // Where a deployment's time goes: when each step's action-log row was written (its start).
    for (const job of (await ctx.queues.queue('deployments').getJobs(['completed'])).filter((j) => j.finishedOn! > since.getTime())) {
      const rows = await ctx.db.actionLog.findMany({
        where: { job_id: `deployments-${job.id}`, model_name: 'svc.subscription' },
        orderBy: { id: 'asc' },
      });
      const at = (d: Date) => `+${((d.getTime() - job.processedOn!) / 1000).toFixed(2)}`;
      console.log(
        `  steps of ${job.id}: ${rows.map((r) => `${at(r.created_at)} ${r.input_text.split(' ').slice(0, 2).join(' ')}`).join(' | ')}; end +${((job.finishedOn! - job.processedOn!) / 1000).toFixed(2)}`,
      );
    }
    const running = aloneDeploy.map((d) => d.running);
    const ratio = pct(running, 50) / pct(plain, 50);
    console.log(
      `deployments one at a time, no standby: code → mail ${alone.map(secs).join(', ')}; deploy job until running ${running.map(secs).join(', ')}, until its mail was sent ${aloneDeploy.map((d) => secs(d.job)).join(', ')}`,
    );
    const ratioLine = `${verdict(ratio <= 1.2)}: a deployment without a standby takes ${ratio.toFixed(2)} × the plain copy until the instance runs (${secs(pct(running, 50))} / ${secs(pct(plain, 50))}) ≤ 1.2`;

    // 3. and 4. A crowd, without and with a pool.
    const crowd = async () => {
      const runs: Promise<{ ms: number; standby: boolean }>[] = [];
      for (let i = 0; i < VISITORS; i++) {
        runs.push(visitor());
        await sleep((SPREAD_S * 1000) / VISITORS);
      }
      return Promise.all(runs);
    };
    if (VISITORS === 0) {
      console.log(ratioLine);
      return;
    }
    console.log(`load average before the crowd without a pool: ${loadavg()}`);
    since = new Date();
    const without = await crowd();
    console.log(
      `${VISITORS} visitors within ${SPREAD_S} s, no pool: p50 ${secs(
        pct(
          without.map((r) => r.ms),
          50,
        ),
      )}, p95 ${secs(
        pct(
          without.map((r) => r.ms),
          95,
        ),
      )}, max ${secs(Math.max(...without.map((r) => r.ms)))}`,
    );

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
    // The pool refills while the visitors take from it, as it would in production.
    const withPool = await crowd();
    const ms = withPool.map((r) => r.ms);
    console.log(
      `${VISITORS} visitors within ${SPREAD_S} s, ready pool: p50 ${secs(pct(ms, 50))}, p95 ${secs(pct(ms, 95))}, max ${secs(Math.max(...ms))}; ${withPool.filter((r) => r.standby).length} took a standby`,
    );
    console.log(`load average at the end: ${loadavg()}`);

    console.log(`${verdict(pct(ms, 50) <= 1500)}: with a ready standby p50 ${secs(pct(ms, 50))} ≤ 1.5 s`);
    console.log(`${verdict(pct(ms, 95) <= 3000)}: with a ready standby p95 ${secs(pct(ms, 95))} ≤ 3 s`);
    console.log(ratioLine);
  } finally {
    await closeAll();
    const standbys = (await ctx.db.standbyDatabase.findMany({ select: { database_name: true } })).map((s) => s.database_name);
    for (const name of [...copies, ...standbys, template]) await dropDatabase(name).catch(() => {});
    await bench.close();
    await smtp.close();
    await sshd.stop();
    await rm(base, { recursive: true, force: true });
  }
}

runBench(main);
