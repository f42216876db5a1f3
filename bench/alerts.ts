// npm run bench:alerts [-- 50] [--rounds 12]
// The per-poll CPU cost of alert rule evaluation. N root servers (rows pointing at one local
// OpenSSH server: real SSH polls, real PostgreSQL writes) are polled in rounds with the
// service's monitoring poller, alternately without observers and with the alerts feature's
// evaluator, while 7 rules are active on every server: 5 quiet ones (cpu, ram, disk, load and
// server_offline, the common case), one that holds and stays firing, and one with a 10-minute
// duration that holds on every poll without firing yet. The first round is a warm-up
// (connections, first alerts), not measured.
// Each round polls every server without and with the rules, then calls the evaluation alone 10
// times per server (one at a time, the servers' latest samples), measuring this process's CPU;
// it prints the medians over the rounds and a met/missed line for the target: the evaluation
// under 10 % of the CPU of a poll without rules (median of the rounds' ratios).
// Needs /usr/sbin/sshd, PostgreSQL and Redis like the tests; run as root (the harness creates users).
import { rm } from 'node:fs/promises';
import { createServers } from './fleet.js';
import os from 'node:os';
import pino from 'pino';
import { loadConfig } from '../src/core/config.js';
import { applyMigrations } from '../src/core/migrate.js';
import { createContext, type AppContext } from '../src/context.js';
import { createAlertEvaluator } from '../src/alerts/alert-evaluator.js';
import { createMonitorPoller } from '../src/monitoring/monitor-poll.js';
import { createSshPool } from '../src/core/ssh-pool.js';
import type { MonitorPollObserver } from '../src/feature.js';
import { startSshd } from '../test/helpers/sshd.js';
import { databaseUrl, dropDatabase, REDIS_URL } from '../test/helpers/pg.js';

const TARGET = 0.1;

function parseArgs() {
  const args = process.argv.slice(2);
  let rounds = 12;
  let n = 50;
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--rounds') rounds = Number(args[++i]);
    else n = Number(args[i]);
  }
  return { n, rounds };
}

const pct = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? NaN;
};

async function createRules(ctx: AppContext) {
  await ctx.db.alertRule.createMany({
    data: [
      { name: 'cpu busy', metric: 'cpu_percent', threshold: 99.99, duration_seconds: 300 },
      { name: 'ram full', metric: 'ram_percent', threshold: 99.99, duration_seconds: 300 },
      { name: 'disk full', metric: 'disk_percent', threshold: 99.99 },
      { name: 'load high', metric: 'load_1', threshold: 10_000, duration_seconds: 60 },
      { name: 'down', metric: 'server_offline', duration_seconds: 60 },
      { name: 'always (firing)', metric: 'disk_percent', threshold: 0 },
      { name: 'always, 10 min (window scan every poll)', metric: 'ram_percent', threshold: 0, duration_seconds: 600 },
    ],
  });
}

async function main() {
  const { n, rounds } = parseArgs();
  const dbName = `svc_bench_alerts_${Date.now().toString(36)}`;
  const url = databaseUrl(dbName);
  await applyMigrations(url);
  const sshd = await startSshd({ maxStartups: n + 100, maxSessions: 10 });
  const config = loadConfig({
    DATABASE_URL: url,
    REDIS_URL,
    QUEUE_PREFIX: dbName,
    SVC_MASTER_KEY_FILE: `${os.tmpdir()}/${dbName}.key`,
    LOG_LEVEL: 'warn',
  });
  const ctx = await createContext(config, pino({ level: 'warn' }));
  const pool = createSshPool();
  console.log(`bench:alerts on ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? '?'}): ${n} servers, ${rounds} measured rounds per mode`);
  try {
    const ids = await createServers(ctx, sshd, n, { server_state: 'online' });
    await createRules(ctx);
    const evaluate = createAlertEvaluator(ctx);
    const evalMs: number[] = [];
    const timed: MonitorPollObserver = async (events) => {
      const t = performance.now();
      await evaluate(events);
      evalMs.push(performance.now() - t);
    };
    const pollers = {
      'without rules': createMonitorPoller(ctx, { pool }).poll,
      'with 7 rules on every server': createMonitorPoller(ctx, { pool, observers: [timed] }).poll,
    };
    // Each round: a poll round without rules (A), one with them (B), and the evaluation alone (C:
    // evaluate() called one at a time with each server's latest sample, 10 per server). The three
    // run back to back, so each round's ratios compare like with like on a machine whose load
    // drifts; the medians over the rounds are reported.
    const modes = { A: pollers['without rules'], B: pollers['with 7 rules on every server'] };
    const perRound: { A: number; B: number; C: number }[] = [];
    let failed = 0;
    let polled = 0;
    for (let round = 0; round <= rounds; round++) {
      const row = { A: 0, B: 0, C: 0 };
      for (const [mode, poll] of Object.entries(modes) as ['A' | 'B', typeof modes.A][]) {
        const c0 = process.cpuUsage();
        const results = await Promise.all(ids.map((id) => poll(id)));
        const used = process.cpuUsage(c0);
        row[mode] = (used.user + used.system) / 1000 / results.length;
        failed += round === 0 ? 0 : results.filter((r) => r.outcome !== 'ok').length;
        polled += round === 0 ? 0 : results.length;
      }
      const latest = await ctx.db.$queryRaw<
        { root_server_id: number; cpu_percent: number; ram_percent: number; disk_percent: number; load_1: number }[]
      >`
        SELECT DISTINCT ON (root_server_id) root_server_id, cpu_percent, ram_percent, disk_percent, load_1
        FROM root_server_monitor_logs ORDER BY root_server_id, created_at DESC`;
      const events = latest.map((m) => ({
        root_server_id: m.root_server_id,
        outcome: 'ok' as const,
        previous_state: 'online',
        server_state: 'online',
        metrics: { cpu_percent: m.cpu_percent, ram_percent: m.ram_percent, disk_percent: m.disk_percent, load_1: m.load_1 },
        failures: 0,
        error: null,
        at: new Date(),
      }));
      const calls = events.length * 10;
      const c0 = process.cpuUsage();
      for (let i = 0; i < calls; i++) await evaluate([events[i % events.length]!]);
      const used = process.cpuUsage(c0);
      row.C = (used.user + used.system) / 1000 / calls;
      if (round === 0) {
        evalMs.length = 0; // the warm-up (first connections, first alerts) is not the steady state
        continue;
      }
      perRound.push(row);
    }
    const median = (values: number[]) => pct(values, 50);
    const A = median(perRound.map((r) => r.A));
    const B = median(perRound.map((r) => r.B));
    const C = median(perRound.map((r) => r.C));
    const extra = median(perRound.map((r) => r.C / r.A));
    const diff = median(perRound.map((r) => (r.B - r.A) / r.A));
    console.log(
      `  poll without rules             ${A.toFixed(3)} ms CPU per poll (median of ${perRound.length} rounds; ${polled} polls in all, ${failed} failed)`,
    );
    console.log(
      `  poll with the 7 rules          ${B.toFixed(3)} ms CPU per poll (median; ${(diff * 100).toFixed(1)} % more, median of the rounds' differences — noisy)`,
    );
    console.log(
      `  rule evaluation alone          ${C.toFixed(3)} ms CPU per poll (median; ${ids.length * 10} calls a round) = ${(extra * 100).toFixed(1)} % of the poll without rules (median of the rounds' ratios)`,
    );
    console.log(
      `  evaluation latency per poll: p50 ${pct(evalMs, 50).toFixed(2)} ms, p99 ${pct(evalMs, 99).toFixed(2)} ms (${evalMs.length} evaluations, 50 polls at once)`,
    );
    const alerts = await ctx.db.alert.groupBy({ by: ['state'], _count: true });
    console.log(
      `  alerts: ${alerts.map((a) => `${a._count} ${a.state}`).join(', ') || 'none'} (the firing rule opens one per server, once)`,
    );
    console.log(
      `  target < ${TARGET * 100} % more CPU per poll (evaluation alone vs the poll, median): ${extra < TARGET ? 'met' : 'missed'}`,
    );
    console.log(
      `  load average ${os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}`,
    );
  } finally {
    pool.close();
    const keys = await ctx.redis.keys(`${dbName}:*`);
    if (keys.length > 0) await ctx.redis.del(...keys);
    await ctx.close();
    await sshd.stop();
    await dropDatabase(dbName);
    await rm(config.SVC_MASTER_KEY_FILE, { force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
