// npm run bench:webhook — throughput and latency of POST /svc/webhook/<token>, measured in one run
// against the real PostgreSQL: the service (`src/main.ts`, SVC_ROLE=api) and an empty Fastify
// route (the ceiling) each run in a process of their own; autocannon drives them in turn with 50
// connections. Cases: the empty route, a webhook POST with a message (group commit), the same POST
// without one, and the raw-SQL ceiling: the single-message INSERT ... SELECT ... WHERE EXISTS issued
// directly with node-pg by as many clients as the endpoint's pool has connections (no HTTP). Then
// light load (1 connection): the latency a lone caller pays for its message beyond the insert
// itself. Last, the crash case: callers post messages, the service is killed with SIGKILL, and
// every call answered 200 must have its message stored. Prints met/missed lines for the targets,
// and for the three HTTP cases at 50 connections the CPU a call cost the service's process and
// PostgreSQL's (read from /proc: where the ratios between the cases come from).
// Environment: BENCH_PG_URL (default postgresql://postgres@127.0.0.1:5432), REDIS_URL,
// BENCH_SECONDS (default 10), BENCH_LIGHT_SECONDS (5), BENCH_CONNECTIONS (50), BENCH_LOG_LEVEL (warn).
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { cpus, loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import autocannon, { type Result } from 'autocannon';
import pg from 'pg';
import { applyMigrations } from '../src/core/migrate.js';
import { sleep } from '../src/core/sleep.js';
import { WEBHOOK_POOL_SIZE } from '../src/webhooks/webhook-call-service.js';
import { runBench } from './bench-context.js';
import { LOOPBACK_DEFAULTS } from '../test/helpers/loopback.js';
import { freePort } from '../test/helpers/sshd.js';
import { postgresCpu, processCpu } from './process-cpu.js';

const PG_BASE = process.env.BENCH_PG_URL ?? 'postgresql://postgres@127.0.0.1:5432';
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const LIGHT_SECONDS = Number(process.env.BENCH_LIGHT_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const LOG_LEVEL = process.env.BENCH_LOG_LEVEL ?? 'warn';
const ROOT = path.resolve(import.meta.dirname, '..');

function start(entry: string, env: Record<string, string>): ChildProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', entry], {
    cwd: ROOT,
    // Every third-party default on loopback: the bench sends nothing off this machine.
    env: { ...process.env, ...LOOPBACK_DEFAULTS, ...env },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  return child;
}

async function waitUntilUp(url: string, init: RequestInit) {
  for (let i = 0; i < 300; i++) {
    try {
      const res = await fetch(url, { ...init, signal: AbortSignal.timeout(1000) });
      if (res.status < 500) return;
    } catch {
      // not listening yet
    }
    await sleep(100);
  }
  throw new Error(`${url} did not come up`);
}

async function measure(url: string, body: string, seconds = SECONDS, connections = CONNECTIONS): Promise<Result> {
  return autocannon({
    url,
    connections,
    duration: seconds,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
  });
}

/** CPU µs per call of the service process and of PostgreSQL's processes while `run` ran. */
async function withCpu(pid: number, run: () => Promise<Result>) {
  const service0 = processCpu(pid);
  const pg0 = postgresCpu();
  const result = await run();
  const calls = result.requests.total;
  const pg1 = postgresCpu();
  return {
    result,
    serviceUs: ((processCpu(pid) - service0) * 1e6) / calls,
    postgresUs: pg0 === null || pg1 === null ? null : ((pg1 - pg0) * 1e6) / calls,
  };
}

interface Timing {
  perSecond: number;
  average: number;
  p50: number;
  p99: number;
}

/** The statement the endpoint ran per message before group commit: one INSERT, one commit. */
const SINGLE_INSERT = `INSERT INTO messages (model_name, rec_id, body, message_type, subtype_xmlid, author_id, author_name)
  SELECT $1, $2, $3, $4::"MessageType", $5, $6, $7 WHERE EXISTS (SELECT 1 FROM "subscriptions" WHERE id = $2)`;

/** The raw-SQL ceiling: SINGLE_INSERT issued in a loop by `clients` callers on a pg pool of that size. */
async function rawInserts(dbUrl: string, recId: number, clients: number, seconds: number): Promise<Timing> {
  const pool = new pg.Pool({ connectionString: dbUrl, max: clients });
  const params = ['svc.subscription', recId, 'Backup of acme_17 finished in 42 s', 'notification', 'mail.mt_note', null, 'webhook 1'];
  const latencies: number[] = [];
  const started = performance.now();
  const end = started + seconds * 1000;
  try {
    await Promise.all(
      Array.from({ length: clients }, async () => {
        while (performance.now() < end) {
          const t0 = performance.now();
          await pool.query(SINGLE_INSERT, params);
          latencies.push(performance.now() - t0);
        }
      }),
    );
  } finally {
    await pool.end();
  }
  const elapsed = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]!;
  return {
    perSecond: latencies.length / elapsed,
    average: latencies.reduce((a, b) => a + b, 0) / latencies.length,
    p50: at(0.5),
    p99: at(0.99),
  };
}

/** autocannon's latencies are whole milliseconds: at 1 connection the mean is read from the rate instead. */
const timing = (r: Result, connections = CONNECTIONS): Timing => ({
  perSecond: r.requests.average,
  average: connections === 1 ? 1000 / r.requests.average : r.latency.average,
  p50: r.latency.p50,
  p99: r.latency.p99,
});

/** Crash case: CONNECTIONS callers post messages one after the other; the service gets SIGKILL after `seconds`. */
async function crashUnderLoad(url: string, service: ChildProcess, seconds: number) {
  const answered: string[] = [];
  let sent = 0;
  setTimeout(() => service.kill('SIGKILL'), seconds * 1000);
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async (_, c) => {
      for (let i = 0; ; i++) {
        const message = `crash c${c} #${i}`;
        sent += 1;
        try {
          const res = await fetch(url, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ message }),
            signal: AbortSignal.timeout(10_000),
          });
          if (res.status === 200) answered.push(message);
        } catch {
          return; // the service is gone
        }
      }
    }),
  );
  return { sent, answered };
}

async function main() {
  const dbName = `svc_bench_webhook_${Date.now().toString(36)}`;
  const dbUrl = `${PG_BASE}/${dbName}`;
  const dir = await mkdtemp(path.join(tmpdir(), 'svc-bench-'));
  const children: ChildProcess[] = [];
  const admin = new pg.Client({ connectionString: `${PG_BASE}/postgres` });
  await admin.connect();
  try {
    const load = loadavg();
    await applyMigrations(dbUrl);
    const db = new pg.Client({ connectionString: dbUrl });
    await db.connect();
    const token = randomBytes(32).toString('hex');
    const { rows } = await db.query<{ id: number }>(
      `WITH p AS (INSERT INTO partners (name, email, updated_at) VALUES ('Bench', 'bench@example.com', now()) RETURNING id)
       INSERT INTO subscriptions (name, partner_id, updated_at) SELECT 'Bench ' || n, id, now() FROM p, generate_series(1, 2) n RETURNING id`,
    );
    const subscriptionId = rows[0]!.id;
    const rawTargetId = rows[1]!.id;
    await db.query(`INSERT INTO webhooks (token, model_name, rec_id, updated_at) VALUES ($1, 'svc.subscription', $2, now())`, [
      token,
      subscriptionId,
    ]);

    const servicePort = await freePort();
    const emptyPort = await freePort();
    const service = start('src/main.ts', {
      DATABASE_URL: dbUrl,
      SVC_ROLE: 'api',
      HOST: '127.0.0.1',
      PORT: String(servicePort),
      LOG_LEVEL,
      SVC_MASTER_KEY_FILE: path.join(dir, 'master.key'),
      QUEUE_PREFIX: dbName,
    });
    children.push(service, start('bench/empty-server.ts', { PORT: String(emptyPort), LOG_LEVEL }));
    const hookUrl = `http://127.0.0.1:${servicePort}/svc/webhook/${token}`;
    const emptyUrl = `http://127.0.0.1:${emptyPort}/empty`;
    await waitUntilUp(hookUrl, { method: 'POST', body: '{}' });
    await waitUntilUp(emptyUrl, { method: 'POST', body: '{}' });

    const withMessage = JSON.stringify({
      message: 'Backup of acme_17 finished in 42 s',
      message_type: 'notification',
      subtype_xmlid: 'mail.mt_note',
    });
    const countMessages = async (recId: number) =>
      Number((await db.query('SELECT count(*) FROM messages WHERE rec_id = $1', [recId])).rows[0].count);

    console.log(
      `# bench:webhook — ${CONNECTIONS} connections, ${SECONDS} s per case (${LIGHT_SECONDS} s at 1 connection), ${cpus().length} CPUs, ` +
        `load ${load.map((l) => l.toFixed(2)).join(' ')} at the start, LOG_LEVEL=${LOG_LEVEL}`,
    );
    // Warm-up (JIT, pools), not counted.
    await measure(emptyUrl, withMessage, 2);
    await measure(hookUrl, withMessage, 2);
    await measure(hookUrl, '{}', 2);
    await rawInserts(dbUrl, rawTargetId, WEBHOOK_POOL_SIZE, 2);

    const before = await countMessages(subscriptionId);
    const emptyServer = children[1]!;
    const { result: empty, serviceUs: emptyUs } = await withCpu(emptyServer.pid!, () => measure(emptyUrl, withMessage));
    const messageCpu = await withCpu(service.pid!, () => measure(hookUrl, withMessage));
    const messageRun = messageCpu.result;
    const stored = (await countMessages(subscriptionId)) - before;
    // One transaction per batch: the distinct xmin of the run's rows count the batches.
    const { rows: batchRows } = await db.query<{ batches: number }>(
      `SELECT count(DISTINCT xmin::text)::int AS batches FROM (SELECT xmin FROM messages WHERE rec_id = $1 ORDER BY id OFFSET $2) m`,
      [subscriptionId, before],
    );
    const batches = batchRows[0]!.batches;
    const noMessageCpu = await withCpu(service.pid!, () => measure(hookUrl, '{}'));
    const noMessage = noMessageCpu.result;
    const raw = await rawInserts(dbUrl, rawTargetId, WEBHOOK_POOL_SIZE, SECONDS);
    const light = {
      message: timing(await measure(hookUrl, withMessage, LIGHT_SECONDS, 1), 1),
      noMessage: timing(await measure(hookUrl, '{}', LIGHT_SECONDS, 1), 1),
      raw: await rawInserts(dbUrl, rawTargetId, 1, LIGHT_SECONDS),
    };
    const crashed = await crashUnderLoad(hookUrl, service, 3);
    const crashStored = new Set(
      (await db.query<{ body: string }>(`SELECT body FROM messages WHERE rec_id = $1 AND body LIKE 'crash %'`, [subscriptionId])).rows.map(
        (r) => r.body,
      ),
    );
    const answeredLost = crashed.answered.filter((m) => !crashStored.has(m)).length;
    const storedNotAnswered = crashStored.size - (crashed.answered.length - answeredLost);

    const heavy = { empty: timing(empty), message: timing(messageRun), noMessage: timing(noMessage), raw };
    const row = (name: string, t: Timing, errors: number | string = '') =>
      `| ${name.padEnd(48)} | ${t.perSecond.toFixed(0).padStart(8)} | ${t.average.toFixed(2).padStart(7)} | ${t.p50.toFixed(1).padStart(7)} | ${t.p99.toFixed(1).padStart(7)} | ${String(errors).padStart(6)} |`;
    const errorsOf = (r: Result) => r.non2xx + r.errors + r.timeouts;
    console.log('');
    console.log(`| case                                             |    req/s | mean ms | p50 ms  | p99 ms  | errors |`);
    console.log('|--------------------------------------------------|----------|---------|---------|---------|--------|');
    console.log(row('empty Fastify route (ceiling)', heavy.empty, errorsOf(empty)));
    console.log(row('webhook POST with a message', heavy.message, errorsOf(messageRun)));
    console.log(row('webhook POST without a message', heavy.noMessage, errorsOf(noMessage)));
    console.log(row(`raw single INSERT, node-pg, ${WEBHOOK_POOL_SIZE} clients (no HTTP)`, heavy.raw));
    console.log(row('1 connection: webhook POST with a message', light.message));
    console.log(row('1 connection: webhook POST without a message', light.noMessage));
    console.log(row('1 client: raw single INSERT', light.raw));
    const us = (v: number | null) => (v === null ? 'n/a' : `${v.toFixed(1)} µs`);
    console.log('');
    console.log(`CPU per call at ${CONNECTIONS} connections (service process / PostgreSQL):`);
    console.log(`  empty Fastify route:            ${us(emptyUs)} / —`);
    console.log(`  webhook POST with a message:    ${us(messageCpu.serviceUs)} / ${us(messageCpu.postgresUs)}`);
    console.log(`  webhook POST without a message: ${us(noMessageCpu.serviceUs)} / ${us(noMessageCpu.postgresUs)}`);

    const ratio = (a: Timing, b: Timing) => a.perSecond / b.perSecond;
    const withVsWithout = ratio(heavy.message, heavy.noMessage);
    const withVsRaw = ratio(heavy.message, heavy.raw);
    // What a lone caller pays for its message beyond the insert's own round trip and commit.
    const added = light.message.average - light.noMessage.average - light.raw.average;
    console.log('');
    console.log(`with message / empty route:       ${ratio(heavy.message, heavy.empty).toFixed(2)}`);
    console.log(`without message / empty route:    ${ratio(heavy.noMessage, heavy.empty).toFixed(2)}`);
    console.log(`with message / without message:   ${withVsWithout.toFixed(2)}`);
    console.log(`with message / raw single INSERT: ${withVsRaw.toFixed(2)}`);
    console.log(
      `1 connection: with − without message = ${(light.message.average - light.noMessage.average).toFixed(2)} ms, ` +
        `minus the raw insert (${light.raw.average.toFixed(2)} ms) = ${added.toFixed(2)} ms added per call`,
    );
    // Calls still in flight when autocannon stops are stored but not counted as answered.
    const lost = Math.max(0, messageRun['2xx'] - stored);
    console.log(
      `messages answered 200: ${messageRun['2xx']}, stored: ${stored} (lost: ${lost}) in ${batches} transactions (${(stored / batches).toFixed(1)} rows each)`,
    );
    console.log(
      `crash (SIGKILL after 3 s, ${CONNECTIONS} callers): ${crashed.sent} sent, ${crashed.answered.length} answered 200, ` +
        `${crashStored.size} stored; answered but not stored: ${answeredLost}; stored but not answered: ${storedNotAnswered}`,
    );
    const targets = [
      ['with a message ≥ 0.5× without a message', withVsWithout >= 0.5],
      ['with a message ≥ 1.0× the raw single-INSERT ceiling', withVsRaw >= 1.0],
      [`with a message p99 ≤ 50 ms at ${CONNECTIONS} connections`, heavy.message.p99 <= 50],
      ['1 connection: added latency per call ≤ 2 ms', added <= 2],
      ['no message lost (load run)', lost === 0],
      ['no message lost (crash: answered ⊆ stored)', answeredLost === 0],
      ['without a message ≥ half the empty route', heavy.noMessage.perSecond >= heavy.empty.perSecond / 2],
    ] as const;
    console.log('');
    for (const [name, ok] of targets) console.log(`${ok ? 'met    ' : 'missed '}  ${name}`);
    await db.end();
  } finally {
    for (const child of children) child.kill('SIGTERM');
    await Promise.all(
      children.map((c) => new Promise((r) => (c.exitCode !== null || c.signalCode !== null ? r(null) : c.once('exit', r)))),
    );
    await admin.query(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`);
    await admin.end();
    await rm(dir, { recursive: true, force: true });
  }
}

runBench(main);
