// npm run bench:monitor [-- 500 2000] [--workers 2] [--seconds 60] [--interval 5s] [--failover] [--storage]
// Monitors N simulated root servers (N rows pointing at one local OpenSSH server, so N real SSH
// connections, N sshd sessions and N remote sampling loops) at the 5 s interval with W real worker
// processes (`src/main.ts`, SVC_ROLE=worker) sharing one PostgreSQL and Redis, and prints for each N:
// - warm-up: how long until every server had its first sample, and how the first interval after
//   that went (the fleet is connected a few servers at a time, ahead of the first due time);
// - steady state (`--seconds`): due times vs samples in the monitor log (on time = recorded
//   within one interval of its due time; duplicates = two rows for one due time; missed = none),
//   lateness (row time - due time) p50/p99, the workers' CPU per 1,000 polls, the machine's CPU,
//   and how the servers split between the workers (their leases);
// - `--failover` (W >= 2): SIGKILL one worker; how long until each of its servers is sampled by
//   another, duplicates and missed due times meanwhile;
// - `--storage`: bytes per sample and the chart query (monitor-logs?bucket=) over 2 days of one
//   server in a table of 500 servers' 2 days of 5 s samples (~17 M rows, made with generate_series).
// Each target is printed as met/missed. Needs /usr/sbin/sshd, PostgreSQL and Redis like the tests;
// run as root (the harness creates users).
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createServers, machineCpu } from './fleet.js';
import { monitorSamplesSql } from './monitor-fill.js';
import { readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { loadConfig } from '../src/core/config.js';
import { applyMigrations } from '../src/core/migrate.js';
import { sleep } from '../src/core/sleep.js';
import { createContext, type AppContext } from '../src/context.js';
import { readMonitorLogs } from '../src/monitoring/monitor-log-service.js';
import { parseSchedule, scheduleKey, scheduleVersionKey } from '../src/monitoring/monitor-service.js';
import { leaseKey } from '../src/monitoring/monitor-leases.js';
import { intervalMs, MONITOR_INTERVALS, type MonitorInterval } from '../src/servers/root-server-metrics.js';
import { startSshd, TEST_USERS, type Sshd } from '../test/helpers/sshd.js';
import { LOOPBACK_DEFAULTS } from '../test/helpers/loopback.js';
import { databaseUrl, dropDatabase, REDIS_URL } from '../test/helpers/pg.js';

const ARGS = parseArgs();
/** The servers' monitor_update_interval (5 s unless `--interval`: a slow machine simulates fewer polls). */
const INTERVAL_MS = intervalMs(ARGS.interval);
const ROOT = path.resolve(import.meta.dirname, '..');

function parseArgs() {
  const args = process.argv.slice(2);
  const o = {
    sizes: [] as number[],
    workers: 1,
    seconds: 60,
    interval: '5s' as MonitorInterval,
    failover: false,
    storage: false,
  };
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--seconds') o.seconds = Number(args[++i]);
    else if (args[i] === '--workers') o.workers = Number(args[++i]);
    else if (args[i] === '--interval') {
      const v = args[++i];
      const found = MONITOR_INTERVALS.find((x) => x === v);
      if (!found) throw new Error(`--interval ${v}: expected one of ${MONITOR_INTERVALS.join(', ')}`);
      o.interval = found;
    } else if (args[i] === '--failover') o.failover = true;
    else if (args[i] === '--storage') o.storage = true;
    else if (/^\d+$/.test(args[i]!)) o.sizes.push(Number(args[i]));
    else throw new Error(`unknown argument ${args[i]}`);
  }
  if (o.sizes.length === 0 && !o.storage) o.sizes = [500];
  return o;
}

const pct = (values: number[], p: number) => {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
};
const ms = (v: number) => (Number.isNaN(v) ? '-' : v >= 1000 ? `${(v / 1000).toFixed(2)} s` : `${Math.round(v)} ms`);
const verdict = (ok: boolean, what: string) => console.log(`  ${ok ? 'met   ' : 'MISSED'} ${what}`);

/** CPU seconds (user + system) of a process, from /proc. */
function processCpu(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
}

/** The sampling loops running on the simulated servers (one `sh` per stream, as the key user). */
function loopProcesses(): number {
  try {
    return Number(execFileSync('pgrep', ['-c', '-u', TEST_USERS.key.name, '-x', 'sh']).toString().trim());
  } catch {
    return 0; // pgrep exits 1 when none match
  }
}

/** SSH logins so far (the simulated servers log in as the key user). */
const logins = (sshd: Sshd) => sshd.logins(TEST_USERS.key.name);

interface Env {
  ctx: AppContext;
  sshd: Sshd;
  childEnv: Record<string, string>;
  dbName: string;
}

function startWorker(env: Env): ChildProcess {
  return spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: ROOT,
    env: { ...process.env, ...env.childEnv, SVC_ROLE: 'worker' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
}

/** Monitor-log rows of the servers in [from, to) as (server, ms). */
async function rowsBetween(ctx: AppContext, ids: number[], from: number, to: number) {
  const rows = await ctx.db.$queryRaw<{ id: number; t: number }[]>`
    SELECT root_server_id AS id, (extract(epoch FROM created_at) * 1000)::float8 AS t FROM root_server_monitor_logs
    WHERE root_server_id = ANY(${ids}::int[]) AND created_at >= ${new Date(from)} AND created_at < ${new Date(to)}`;
  return rows;
}

/**
 * Due times in [from, to) of every server against its rows. Rows are taken in time order; each is
 * matched to the latest due time at or before it not matched yet, going back at most MAX_LATE_MS
 * (a poll can be that late at most: the due time that passed while connecting, plus the poll's
 * timeout); a row with no such due time left is a duplicate. On time = within one interval.
 */
const MAX_LATE_MS = 2 * INTERVAL_MS;
function matchSlots(ids: number[], phases: Map<number, number>, rows: { id: number; t: number }[], from: number, to: number) {
  const byServer = new Map<number, number[]>();
  for (const r of rows) byServer.set(r.id, [...(byServer.get(r.id) ?? []), r.t]);
  let due = 0;
  let duplicates = 0;
  const lateness: number[] = [];
  for (const id of ids) {
    const phase = phases.get(id)!;
    const first = Math.ceil((from - phase) / INTERVAL_MS) * INTERVAL_MS + phase;
    if (first < to) due += Math.floor((to - 1 - first) / INTERVAL_MS) + 1;
    const taken = new Set<number>();
    for (const t of (byServer.get(id) ?? []).sort((a, b) => a - b)) {
      let d = Math.floor((t - phase) / INTERVAL_MS) * INTERVAL_MS + phase;
      while (taken.has(d) && d >= t - MAX_LATE_MS) d -= INTERVAL_MS;
      if (taken.has(d) || d < t - MAX_LATE_MS) {
        duplicates++;
        continue;
      }
      taken.add(d);
      if (d >= from && d < to) lateness.push(t - d);
    }
  }
  const onTime = lateness.filter((l) => l <= INTERVAL_MS).length;
  return { due, recorded: onTime, late: lateness.length - onTime, missed: due - lateness.length, duplicates, lateness };
}

async function leaseOwners(ctx: AppContext, ids: number[]): Promise<Map<string, number[]>> {
  const owners = await ctx.redis.mget(...ids.map((id) => leaseKey(ctx.queues.prefix, id)));
  const out = new Map<string, number[]>();
  ids.forEach((id, i) => {
    const o = owners[i] ?? '(none)';
    out.set(o, [...(out.get(o) ?? []), id]);
  });
  return out;
}

async function runSize(env: Env, n: number, workersWanted: number, seconds: number, failover: boolean) {
  const { ctx, sshd } = env;
  const ids = await createServers(ctx, sshd, n, { monitor_update_interval: ARGS.interval });
  console.log(`\nN = ${n} servers, every ${INTERVAL_MS / 1000} s, ${workersWanted} worker process(es)`);
  const m0 = machineCpu();
  const started = Date.now();
  const children = Array.from({ length: workersWanted }, () => startWorker(env));
  try {
    // Warm-up: until every server has a sample.
    let firstAt = 0;
    for (;;) {
      const [{ n: sampled }] = await ctx.db.$queryRaw<[{ n: number }]>`
        SELECT count(DISTINCT root_server_id)::int AS n FROM root_server_monitor_logs WHERE root_server_id = ANY(${ids}::int[])`;
      if (sampled >= n) {
        firstAt = Date.now();
        break;
      }
      if (Date.now() - started > 180_000) {
        console.log(`  warm-up: only ${sampled} of ${n} servers sampled after 180 s`);
        firstAt = Date.now();
        break;
      }
      await sleep(250);
    }
    const phases = new Map(
      Object.entries(await ctx.redis.hgetall(scheduleKey(ctx.queues.prefix))).map(([id, v]) => [Number(id), parseSchedule(v).phase]),
    );
    // The first full interval after the fleet is connected.
    await sleep(2 * INTERVAL_MS + 1000);
    const firstInterval = matchSlots(
      ids,
      phases,
      await rowsBetween(ctx, ids, firstAt - 3 * INTERVAL_MS, firstAt + 3 * INTERVAL_MS),
      firstAt,
      firstAt + INTERVAL_MS,
    );
    const beforeReady = matchSlots(ids, phases, await rowsBetween(ctx, ids, started, firstAt + INTERVAL_MS), started, firstAt);
    console.log(
      `  warm-up: all ${n} servers sampled ${((firstAt - started) / 1000).toFixed(1)} s after the workers started ` +
        `(due times before that: ${beforeReady.recorded} of ${beforeReady.due} recorded, the rest were still connecting)`,
    );
    const warmOnTime = firstInterval.recorded / Math.max(1, firstInterval.due);
    console.log(
      `  first interval after warm-up: due ${firstInterval.due}, on time ${firstInterval.recorded} (${(warmOnTime * 100).toFixed(2)} %), ` +
        `p99 lateness ${ms(pct(firstInterval.lateness, 99))}`,
    );

    if (workersWanted > 1) {
      // Every server also gets a warm standby in the worker ranked second on it: wait for them
      // (one `sh` loop per stream on the simulated servers), so the steady state includes them.
      const standbyFrom = Date.now();
      let streams = loopProcesses();
      while (streams < 2 * n && Date.now() - standbyFrom < 600_000) {
        await sleep(1000);
        streams = loopProcesses();
      }
      console.log(
        `  standbys: ${streams} of ${2 * n} streams open (held + standby) ${((Date.now() - started) / 1000).toFixed(1)} s after the workers started`,
      );
    }

    // Steady state.
    const t0 = Date.now();
    const c0 = children.map((c) => processCpu(c.pid!));
    const mc0 = machineCpu();
    await sleep(seconds * 1000);
    const t1 = Date.now();
    const c1 = children.map((c) => processCpu(c.pid!));
    const mc1 = machineCpu();
    const owners = await leaseOwners(ctx, ids);
    await sleep(INTERVAL_MS + 1000); // let the last due times be recorded
    const s = matchSlots(ids, phases, await rowsBetween(ctx, ids, t0 - 3 * INTERVAL_MS, t1 + 2 * INTERVAL_MS), t0, t1);
    const wall = (t1 - t0) / 1000;
    const serviceCpu = c1.reduce((a, v, i) => a + v - c0[i]!, 0);
    const polls = s.lateness.length;
    const perThousand = (serviceCpu / Math.max(1, polls)) * 1000;
    const machine = mc1 - mc0;
    const onTime = s.recorded / Math.max(1, s.due);
    console.log(
      `  measured ${wall.toFixed(0)} s: due ${s.due}, on time ${s.recorded} (${(onTime * 100).toFixed(2)} %), late ${s.late}, missed ${s.missed}, duplicates ${s.duplicates}`,
    );
    console.log(
      `  lateness (row - due): p50 ${ms(pct(s.lateness, 50))}, p99 ${ms(pct(s.lateness, 99))}, max ${ms(Math.max(...s.lateness))}`,
    );
    console.log(
      `  service CPU ${serviceCpu.toFixed(2)} s over ${children.length} worker(s) (${((serviceCpu / wall) * 100).toFixed(0)} % of one core) → ` +
        `${perThousand.toFixed(2)} CPU s per 1,000 polls`,
    );
    console.log(
      `  machine CPU ${machine.toFixed(2)} s (${((machine / wall / os.cpus().length) * 100).toFixed(0)} % of ${os.cpus().length} cores) → ` +
        `${((machine / Math.max(1, polls)) * 1000).toFixed(2)} CPU s per 1,000 polls (service + sshd + remote loops + PostgreSQL + Redis)`,
    );
    console.log(
      `  leases: ${[...owners.entries()].map(([o, l]) => `${o.split(':').slice(1, 2).join('') || o} ${l.length}`).join(', ')}; ` +
        `load average ${os
          .loadavg()
          .map((l) => l.toFixed(2))
          .join(' ')}`,
    );
    verdict(onTime >= 0.99, `>= 99 % of polls on time (${(onTime * 100).toFixed(2)} %)`);
    verdict(perThousand <= 0.5, `service CPU <= 0.5 s per 1,000 polls (${perThousand.toFixed(2)} s)`);
    verdict(warmOnTime >= 0.99, `first interval after warm-up >= 99 % on time (${(warmOnTime * 100).toFixed(2)} %)`);
    if (workersWanted > 1) {
      const held = [...owners.entries()].filter(([o]) => o !== '(none)').map(([, l]) => l.length);
      verdict(
        s.duplicates === 0 && s.missed === 0,
        `scale-out: every due poll exactly once (${s.duplicates} duplicates, ${s.missed} missed)`,
      );
      verdict(
        held.length === workersWanted && Math.min(...held) >= (n / workersWanted) * 0.5,
        `scale-out: the load splits (${held.join(' / ')} servers)`,
      );
    }

    if (failover && children.length > 1) {
      const victim = children[children.length - 1]!;
      const ofVictim = [...owners.entries()].find(([o]) => o.split(':')[1] === String(victim.pid))?.[1] ?? [];
      const loginsBefore = logins(sshd);
      const killedAt = Date.now();
      victim.kill('SIGKILL');
      // When the survivor holds every lease of the victim (the lease expiry plus one sync).
      let leasesAt = Number.POSITIVE_INFINITY;
      while (Date.now() - killedAt < 60_000) {
        const taken = await leaseOwners(ctx, ofVictim);
        if (taken.size === 1 && !taken.has('(none)') && ![...taken.keys()][0]!.includes(`:${victim.pid}:`)) {
          leasesAt = Date.now();
          break;
        }
        await sleep(250);
      }
      const loadAtTakeOver = os.loadavg()[0]!;
      await sleep(Math.max(0, killedAt + 5 * INTERVAL_MS - Date.now()));
      // A large share to take over (many handshakes) may need longer: wait until all are sampled.
      while (Date.now() - killedAt < 150_000) {
        const [{ n: done }] = await ctx.db.$queryRaw<[{ n: number }]>`
          SELECT count(DISTINCT root_server_id)::int AS n FROM root_server_monitor_logs
          WHERE root_server_id = ANY(${ofVictim}::int[]) AND created_at > ${new Date(killedAt)}`;
        if (done >= ofVictim.length) break;
        await sleep(1000);
      }
      await sleep(2 * INTERVAL_MS);
      const end = Date.now();
      const rows = await rowsBetween(ctx, ofVictim, killedAt - 5 * INTERVAL_MS, end);
      const firstAfter = new Map<number, number>();
      const lastBefore = new Map<number, number>();
      for (const r of rows) {
        if (r.t > killedAt) firstAfter.set(r.id, Math.min(firstAfter.get(r.id) ?? Number.POSITIVE_INFINITY, r.t));
        else lastBefore.set(r.id, Math.max(lastBefore.get(r.id) ?? 0, r.t));
      }
      const takeover = ofVictim.map((id) => (firstAfter.get(id) ?? Number.POSITIVE_INFINITY) - killedAt);
      const gaps = ofVictim.map((id) => (firstAfter.get(id) ?? Number.POSITIVE_INFINITY) - (lastBefore.get(id) ?? killedAt));
      const f = matchSlots(ofVictim, phases, rows, killedAt - 2 * INTERVAL_MS, end - INTERVAL_MS);
      const all = matchSlots(
        ids,
        phases,
        await rowsBetween(ctx, ids, killedAt - 5 * INTERVAL_MS, end),
        killedAt - 2 * INTERVAL_MS,
        end - INTERVAL_MS,
      );
      console.log(`  failover: SIGKILL of one worker holding ${ofVictim.length} servers`);
      console.log(
        `    kill → first sample by the other worker: p50 ${ms(pct(takeover, 50))}, p99 ${ms(pct(takeover, 99))}, max ${ms(Math.max(...takeover))}; ` +
          `gap between samples: max ${ms(Math.max(...gaps))}`,
      );
      console.log(
        `    kill → every lease held by the other worker: ${ms(leasesAt - killedAt)} (load average then ${loadAtTakeOver.toFixed(1)}); ` +
          `SSH logins during the take-over: ${logins(sshd) - loginsBefore}`,
      );
      console.log(
        `    its servers (kill - 2 intervals → end): due ${f.due}, on time ${f.recorded}, late ${f.late}, missed ${f.missed} (during the take-over), duplicates ${f.duplicates}; all servers: duplicates ${all.duplicates}`,
      );
      verdict(
        Math.max(...takeover) <= 2 * INTERVAL_MS,
        `failover: its servers sampled by the other within two intervals (max ${ms(Math.max(...takeover))})`,
      );
      verdict(all.duplicates === 0, `failover: nothing sampled twice for one due time (${all.duplicates})`);
    }
    console.log(`  (whole run: machine CPU ${(machineCpu() - m0).toFixed(0)} s)`);
  } finally {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGTERM');
    await Promise.all(children.map((c) => (c.exitCode === null && c.signalCode === null ? new Promise((r) => c.once('exit', r)) : null)));
    await ctx.db.rootServer.updateMany({ where: { id: { in: ids } }, data: { monitoring_enabled: false } });
    await ctx.redis.del(scheduleKey(ctx.queues.prefix), scheduleVersionKey(ctx.queues.prefix));
    await ctx.db.monitorLog.deleteMany({ where: { root_server_id: { in: ids } } });
    await ctx.db.rootServer.deleteMany({ where: { id: { in: ids } } });
  }
}

async function storage(ctx: AppContext) {
  const servers = 500;
  const perServer = (2 * 86_400_000) / 5000;
  console.log(
    `\nStorage: ${servers} servers × 2 days of 5 s samples (${(servers * perServer).toLocaleString('en')} rows), generate_series`,
  );
  const created = await ctx.db.rootServer.createManyAndReturn({
    data: Array.from({ length: servers }, (_, i) => ({ name: `store-${i}`, ip: '127.0.0.1', state: 'confirmed' as const })),
    select: { id: true },
  });
  const ids = created.map((r) => r.id);
  const t0 = Date.now();
  const end = new Date();
  await ctx.db.$executeRawUnsafe(monitorSamplesSql(ids, end));
  await ctx.db.$executeRawUnsafe('VACUUM ANALYZE root_server_monitor_logs');
  const [size] = await ctx.db.$queryRaw<[{ rows: bigint; table_bytes: bigint; index_bytes: bigint }]>`
    SELECT (SELECT count(*) FROM root_server_monitor_logs) AS rows,
      pg_table_size('root_server_monitor_logs') AS table_bytes, pg_indexes_size('root_server_monitor_logs') AS index_bytes`;
  const rows = Number(size.rows);
  const bytes = Number(size.table_bytes) + Number(size.index_bytes);
  console.log(
    `  generated in ${((Date.now() - t0) / 1000).toFixed(0)} s: ${rows.toLocaleString('en')} rows, table ${(Number(size.table_bytes) / 2 ** 20).toFixed(0)} MiB + ` +
      `indexes ${(Number(size.index_bytes) / 2 ** 20).toFixed(0)} MiB → ${(bytes / rows).toFixed(1)} bytes per sample`,
  );
  const id = ids[Math.floor(ids.length / 2)]!;
  const from = new Date(end.getTime() - 2 * 86_400_000).toISOString();
  const results: string[] = [];
  let worst = 0;
  for (const bucket of ['15m', '1h', '5m']) {
    const times: number[] = [];
    for (let i = 0; i < 6; i++) {
      const s = performance.now();
      const page = await readMonitorLogs(ctx, id, { from, to: end.toISOString(), bucket, order: 'asc', limit: 200, offset: 0 });
      times.push(performance.now() - s);
      if (i === 0 && page.items.length === 0) throw new Error('the chart query found nothing');
    }
    const cold = times[0]!;
    const warm = pct(times.slice(1), 50);
    worst = Math.max(worst, warm);
    results.push(`bucket=${bucket}: first ${ms(cold)}, then p50 ${ms(warm)}`);
  }
  console.log(`  chart query over 2 days of one server (${perServer.toLocaleString('en')} rows): ${results.join('; ')}`);
  verdict(worst <= 100, `chart query <= 100 ms (worst p50 ${ms(worst)})`);
  await ctx.db.$executeRawUnsafe('TRUNCATE root_server_monitor_logs');
}

async function main() {
  const o = ARGS;
  const dbName = `svc_bench_monitor_${Date.now().toString(36)}`;
  const url = databaseUrl(dbName);
  await applyMigrations(url);
  const sshd = await startSshd({ maxStartups: 500, maxSessions: 10 });
  const keyFile = `${os.tmpdir()}/${dbName}.key`;
  // Every third-party default on loopback: the workers send nothing off this machine.
  const childEnv = {
    ...LOOPBACK_DEFAULTS,
    DATABASE_URL: url,
    REDIS_URL,
    QUEUE_PREFIX: dbName,
    SVC_MASTER_KEY_FILE: keyFile,
    LOG_LEVEL: 'warn',
  };
  const config = loadConfig(childEnv);
  const ctx = await createContext(config, pino({ level: 'warn' }));
  console.log(
    `bench:monitor on ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? '?'}), MONITOR_CONCURRENCY=${config.MONITOR_CONCURRENCY} (connections opened at once)`,
  );
  try {
    for (const n of o.sizes) await runSize({ ctx, sshd, childEnv, dbName }, n, o.workers, o.seconds, o.failover);
    if (o.storage) await storage(ctx);
  } finally {
    const keys = await ctx.redis.keys(`${dbName}:*`);
    if (keys.length > 0) await ctx.redis.del(...keys);
    await ctx.close();
    await sshd.stop();
    await dropDatabase(dbName);
    await rm(keyFile, { force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
