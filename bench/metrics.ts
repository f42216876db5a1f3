// npm run bench:metrics [-- --servers 2000] [--scrapes 6] [--no-scrape] [--baseline DIR [--poll-servers 500] [--seconds 45] [--rounds 4]]
// What /metrics costs at fleet scale, on the machine's real PostgreSQL and Redis:
// - scrape: N monitored servers (rows with samples, firing alerts, subscriptions; nothing polled),
//   the API listening on loopback, GET /metrics with a token over HTTP. A cold scrape reads the
//   fleet's series from the database (they are cached 5 s, so cold scrapes are spaced 5.1 s apart);
//   a warm one is served from that cache. Prints time and size; targets: a cold scrape ≤ 100 ms
//   (median) and ≤ 2 MB.
// - poll path (`--baseline DIR`: another checkout of the service, e.g. a git worktree of the commit
//   before metrics): M simulated servers on one local OpenSSH server (as bench:monitor), 7 alert
//   rules on every server and a maintenance window on a tenth of them, polled every 5 s by one real
//   worker process (`src/main.ts`, SVC_ROLE=worker) of this checkout and of the baseline in turn,
//   R rounds alternating which goes first; the worker's CPU per 1,000 recorded polls over
//   `--seconds`, averaged per checkout. On a shared machine these figures swing by ±20 % from run
//   to run, so what this checkout adds to a poll is also measured in one process, precisely: the
//   alert evaluation of each checkout (loaded from its own tree) on the same kind of fleet, batches
//   of 200 events, 10 alternating rounds (median µs per poll), and the per-poll instrumentation.
//   Target: the poll's CPU grows ≤ 5 %. Each
//   checkout has its own database, migrated by its own CLI (migrations are recorded under their
//   path, so two checkouts cannot share one database); both need the same schema.
// Needs /usr/sbin/sshd (run as root: the harness creates users), PostgreSQL and Redis like the tests.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { buildApp } from '../src/app.js';
import { createAuthService } from '../src/auth/auth-service.js';
import { createContext, type AppContext } from '../src/context.js';
import { loadConfig } from '../src/core/config.js';
import { SOURCE_CACHE_MS } from '../src/core/metrics.js';
import { sleep } from '../src/core/sleep.js';
import type { MonitorPollEvent } from '../src/feature.js';
import { recordPoll } from '../src/monitoring/monitor-metrics.js';
import { LOOPBACK_DEFAULTS } from '../test/helpers/loopback.js';
import { databaseUrl, dropDatabase, REDIS_URL } from '../test/helpers/pg.js';
import { startSshd, type Sshd } from '../test/helpers/sshd.js';
import { createBenchContext, runBench } from './bench-context.js';
import { createServers } from './fleet.js';
import { processCpu } from './process-cpu.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const ARGS = parseArgs();

function parseArgs() {
  const args = process.argv.slice(2);
  const o = { servers: 2000, scrapes: 6, baseline: '', pollServers: 500, seconds: 45, rounds: 4, scrape: true };
  for (let i = 0; i < args.length; i++) {
    const next = () => args[++i] ?? '';
    if (args[i] === '--servers') o.servers = Number(next());
    else if (args[i] === '--scrapes') o.scrapes = Number(next());
    else if (args[i] === '--baseline') o.baseline = path.resolve(next());
    else if (args[i] === '--poll-servers') o.pollServers = Number(next());
    else if (args[i] === '--seconds') o.seconds = Number(next());
    else if (args[i] === '--rounds') o.rounds = Number(next());
    else if (args[i] === '--no-scrape') o.scrape = false;
    else throw new Error(`unknown argument ${args[i]}`);
  }
  return o;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = (s.length - 1) / 2;
  return (s[Math.floor(mid)]! + s[Math.ceil(mid)]!) / 2;
};
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const verdict = (ok: boolean, what: string) => console.log(`  ${ok ? 'met   ' : 'MISSED'} ${what}`);
const load = () =>
  os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' ');

/** N monitored servers with 3 samples each, 1 firing alert in 10, 200 subscriptions: what a scrape reads. */
async function fillFleet(ctx: AppContext, n: number) {
  const rows = Array.from({ length: n }, (_, i) => ({
    name: `fleet-${String(i).padStart(4, '0')}.example.net`,
    ip: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`,
    state: 'confirmed' as const,
    monitoring_enabled: true,
    server_state: i % 50 === 0 ? ('offline' as const) : i % 10 === 0 ? ('warning' as const) : ('online' as const),
  }));
  const ids = (await ctx.db.rootServer.createManyAndReturn({ data: rows, select: { id: true } })).map((r) => r.id);
  await ctx.db.$executeRaw`
    INSERT INTO root_server_monitor_logs (root_server_id, created_at, cpu_percent, ram_used_bytes, ram_total_bytes, ram_percent,
      disk_used_bytes, disk_total_bytes, disk_percent, net_rx_bytes_per_s, net_tx_bytes_per_s, load_1, load_5, load_15)
    SELECT s.id, now() - make_interval(secs => k * 5), random() * 100, 4e9, 8e9, random() * 100, 5e10, 1e11, random() * 100,
      1e5, 1e5, random() * 4, 1, 1
    FROM unnest(${ids}::int[]) AS s(id), generate_series(0, 2) AS k`;
  const rule = await ctx.db.alertRule.create({ data: { name: 'cpu', metric: 'cpu_percent', threshold: 90 } });
  await ctx.db.alert.createMany({
    data: ids
      .filter((_, i) => i % 10 === 0)
      .map((id) => ({ rule_id: rule.id, root_server_id: id, metric: 'cpu_percent' as const, value: 95 })),
  });
  const partner = await ctx.db.partner.create({ data: { name: 'Bench', email: 'bench@example.com' } });
  await ctx.db.subscription.createMany({
    data: Array.from({ length: 200 }, (_, i) => ({
      name: `SUB${i}`,
      partner_id: partner.id,
      state: (['running', 'running', 'running', 'suspended', 'draft'] as const)[i % 5]!,
    })),
  });
}

async function scrapeCost() {
  const bench = await createBenchContext('metrics');
  const { ctx } = bench;
  const app = await buildApp(ctx);
  try {
    await fillFleet(ctx, ARGS.servers);
    const { token } = await createAuthService(ctx).createAdmin('bench@example.com');
    await app.listen({ port: 0, host: '127.0.0.1' });
    const url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/metrics`;
    const scrape = async () => {
      const t0 = performance.now();
      const res = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
      const body = await res.text();
      if (res.status !== 200) throw new Error(`scrape answered ${res.status}: ${body.slice(0, 300)}`);
      return {
        ms: performance.now() - t0,
        bytes: Buffer.byteLength(body),
        series: body.split('\n').filter((l) => l && !l.startsWith('#')).length,
      };
    };
    console.log(`\nscrape: ${ARGS.servers} monitored servers (3 samples each), load average ${load()}`);
    await scrape(); // first use: connections, prepared statements
    const cold: Awaited<ReturnType<typeof scrape>>[] = [];
    for (let i = 0; i < ARGS.scrapes; i++) {
      await sleep(SOURCE_CACHE_MS + 100);
      cold.push(await scrape());
    }
    const warm: number[] = [];
    for (let i = 0; i < 20; i++) warm.push((await scrape()).ms);
    const size = cold.at(-1)!;
    console.log(
      `  cold (fleet read from PostgreSQL): median ${median(cold.map((c) => c.ms)).toFixed(1)} ms, max ${Math.max(...cold.map((c) => c.ms)).toFixed(1)} ms over ${cold.length} scrapes`,
    );
    console.log(
      `  warm (fleet series from the 5 s cache): median ${median(warm).toFixed(1)} ms, max ${Math.max(...warm).toFixed(1)} ms over ${warm.length}`,
    );
    console.log(
      `  size ${(size.bytes / 1024).toFixed(0)} KiB, ${size.series} series (${(size.bytes / ARGS.servers).toFixed(0)} bytes per server)`,
    );
    verdict(median(cold.map((c) => c.ms)) <= 100, `a scrape ≤ 100 ms (cold median ${median(cold.map((c) => c.ms)).toFixed(1)} ms)`);
    verdict(size.bytes <= 2 * 1024 * 1024, `a scrape ≤ 2 MB (${(size.bytes / 1024 / 1024).toFixed(2)} MB)`);
  } finally {
    await app.close();
    await bench.close();
  }
}

function startWorker(dir: string, env: Record<string, string>): ChildProcess {
  return spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: dir,
    env: { ...process.env, ...env, SVC_ROLE: 'worker', METRICS_PORT: '0' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
}

async function stopWorker(child: ChildProcess) {
  if (child.exitCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await Promise.race([exited, sleep(30_000)]);
  if (child.exitCode === null) child.kill('SIGKILL');
}

/** A database for one checkout, migrated by that checkout, with the fleet the poll-path run polls. */
async function pollFleet(dir: string, tag: string, sshd: Sshd) {
  const dbName = `svc_bench_metrics_poll_${tag}_${Date.now().toString(36)}`;
  const env = {
    DATABASE_URL: databaseUrl(dbName),
    REDIS_URL,
    QUEUE_PREFIX: dbName,
    SVC_MASTER_KEY_FILE: path.join(os.tmpdir(), `${dbName}.key`),
    LOG_LEVEL: 'warn',
    // Every third-party default on loopback: the workers send nothing off this machine.
    ...LOOPBACK_DEFAULTS,
  };
  const migrated = spawnSync(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'migrate'], {
    cwd: dir,
    env: { ...process.env, ...env },
    encoding: 'utf8',
  });
  if (migrated.status !== 0) throw new Error(`migrating ${dir}: ${migrated.stderr}`);
  const ctx = await createContext(loadConfig(env));
  const ids = await createServers(ctx, sshd, ARGS.pollServers);
  // 5 rules that never hold (the common case), one that holds and stays firing, server_offline.
  await ctx.db.alertRule.createMany({
    data: [
      ...(['cpu_percent', 'ram_percent', 'disk_percent', 'load_1', 'cpu_percent'] as const).map((metric, i) => ({
        name: `quiet ${i}`,
        metric,
        threshold: 1e9,
        duration_seconds: i === 4 ? 300 : 0,
      })),
      { name: 'firing', metric: 'disk_percent' as const, threshold: 0 },
      { name: 'down', metric: 'server_offline' as const },
    ],
  });
  await ctx.db.maintenanceWindow.create({
    data: {
      root_server_ids: ids.filter((_, i) => i % 10 === 0),
      starts_at: new Date(),
      ends_at: new Date(Date.now() + 86_400_000),
      reason: 'bench',
    },
  });
  return {
    ctx,
    env,
    ids,
    async close() {
      const keys = await ctx.redis.keys(`${dbName}:*`);
      if (keys.length > 0) await ctx.redis.del(...keys);
      await ctx.close();
      await dropDatabase(dbName);
      await rm(env.SVC_MASTER_KEY_FILE, { force: true });
    },
  };
}

async function pollPath() {
  const sshd = await startSshd({ maxStartups: 500, maxSessions: 10 });
  const trees: { name: string; dir: string; results: number[]; fleet?: Awaited<ReturnType<typeof pollFleet>> }[] = [
    { name: 'baseline', dir: ARGS.baseline, results: [] },
    { name: 'this checkout', dir: ROOT, results: [] },
  ];
  try {
    for (const [i, tree] of trees.entries()) tree.fleet = await pollFleet(tree.dir, i === 0 ? 'base' : 'this', sshd);
    console.log(
      `\npoll path: ${ARGS.pollServers} servers every 5 s, 7 rules each, one worker process; ${ARGS.rounds} rounds of ${ARGS.seconds} s per checkout`,
    );
    console.log(`  baseline ${ARGS.baseline}`);
    for (let round = 0; round < ARGS.rounds; round++) {
      for (const tree of round % 2 === 0 ? trees : [...trees].reverse()) {
        const { ctx, env, ids } = tree.fleet!;
        const started = new Date();
        const child = startWorker(tree.dir, env);
        try {
          // Warm-up: every server polled by this worker once.
          for (;;) {
            const [{ n }] = await ctx.db.$queryRaw<[{ n: number }]>`
              SELECT count(DISTINCT root_server_id)::int AS n FROM root_server_monitor_logs WHERE created_at > ${started}`;
            if (n >= ids.length) break;
            if (child.exitCode !== null) throw new Error(`the ${tree.name} worker exited (${child.exitCode})`);
            if (Date.now() - started.getTime() > 240_000) throw new Error(`warm-up: ${n} of ${ids.length} servers sampled after 240 s`);
            await sleep(500);
          }
          await sleep(5000);
          const c0 = processCpu(child.pid!);
          const t0 = new Date();
          await sleep(ARGS.seconds * 1000);
          const c1 = processCpu(child.pid!);
          const t1 = new Date();
          const [{ n: polls }] = await ctx.db.$queryRaw<[{ n: number }]>`
            SELECT count(*)::int AS n FROM root_server_monitor_logs WHERE created_at >= ${t0} AND created_at < ${t1}`;
          const perThousand = ((c1 - c0) / Math.max(1, polls)) * 1000;
          tree.results.push(perThousand);
          console.log(
            `  round ${round + 1}, ${tree.name}: ${polls} polls, worker CPU ${(c1 - c0).toFixed(2)} s → ${perThousand.toFixed(3)} CPU s per 1,000 polls (load average ${load()})`,
          );
        } finally {
          await stopWorker(child);
        }
      }
    }
    // The rounds alternate which checkout goes first, so a drift of the machine's load weighs on both alike.
    let pollUs = Number.NaN;
    if (ARGS.rounds > 0) {
      const [base, mine] = trees.map((t) => mean(t.results)) as [number, number];
      const growth = (mine / base - 1) * 100;
      const [baseMedian, mineMedian] = trees.map((t) => median(t.results)) as [number, number];
      console.log(
        `  mean: baseline ${base.toFixed(3)}, this checkout ${mine.toFixed(3)} CPU s per 1,000 polls (${growth >= 0 ? '+' : ''}${growth.toFixed(1)} %); ` +
          `medians ${baseMedian.toFixed(3)} and ${mineMedian.toFixed(3)} (whole worker process, noisy)`,
      );
      pollUs = base * 1000;
    }
    await addedPerPoll(
      trees.map((t) => ({ name: t.name, dir: t.dir, ctx: t.fleet!.ctx, ids: t.fleet!.ids })),
      pollUs,
    );
  } finally {
    for (const tree of trees) await tree.fleet?.close();
    await sshd.stop();
  }
}

/**
 * What this checkout adds to a poll, in one process: each checkout's alert evaluation on its own
 * fleet (same rules, same kind of servers), and the instrumentation of a due time.
 */
async function addedPerPoll(trees: { name: string; dir: string; ctx: AppContext; ids: number[] }[], pollUs: number) {
  const evals = await Promise.all(
    trees.map(async (t) => {
      const mod = (await import(path.join(t.dir, 'src/alerts/alert-evaluator.ts'))) as {
        createAlertEvaluator(ctx: unknown): (events: MonitorPollEvent[]) => Promise<void>;
      };
      return { ...t, evaluate: mod.createAlertEvaluator(t.ctx), us: [] as number[] };
    }),
  );
  const pass = async (e: (typeof evals)[number]) => {
    const at = new Date();
    const events: MonitorPollEvent[] = e.ids.map((id) => ({
      root_server_id: id,
      outcome: 'ok',
      previous_state: 'online',
      server_state: 'online',
      metrics: { cpu_percent: 5, ram_percent: 20, disk_percent: 50, load_1: 0.3 },
      failures: 0,
      error: null,
      at,
    }));
    for (let i = 0; i < events.length; i += 200) await e.evaluate(events.slice(i, i + 200));
  };
  for (const e of evals) for (let i = 0; i < 3; i++) await pass(e); // states built, alerts opened
  for (let round = 0; round < 10; round++) {
    for (const e of round % 2 === 0 ? evals : [...evals].reverse()) {
      const c0 = process.cpuUsage();
      await pass(e);
      const c = process.cpuUsage(c0);
      e.us.push((c.user + c.system) / e.ids.length);
    }
  }
  const c0 = process.cpuUsage();
  const calls = 1_000_000;
  for (let i = 0; i < calls; i++) recordPoll('ok', 3);
  const c = process.cpuUsage(c0);
  const instrumentUs = (c.user + c.system) / calls;
  const [base, mine] = evals.map((e) => median(e.us)) as [number, number];
  const added = mine - base + instrumentUs;
  console.log(
    `  in one process: alert evaluation ${base.toFixed(1)} µs per poll (baseline) → ${mine.toFixed(1)} µs (this checkout); ` +
      `instrumentation of a due time ${instrumentUs.toFixed(2)} µs; added ${added.toFixed(1)} µs per poll`,
  );
  if (Number.isNaN(pollUs)) return console.log('  (no worker rounds: the poll CPU to compare with was not measured)');
  const growth = (added / pollUs) * 100;
  verdict(growth <= 5, `poll-path CPU grows ≤ 5 %: +${growth.toFixed(1)} % of the baseline's ${pollUs.toFixed(0)} µs per poll`);
}

async function main() {
  console.log(`bench:metrics on ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? '?'}), load average ${load()}`);
  if (ARGS.scrape) await scrapeCost();
  if (ARGS.baseline) await pollPath();
  else console.log('\npoll path: not measured (give --baseline DIR, a checkout of the service before metrics, to compare)');
}

runBench(main);
