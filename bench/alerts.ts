// npm run bench:alerts [-- 50] [--rounds 12]
// The per-poll CPU cost of alert rule evaluation. N root servers (rows pointing at one local
// OpenSSH server: real SSH polls, real PostgreSQL writes) are polled in rounds with the
// service's monitoring poller, alternately without observers and with the alerts feature's
// evaluator, while 7 rules are active on every server: 5 quiet ones (cpu, ram, disk, load and
// server_offline, the common case), one that holds and stays firing, and one with a 10-minute
// duration that holds on every poll without firing yet (the worst case: a window scan on every
// poll). The first round of each mode is a warm-up (connections, first alerts), not measured.
// Prints this process's CPU per poll in both modes and their difference, then the evaluation's
// own CPU per call measured alone in the steady state (2,000 calls one at a time with the servers'
// latest samples: the A/B difference is within the noise of a shared machine), its latency, and a
// met/missed line for the target: evaluation under 10 % of the poll's CPU without rules.
// Needs /usr/sbin/sshd, PostgreSQL and Redis like the tests; run as root (the harness creates users).
import { rm } from 'node:fs/promises';
import os from 'node:os';
import pino from 'pino';
import { loadConfig } from '../src/core/config.js';
import { applyMigrations } from '../src/core/migrate.js';
import { createContext, type AppContext } from '../src/context.js';
import { createAlertEvaluator } from '../src/alerts/alert-evaluator.js';
import { createMonitorPoller } from '../src/monitoring/monitor-poll.js';
import type { MonitorPollObserver } from '../src/feature.js';
import { startSshd, TEST_USERS, type Sshd } from '../test/helpers/sshd.js';
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

async function createServers(ctx: AppContext, sshd: Sshd, n: number): Promise<number[]> {
  const key = await ctx.box.encrypt(sshd.keys.ed25519Openssh);
  const rows = Array.from({ length: n }, (_, i) => ({
    name: `bench-${i}`,
    ip: sshd.host,
    port: sshd.port,
    username: TEST_USERS.key.name,
    key,
    state: 'confirmed' as const,
    host_key: sshd.hostKey,
    monitoring_enabled: true,
    monitor_update_interval: '5s',
    server_state: 'online' as const,
  }));
  return (await ctx.db.rootServer.createManyAndReturn({ data: rows, select: { id: true } })).map((r) => r.id);
}

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
  console.log(`bench:alerts on ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? '?'}): ${n} servers, ${rounds} measured rounds per mode`);
  try {
    const ids = await createServers(ctx, sshd, n);
    await createRules(ctx);
    const evaluate = createAlertEvaluator(ctx);
    const evalMs: number[] = [];
    const timed: MonitorPollObserver = async (event) => {
      const t = performance.now();
      await evaluate(event);
      evalMs.push(performance.now() - t);
    };
    const modes = {
      'without rules': createMonitorPoller(ctx, []),
      'with 7 rules on every server': createMonitorPoller(ctx, [timed]),
    };
    const cpu: Record<string, number> = {};
    const polls: Record<string, number> = {};
    const failed: Record<string, number> = {};
    for (let round = 0; round <= rounds; round++) {
      for (const [mode, poll] of Object.entries(modes)) {
        const c0 = process.cpuUsage();
        const results = await Promise.all(ids.map((id) => poll(id)));
        const used = process.cpuUsage(c0);
        if (round === 0) {
          evalMs.length = 0; // the warm-up's first alerts are not the steady state
          continue;
        }
        cpu[mode] = (cpu[mode] ?? 0) + (used.user + used.system) / 1000;
        polls[mode] = (polls[mode] ?? 0) + results.length;
        failed[mode] = (failed[mode] ?? 0) + results.filter((r) => r.outcome !== 'ok').length;
      }
    }
    const perPoll = Object.fromEntries(Object.keys(modes).map((m) => [m, cpu[m]! / polls[m]!]));
    const [base, withRules] = Object.values(perPoll) as [number, number];
    for (const [mode, v] of Object.entries(perPoll)) {
      console.log(`  ${mode.padEnd(30)} ${v.toFixed(3)} ms CPU per poll (${polls[mode]} polls, ${failed[mode]} failed)`);
    }
    const diff = (withRules - base) / base;
    console.log(
      `  difference of the two: ${(withRules - base).toFixed(3)} ms CPU per poll (${(diff * 100).toFixed(1)} %; noisy on a shared machine)`,
    );

    // The evaluation alone, in the steady state, without the noise of the SSH polls around it:
    // evaluate() called one at a time with each server's latest sample, its CPU time measured.
    const latest = await ctx.db.monitorLog.findMany({ where: { root_server_id: { in: ids } }, orderBy: { id: 'desc' }, take: ids.length });
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
    const calls = Math.max(2000, events.length);
    for (let i = 0; i < 200; i++) await evaluate(events[i % events.length]!); // warm
    const c0 = process.cpuUsage();
    for (let i = 0; i < calls; i++) await evaluate(events[i % events.length]!);
    const used = process.cpuUsage(c0);
    const evalCpu = (used.user + used.system) / 1000 / calls;
    const extra = evalCpu / base;
    console.log(
      `  rule evaluation alone: ${evalCpu.toFixed(3)} ms CPU per poll (${calls} calls) = ${(extra * 100).toFixed(1)} % of the poll without rules`,
    );
    console.log(
      `  evaluation latency per poll: p50 ${pct(evalMs, 50).toFixed(2)} ms, p99 ${pct(evalMs, 99).toFixed(2)} ms (${evalMs.length} evaluations)`,
    );
    const alerts = await ctx.db.alert.groupBy({ by: ['state'], _count: true });
    console.log(
      `  alerts: ${alerts.map((a) => `${a._count} ${a.state}`).join(', ') || 'none'} (the firing rule opens one per server, once)`,
    );
    console.log(`  target < ${TARGET * 100} % more CPU per poll (evaluation alone vs the poll): ${extra < TARGET ? 'met' : 'missed'}`);
    console.log(
      `  load average ${os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}`,
    );
  } finally {
    ctx.sshPool.close();
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
