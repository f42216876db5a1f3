// npm run bench:monitor [-- 50 200 500] [--seconds 60]
// Monitors N simulated root servers (N rows pointing at one local OpenSSH server, so N real SSH
// connections and N sshd processes) at the 5 s interval with the service's own workers, job
// schedulers, SSH pool and PostgreSQL writes, and prints for each N: polls due vs done on time,
// p99 latency (finish - due time), and the CPU seconds this process (the service) spent per 1,000
// polls. The first two intervals (connection set-up) are a warm-up, reported apart.
// Needs /usr/sbin/sshd, PostgreSQL and Redis like the tests; run as root (the harness creates users).
import { rm } from 'node:fs/promises';
import os from 'node:os';
import pino from 'pino';
import type { Job } from 'bullmq';
import { loadConfig } from '../src/core/config.js';
import { applyMigrations } from '../src/core/migrate.js';
import { createContext, type AppContext } from '../src/context.js';
import { startWorkers } from '../src/worker.js';
import { withJobHandler } from '../test/helpers/features.js';
import { createMonitorService } from '../src/monitoring/monitor-service.js';
import type { PollResult } from '../src/monitoring/monitor-poll.js';
import { startSshd, TEST_USERS, type Sshd } from '../test/helpers/sshd.js';
import { databaseUrl, dropDatabase, REDIS_URL } from '../test/helpers/pg.js';

const INTERVAL_MS = 5_000;
const WARMUP_MS = 2 * INTERVAL_MS;

interface PollRecord {
  serverId: number;
  due: number;
  start: number;
  end: number;
  outcome: PollResult['outcome'];
}

function parseArgs() {
  const args = process.argv.slice(2);
  let seconds = 60;
  const sizes: number[] = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--seconds') seconds = Number(args[++i]);
    else sizes.push(Number(args[i]));
  }
  return { sizes: sizes.length > 0 ? sizes : [50, 200, 500], seconds };
}

const pct = (values: number[], p: number) => {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
};
const ms = (v: number) => (Number.isNaN(v) ? '-' : v >= 1000 ? `${(v / 1000).toFixed(2)} s` : `${Math.round(v)} ms`);

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
  }));
  const created = await ctx.db.rootServer.createManyAndReturn({ data: rows, select: { id: true } });
  return created.map((r) => r.id);
}

async function runSize(ctx: AppContext, sshd: Sshd, n: number, seconds: number) {
  const ids = await createServers(ctx, sshd, n);
  const polls: PollRecord[] = [];
  const features = withJobHandler('monitor_poll', (poll) => async (payload, job: Job) => {
    const start = Date.now();
    const result = (await poll(payload, job)) as PollResult;
    polls.push({
      serverId: payload.root_server_id as number,
      due: Number(job.id!.split(':').at(-1)),
      start,
      end: Date.now(),
      outcome: result.outcome,
    });
    return result;
  });
  const workers = await startWorkers(ctx, features);
  const monitor = createMonitorService(ctx);

  for (const id of ids) await monitor.schedule({ id, monitor_update_interval: '5s' });
  await new Promise((r) => setTimeout(r, WARMUP_MS));
  const t0 = Date.now();
  const cpu0 = process.cpuUsage();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const cpu = process.cpuUsage(cpu0);
  const t1 = Date.now();
  // Polls due in [t0, t1 - interval] have had a full interval to finish by t1.
  const cutoff = t1 - INTERVAL_MS;
  for (const id of ids) await monitor.unschedule(id);
  await workers.close();
  ctx.sshPool.close();

  const measured = polls.filter((p) => p.due >= t0 && p.due < cutoff);
  // Each server is due once per interval; count its slots in the window from its own phase.
  const phase = new Map<number, number>();
  for (const p of polls) phase.set(p.serverId, p.due % INTERVAL_MS);
  let due = 0;
  for (const id of ids) {
    const offset = phase.get(id);
    if (offset === undefined) {
      due += Math.floor((cutoff - t0) / INTERVAL_MS);
      continue;
    }
    const first = Math.ceil((t0 - offset) / INTERVAL_MS) * INTERVAL_MS + offset;
    due += first < cutoff ? Math.floor((cutoff - 1 - first) / INTERVAL_MS) + 1 : 0;
  }
  const onTime = measured.filter((p) => p.outcome === 'ok' && p.end <= p.due + INTERVAL_MS);
  const failed = measured.filter((p) => p.outcome !== 'ok');
  const latency = measured.map((p) => p.end - p.due);
  const duration = measured.map((p) => p.end - p.start);
  const warm = polls.filter((p) => p.due < t0);
  const cpuSeconds = (cpu.user + cpu.system) / 1e6;
  const wallSeconds = (t1 - t0) / 1000;

  console.log(
    `\nN = ${n} servers, every ${INTERVAL_MS / 1000} s, measured ${wallSeconds.toFixed(0)} s after a ${WARMUP_MS / 1000} s warm-up`,
  );
  console.log(
    `  polls due ${due}, done ${measured.length}, on time ${onTime.length} (${((onTime.length / due) * 100).toFixed(2)} %), failed ${failed.length}`,
  );
  console.log(`  latency finish - due: p50 ${ms(pct(latency, 50))}, p99 ${ms(pct(latency, 99))}, max ${ms(Math.max(...latency))}`);
  console.log(`  poll duration:        p50 ${ms(pct(duration, 50))}, p99 ${ms(pct(duration, 99))}`);
  console.log(
    `  service CPU ${cpuSeconds.toFixed(2)} s (${((cpuSeconds / wallSeconds) * 100).toFixed(0)} % of one core) → ` +
      `${((cpuSeconds / Math.max(1, measured.length)) * 1000).toFixed(2)} CPU s per 1,000 polls`,
  );
  console.log(
    `  warm-up: ${warm.length} polls, p99 latency ${ms(
      pct(
        warm.map((p) => p.end - p.due),
        99,
      ),
    )}; load average ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}`,
  );

  await ctx.db.monitorLog.deleteMany({ where: { root_server_id: { in: ids } } });
  await ctx.db.rootServer.deleteMany({ where: { id: { in: ids } } });
}

async function main() {
  const { sizes, seconds } = parseArgs();
  const dbName = `svc_bench_monitor_${Date.now().toString(36)}`;
  const url = databaseUrl(dbName);
  await applyMigrations(url);
  const sshd = await startSshd({ maxStartups: Math.max(...sizes) + 100, maxSessions: 10 });
  const config = loadConfig({
    DATABASE_URL: url,
    REDIS_URL,
    QUEUE_PREFIX: dbName,
    SVC_MASTER_KEY_FILE: `${os.tmpdir()}/${dbName}.key`,
    LOG_LEVEL: 'warn',
  });
  const ctx = await createContext(config, pino({ level: 'warn' }));
  console.log(
    `bench:monitor on ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? '?'}), MONITOR_CONCURRENCY=${config.MONITOR_CONCURRENCY}`,
  );
  try {
    for (const n of sizes) await runSize(ctx, sshd, n, seconds);
  } finally {
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
