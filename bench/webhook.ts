// npm run bench:webhook — throughput and latency of POST /svc/webhook/<token>, measured in one run
// against the real PostgreSQL: the service (`src/main.ts`, SVC_ROLE=api) and an empty Fastify
// route (the ceiling) each run in a process of their own; autocannon drives them in turn with 50
// connections. It prints requests/s, p50 and p99 of: the empty route, a webhook POST with a
// message, the same POST without one, and the ratios; and checks that no message was lost.
// Environment: BENCH_PG_URL (default postgresql://postgres@127.0.0.1:5432), REDIS_URL,
// BENCH_SECONDS (default 10), BENCH_CONNECTIONS (50), BENCH_LOG_LEVEL (warn).
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { cpus, loadavg, tmpdir } from 'node:os';
import path from 'node:path';
import autocannon, { type Result } from 'autocannon';
import pg from 'pg';
import { applyMigrations } from '../src/core/migrate.js';

const PG_BASE = process.env.BENCH_PG_URL ?? 'postgresql://postgres@127.0.0.1:5432';
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const LOG_LEVEL = process.env.BENCH_LOG_LEVEL ?? 'warn';
const ROOT = path.resolve(import.meta.dirname, '..');

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer().listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

function start(entry: string, env: Record<string, string>): ChildProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', entry], {
    cwd: ROOT,
    env: { ...process.env, ...env },
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
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} did not come up`);
}

async function measure(url: string, body: string, seconds = SECONDS): Promise<Result> {
  return autocannon({
    url,
    connections: CONNECTIONS,
    duration: seconds,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body,
  });
}

async function main() {
  const dbName = `svc_bench_webhook_${Date.now().toString(36)}`;
  const dbUrl = `${PG_BASE}/${dbName}`;
  const dir = await mkdtemp(path.join(tmpdir(), 'svc-bench-'));
  const children: ChildProcess[] = [];
  const admin = new pg.Client({ connectionString: `${PG_BASE}/postgres` });
  await admin.connect();
  try {
    await applyMigrations(dbUrl);
    const db = new pg.Client({ connectionString: dbUrl });
    await db.connect();
    const token = randomBytes(32).toString('hex');
    const { rows } = await db.query<{ id: number }>(
      `WITH p AS (INSERT INTO partners (name, email, updated_at) VALUES ('Bench', 'bench@example.com', now()) RETURNING id)
       INSERT INTO subscriptions (name, partner_id, updated_at) SELECT 'Bench', id, now() FROM p RETURNING id`,
    );
    const subscriptionId = rows[0]!.id;
    await db.query(`INSERT INTO webhooks (token, model_name, rec_id, updated_at) VALUES ($1, 'svc.subscription', $2, now())`, [
      token,
      subscriptionId,
    ]);

    const servicePort = await freePort();
    const emptyPort = await freePort();
    children.push(
      start('src/main.ts', {
        DATABASE_URL: dbUrl,
        SVC_ROLE: 'api',
        HOST: '127.0.0.1',
        PORT: String(servicePort),
        LOG_LEVEL,
        SVC_MASTER_KEY_FILE: path.join(dir, 'master.key'),
        QUEUE_PREFIX: dbName,
      }),
      start('bench/empty-server.ts', { PORT: String(emptyPort), LOG_LEVEL }),
    );
    const hookUrl = `http://127.0.0.1:${servicePort}/svc/webhook/${token}`;
    const emptyUrl = `http://127.0.0.1:${emptyPort}/empty`;
    await waitUntilUp(hookUrl, { method: 'POST', body: '{}' });
    await waitUntilUp(emptyUrl, { method: 'POST', body: '{}' });

    const withMessage = JSON.stringify({
      message: 'Backup of acme_17 finished in 42 s',
      message_type: 'notification',
      subtype_xmlid: 'mail.mt_note',
    });
    const countMessages = async () =>
      Number((await db.query('SELECT count(*) FROM messages WHERE rec_id = $1', [subscriptionId])).rows[0].count);

    console.log(
      `# bench:webhook — ${CONNECTIONS} connections, ${SECONDS} s per case, ${cpus().length} CPUs, load ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}, LOG_LEVEL=${LOG_LEVEL}`,
    );
    // Warm-up (JIT, pools), not counted.
    await measure(emptyUrl, withMessage, 2);
    await measure(hookUrl, withMessage, 2);
    await measure(hookUrl, '{}', 2);

    const before = await countMessages();
    const results = {
      empty: await measure(emptyUrl, withMessage),
      message: await measure(hookUrl, withMessage),
      noMessage: await measure(hookUrl, '{}'),
    };
    const stored = (await countMessages()) - before;

    const row = (name: string, r: Result) =>
      `| ${name.padEnd(32)} | ${r.requests.average.toFixed(0).padStart(8)} | ${String(r.latency.p50).padStart(7)} | ${String(r.latency.p99).padStart(7)} | ${String(r.non2xx + r.errors + r.timeouts).padStart(6)} |`;
    console.log('');
    console.log('| case                             |    req/s | p50 ms  | p99 ms  | errors |');
    console.log('|----------------------------------|----------|---------|---------|--------|');
    console.log(row('empty Fastify route (ceiling)', results.empty));
    console.log(row('webhook POST with a message', results.message));
    console.log(row('webhook POST without a message', results.noMessage));
    const ratio = (a: Result, b: Result) => (a.requests.average / b.requests.average).toFixed(2);
    console.log('');
    console.log(`with message / empty route:    ${ratio(results.message, results.empty)}`);
    console.log(`without message / empty route: ${ratio(results.noMessage, results.empty)}`);
    // Calls still in flight when autocannon stops are stored but not counted as answered.
    console.log(
      `messages answered 200: ${results.message['2xx']}, stored: ${stored} (lost: ${Math.max(0, results.message['2xx'] - stored)})`,
    );
    const targets = [
      [`with a message ≥ 2000 req/s`, results.message.requests.average >= 2000],
      [`with a message p99 < 50 ms`, results.message.latency.p99 < 50],
      [`without a message ≥ half the empty route`, results.noMessage.requests.average >= results.empty.requests.average / 2],
      [`no message lost`, stored >= results.message['2xx']],
    ] as const;
    console.log('');
    for (const [name, ok] of targets) console.log(`${ok ? 'met    ' : 'NOT met'}  ${name}`);
    await db.end();
  } finally {
    for (const child of children) child.kill('SIGTERM');
    await Promise.all(children.map((c) => new Promise((r) => (c.exitCode !== null ? r(null) : c.once('exit', r)))));
    await admin.query(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`);
    await admin.end();
    await rm(dir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
