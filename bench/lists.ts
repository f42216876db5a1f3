// npm run bench:lists [-- --calls 20] [--keep] [--db <name>] [--only <text>]
// Every list shape of the big tables through the real API process (`src/main.ts`, SVC_ROLE=api),
// on a throwaway database filled by SQL: 10 M webhook calls, 5 M action-log rows, 1 M messages,
// 17 M monitor samples (bench/monitor-fill.ts, the monitoring bench's generator), 100 k partners
// and 100 k subscriptions. Per shape (first page, a page ~1,000,000 rows deep by cursor, each q,
// each sort, each filter, from/to): one unmeasured call, then `--calls` calls one after the other;
// p50/p99 and met/missed for p99 <= 50 ms. Prints the fill time and the database size with its
// indexes. `--keep` leaves the database for another run, `--db <name>` measures a kept one (its
// migrations applied first and timed: the index builds on full tables); otherwise it is dropped.
// `--only <text>` measures the shapes whose list and name hold the text (e.g. `--only q=`).
// A build without cursors (before them) is measured too: deep pages then go by offset.
import { spawn, type ChildProcess } from 'node:child_process';
import { rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import pg from 'pg';
import { createAuthService } from '../src/auth/auth-service.js';
import { createSecretBox, loadOrCreateMasterKey } from '../src/core/crypto.js';
import { createDb } from '../src/core/db.js';
import { applyMigrations } from '../src/core/migrate.js';
import type { CursorKey } from '../src/core/lists.js';
import { sleep } from '../src/core/sleep.js';
import { LOOPBACK_DEFAULTS } from '../test/helpers/loopback.js';
import { databaseUrl, dropDatabase, REDIS_URL } from '../test/helpers/pg.js';
import { freePort } from '../test/helpers/sshd.js';
import { monitorSamplesSql } from './monitor-fill.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const TARGET_MS = 50;
const DEEP = 1_000_000;

function parseArgs() {
  const args = process.argv.slice(2);
  const o = { calls: 20, keep: false, db: '', only: '' };
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--calls') o.calls = Number(args[++i]);
    else if (args[i] === '--keep') o.keep = true;
    else if (args[i] === '--db') o.db = args[++i] ?? '';
    else if (args[i] === '--only') o.only = args[++i] ?? '';
    else throw new Error(`unknown argument ${args[i]}`);
  }
  return o;
}

const pct = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
};
const ms = (v: number) => (v >= 1000 ? `${(v / 1000).toFixed(2)} s` : `${v.toFixed(v < 10 ? 1 : 0)} ms`);
const load = () =>
  os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' / ');

// ---------- the fill ----------

/** Each statement fills one table; the tables' secondary indexes are dropped before and built after. */
const FILL: { table: string; rows: string; sql: string }[] = [
  {
    table: 'partners',
    rows: '100 k',
    sql: `INSERT INTO partners (name, company_name, email, created_at, updated_at)
      SELECT 'Partner ' || n, 'Company ' || n, 'partner' || n || '@example.com',
        now() - (100000 - n) * interval '5 minutes', now()
      FROM generate_series(1, 100000) n`,
  },
  {
    table: 'subscriptions',
    rows: '100 k',
    sql: `INSERT INTO subscriptions (name, partner_id, is_trial, state, database_name, trial_end_date, usage_state, created_at, updated_at)
      SELECT 'Subscription ' || n, n, n % 4 = 0,
        (CASE n % 20 WHEN 0 THEN 'draft' WHEN 1 THEN 'confirmed' WHEN 2 THEN 'deploying' WHEN 3 THEN 'failed'
          WHEN 4 THEN 'suspended' WHEN 5 THEN 'cancelled' ELSE 'running' END)::"SubscriptionState",
        'db_' || n,
        CASE WHEN n % 4 = 0 THEN now() - (100000 - n) * interval '5 minutes' + interval '14 days' END,
        (CASE WHEN n % 200 = 1 THEN 'exceeded' WHEN n % 50 = 0 THEN 'warning' ELSE 'ok' END)::"UsageState",
        now() - (100000 - n) * interval '5 minutes', now()
      FROM generate_series(1, 100000) n`,
  },
  {
    // 2 years, in time order; 4 models, 8 action types, 2 % failures, a few rows still running; a
    // tenth are `echo N > …` lines (q=echo 4242: a rare phrase made of a common word).
    table: 'action_logs',
    rows: '5 M',
    sql: `INSERT INTO action_logs (model_name, rec_id, action_type, status, input_text, output_text, job_id, created_at)
      SELECT m.model_name, m.rec_id, m.action_type::"ActionType",
        (CASE WHEN n % 100000 = 0 THEN 'running' WHEN n % 50 = 1 THEN 'failure' ELSE 'success' END)::"ActionStatus",
        m.input_text,
        CASE WHEN n % 50 = 1 THEN 'error: connection refused (10.0.' || (n % 250) || '.' || (n % 199) || ':22)'
          ELSE 'done in ' || (n % 97) || ' s' END,
        CASE WHEN n % 2 = 0 THEN 'ssh-' || to_hex(n / 4) END,
        now() - interval '730 days' + n * interval '12.6144 seconds'
      FROM generate_series(1, 5000000) n
      CROSS JOIN LATERAL (SELECT
        CASE WHEN n % 10 < 4 THEN 'svc.root.server' WHEN n % 10 < 8 THEN 'svc.subscription'
          WHEN n % 10 = 8 THEN 'svc.postgresql.server' ELSE 'svc.saas.git.repository' END AS model_name,
        CASE WHEN n % 10 < 4 THEN 1 + n % 500 WHEN n % 10 < 8 THEN 1 + (n / 10) % 100000
          WHEN n % 10 = 8 THEN 1 + n % 20 ELSE 1 + n % 200 END AS rec_id,
        (ARRAY['ssh_command','server_action','database','deployment','api_call','ssh_command','database','deployment','database','git'])[1 + n % 10] AS action_type,
        CASE WHEN n % 10 = 3 THEN 'echo ' || (n / 10) % 10000 || ' > /run/odoo@' || (1 + n % 500) || '.ready'
          WHEN n % 10 < 4 THEN 'systemctl restart odoo@' || (1 + n % 500) || ' && journalctl -u odoo -n 20'
          WHEN n % 10 < 8 THEN 'pg_dump -Fc db_' || (1 + (n / 10) % 100000) || ' > /backup/db_' || (1 + (n / 10) % 100000) || '.dump'
          WHEN n % 10 = 8 THEN 'SELECT pg_database_size(datname) FROM pg_database'
          ELSE 'git fetch origin main && git checkout ' || md5(n::text) END AS input_text
      ) m`,
  },
  {
    // 600 k on one busy record (a webhook's target), 400 k over 40 k partners (10 each); 1 year.
    table: 'messages',
    rows: '1 M',
    sql: `INSERT INTO messages (model_name, rec_id, message_type, subtype_xmlid, body, author_name, created_at)
      SELECT CASE WHEN n % 5 < 3 THEN 'svc.subscription' ELSE 'res.partner' END,
        CASE WHEN n % 5 < 3 THEN 1 ELSE 1 + n % 100000 END,
        'notification', 'mail.mt_note', 'Backup of db_' || (n % 1000) || ' finished in ' || (n % 97) || ' s', 'webhook 1',
        now() - interval '365 days' + n * interval '31.536 seconds'
      FROM generate_series(1, 1000000) n`,
  },
  {
    // 14 days (the default retention); half of the calls on one webhook, the rest on 19 others.
    table: 'webhook_calls',
    rows: '10 M',
    sql: `INSERT INTO webhook_calls (webhook_id, called_at, status, duration_ms, source_ip, body_size, error)
      SELECT w.ids[CASE WHEN n % 2 = 0 THEN 1 ELSE 2 + (n / 2) % 19 END],
        now() - interval '14 days' + n * interval '120.96 milliseconds',
        CASE WHEN (n / 2) % 1000 = 7 THEN 500 WHEN (n / 2) % 100 = 3 THEN 400 ELSE 200 END,
        1 + (n % 40) / 10.0, '203.0.113.' || (n % 250), 120 + n % 900,
        CASE WHEN (n / 2) % 1000 = 7 THEN 'Error: db_' || (n % 1000) || ' does not exist' WHEN (n / 2) % 100 = 3 THEN 'Invalid signature' END
      FROM (SELECT array_agg(id ORDER BY id) AS ids FROM webhooks) w, generate_series(1, 10000000) n`,
  },
];

async function fill(db: pg.Client) {
  const t0 = performance.now();
  const servers = await db.query<{ id: number }>(
    `INSERT INTO root_servers (name, ip, state, uuid, updated_at) SELECT 'store-' || n, '127.0.0.1', 'confirmed', gen_random_uuid(), now()
     FROM generate_series(0, 499) n RETURNING id`,
  );
  await db.query(
    `INSERT INTO webhooks (token, model_name, rec_id, updated_at)
     SELECT encode(sha256(('bench-lists-' || n)::bytea), 'hex'), 'svc.subscription', 1, now() FROM generate_series(1, 20) n`,
  );
  const steps = [
    ...FILL,
    {
      table: 'root_server_monitor_logs',
      rows: '17 M',
      sql: monitorSamplesSql(
        servers.rows.map((r) => r.id),
        new Date(),
      ),
    },
  ];
  for (const step of steps) {
    const s = performance.now();
    // Bulk loading: the secondary indexes are built once after the rows are in, not row by row.
    const { rows: indexes } = await db.query<{ name: string; def: string }>(
      `SELECT i.relname AS name, pg_get_indexdef(i.oid) AS def FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
       WHERE x.indrelid = $1::regclass AND NOT x.indisprimary AND NOT x.indisunique`,
      [step.table],
    );
    for (const index of indexes) await db.query(`DROP INDEX "${index.name}"`);
    await db.query(step.sql);
    const inserted = performance.now();
    for (const index of indexes) await db.query(index.def);
    console.log(
      `  ${step.table}: ${step.rows} rows in ${ms(inserted - s)}, ${indexes.length} secondary indexes in ${ms(performance.now() - inserted)}`,
    );
  }
  const vacuum = performance.now();
  await db.query('VACUUM ANALYZE');
  console.log(`  VACUUM ANALYZE: ${ms(performance.now() - vacuum)}; fill: ${ms(performance.now() - t0)} in all`);
}

async function sizes(db: pg.Client) {
  const { rows } = await db.query<{ table: string; rows: string; table_bytes: string; index_bytes: string }>(
    `SELECT c.relname AS table, c.reltuples::int8 AS rows, pg_table_size(c.oid) AS table_bytes, pg_indexes_size(c.oid) AS index_bytes
     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = 'public' AND c.relkind = 'r' AND c.reltuples > 10000 ORDER BY c.reltuples DESC`,
  );
  const gib = (b: string | number) => `${(Number(b) / 2 ** 30).toFixed(2)} GiB`;
  for (const r of rows) {
    console.log(`  ${r.table}: ~${Number(r.rows).toLocaleString('en')} rows, table ${gib(r.table_bytes)} + indexes ${gib(r.index_bytes)}`);
  }
  const { rows: total } = await db.query<{ bytes: string }>('SELECT pg_database_size(current_database()) AS bytes');
  console.log(`  database: ${gib(total[0]!.bytes)}`);
}

// ---------- the API process ----------

function startApi(env: Record<string, string>): ChildProcess {
  return spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: ROOT,
    // Every third-party default on loopback: the bench sends nothing off this machine.
    env: { ...process.env, ...LOOPBACK_DEFAULTS, ...env, SVC_ROLE: 'api', HOST: '127.0.0.1', LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
}

async function waitUntilUp(url: string) {
  for (let i = 0; i < 600; i++) {
    try {
      await fetch(url, { signal: AbortSignal.timeout(1000) });
      return;
    } catch {
      await sleep(100);
    }
  }
  throw new Error(`${url} did not come up`);
}

// ---------- the shapes ----------

interface Shape {
  list: string;
  name: string;
  path: string;
}

/** A cursor `depth` rows into a list (the row found by SQL, the cursor made as the API makes it). */
type DeepPage = (what: { resource: string; sort: string; sql: string; depth: number }) => Promise<string>;

async function shapes(db: pg.Client, deepPage: DeepPage): Promise<Shape[]> {
  /** The page `depth` rows deep of a resource listed by id (its table has the resource's name). */
  const deepById = (resource: string, depth: number) =>
    deepPage({ resource, sort: 'id', sql: `SELECT id FROM ${resource} ORDER BY id OFFSET ${depth - 1} LIMIT 1`, depth });
  const one = async (sql: string) => (await db.query(sql)).rows[0] as Record<string, unknown>;
  const hotHook = (await one('SELECT min(id) AS id FROM webhooks')).id as number;
  const server = (await one("SELECT id FROM root_servers WHERE name = 'store-250'")).id as number;
  const hour = async (table: string, column: string) => {
    const { t } = (await one(`SELECT extract(epoch FROM percentile_disc(0.4) WITHIN GROUP (ORDER BY ${column})) * 1000 AS t FROM
      (SELECT ${column} FROM ${table} TABLESAMPLE SYSTEM (1)) s`)) as { t: number };
    const from = new Date(Math.floor(Number(t) / 3600_000) * 3600_000);
    return `from=${from.toISOString()}&to=${new Date(from.getTime() + 3600_000).toISOString()}`;
  };
  const rowsOf = async (sql: string) => Number((await one(sql)).n);
  const depthIn = async (countSql: string) => Math.min(DEEP, (await rowsOf(countSql)) - 50);

  const logsDepth = await depthIn('SELECT count(*) AS n FROM action_logs');
  const threadDepth = await depthIn("SELECT count(*) AS n FROM messages WHERE model_name = 'svc.subscription' AND rec_id = 1");
  const callsDepth = await depthIn(`SELECT count(*) AS n FROM webhook_calls WHERE webhook_id = ${hotHook}`);
  const last = Number(
    (await one(`SELECT extract(epoch FROM max(created_at)) * 1000 AS t FROM root_server_monitor_logs WHERE root_server_id = ${server}`)).t,
  );
  // The samples end when the fill ran: windows are given, not "the last hour" of now.
  const to = new Date(last + 5000).toISOString();
  const twoDays = `from=${new Date(last - 2 * 86_400_000).toISOString()}&to=${to}`;
  const samplesDepth = await depthIn(`SELECT count(*) AS n FROM root_server_monitor_logs WHERE root_server_id = ${server}`);
  const partnersDepth = await depthIn('SELECT count(*) AS n FROM partners');
  const subscriptionsDepth = await depthIn('SELECT count(*) AS n FROM subscriptions');

  const logs = '/api/v1/action-logs';
  const thread = '/api/v1/subscriptions/1/messages';
  const calls = `/api/v1/webhooks/${hotHook}/calls`;
  const samples = `/api/v1/root-servers/${server}/monitor-logs`;
  const out: Shape[] = [];
  const add = (list: string, name: string, p: string) => out.push({ list, name, path: p });

  add('action-logs', 'first page', `${logs}?limit=50`);
  add(
    'action-logs',
    `${logsDepth.toLocaleString('en')} deep`,
    `${logs}?limit=50&${await deepPage({
      resource: 'action-logs',
      sort: '-id',
      sql: `SELECT id FROM action_logs ORDER BY id DESC OFFSET ${logsDepth - 1} LIMIT 1`,
      depth: logsDepth,
    })}`,
  );
  for (const sort of ['id', '-id', 'created_at', '-created_at']) add('action-logs', `sort=${sort}`, `${logs}?sort=${sort}`);
  add('action-logs', 'q=pg_dump (common)', `${logs}?q=pg_dump`);
  add('action-logs', 'q=db_4242 (rare)', `${logs}?q=db_4242`);
  add('action-logs', 'q=echo 4242 (a common word, 50 rows)', `${logs}?q=echo%204242`);
  add('action-logs', 'q=connection refused (2 %)', `${logs}?q=connection%20refused`);
  add('action-logs', 'model_name', `${logs}?model_name=svc.postgresql.server`);
  add('action-logs', 'model_name + rec_id', `${logs}?model_name=svc.subscription&rec_id=4242`);
  add('action-logs', 'rec_id', `${logs}?rec_id=4242`);
  add('action-logs', 'action_type', `${logs}?action_type=git`);
  add('action-logs', 'status=failure', `${logs}?status=failure`);
  add('action-logs', 'status=running', `${logs}?status=running`);
  add('action-logs', 'job_id', `${logs}?job_id=ssh-${(123456).toString(16)}`);
  add('action-logs', 'from/to (one hour)', `${logs}?${await hour('action_logs', 'created_at')}`);
  add('action-logs', 'from (the last 30 days)', `${logs}?from=${new Date(Date.now() - 30 * 86_400_000).toISOString()}`);

  add('messages', 'first page (600 k thread)', thread);
  add(
    'messages',
    `${threadDepth.toLocaleString('en')} deep`,
    `${thread}?${await deepPage({
      resource: 'subscriptions/messages',
      sort: '-id',
      sql: `SELECT id FROM messages WHERE model_name = 'svc.subscription' AND rec_id = 1 ORDER BY id DESC OFFSET ${threadDepth - 1} LIMIT 1`,
      depth: threadDepth,
    })}`,
  );
  add('messages', 'from/to (one hour)', `${thread}?${await hour('messages', 'created_at')}`);
  add('messages', 'a partner (10 messages)', '/api/v1/partners/44/messages');

  add('webhook calls', 'first page (5 M calls)', calls);
  add(
    'webhook calls',
    `${callsDepth.toLocaleString('en')} deep`,
    `${calls}?${await deepPage({
      resource: 'webhooks/calls',
      sort: '-called_at',
      sql: `SELECT extract(epoch FROM called_at) * 1000 AS t, id FROM webhook_calls WHERE webhook_id = ${hotHook} ORDER BY called_at DESC, id DESC OFFSET ${callsDepth - 1} LIMIT 1`,
      depth: callsDepth,
    })}`,
  );
  add('webhook calls', 'status=500', `${calls}?status=500`);
  add('webhook calls', 'from/to (one hour)', `${calls}?${await hour('webhook_calls', 'called_at')}`);

  add('monitor logs', 'first page (the last hour)', `${samples}?to=${to}`);
  add('monitor logs', 'order=desc', `${samples}?to=${to}&order=desc`);
  add('monitor logs', 'from (2 days)', `${samples}?${twoDays}`);
  add(
    'monitor logs',
    `${samplesDepth.toLocaleString('en')} deep (2 days)`,
    `${samples}?${twoDays}&${await deepPage({
      resource: 'root-servers/monitor-logs',
      sort: 'created_at',
      sql: `SELECT extract(epoch FROM created_at) * 1000 AS t, id FROM root_server_monitor_logs WHERE root_server_id = ${server} ORDER BY created_at, id OFFSET ${samplesDepth - 1} LIMIT 1`,
      depth: samplesDepth,
    })}`,
  );
  add('monitor logs', 'bucket=15m (2 days)', `${samples}?${twoDays}&bucket=15m`);

  add('partners', 'first page', '/api/v1/partners');
  add('partners', `${partnersDepth.toLocaleString('en')} deep`, `/api/v1/partners?${await deepById('partners', partnersDepth)}`);
  add('partners', 'q=Company 42', '/api/v1/partners?q=Company%2042');
  add('partners', 'q=example.com (every row)', '/api/v1/partners?q=example.com');
  for (const sort of ['name', '-name', 'created_at', '-created_at', '-id'])
    add('partners', `sort=${sort}`, `/api/v1/partners?sort=${sort}`);
  add('partners', 'email', '/api/v1/partners?email=partner4242@example.com');

  add('subscriptions', 'first page', '/api/v1/subscriptions');
  add(
    'subscriptions',
    `${subscriptionsDepth.toLocaleString('en')} deep`,
    `/api/v1/subscriptions?${await deepById('subscriptions', subscriptionsDepth)}`,
  );
  add('subscriptions', 'q=Subscription 77', '/api/v1/subscriptions?q=Subscription%2077');
  add('subscriptions', 'q=db_123', '/api/v1/subscriptions?q=db_123');
  for (const sort of ['name', '-name', 'state', '-state', 'trial_end_date', '-trial_end_date', '-created_at', '-id']) {
    add('subscriptions', `sort=${sort}`, `/api/v1/subscriptions?sort=${sort}`);
  }
  add('subscriptions', 'state=failed', '/api/v1/subscriptions?state=failed');
  add('subscriptions', 'partner_id', '/api/v1/subscriptions?partner_id=4242');
  add('subscriptions', 'is_trial', '/api/v1/subscriptions?is_trial=true');
  add('subscriptions', 'usage_state=exceeded', '/api/v1/subscriptions?usage_state=exceeded');
  return out;
}

/** The shape's timings, or the status of its refusal (a shape the build does not offer). */
async function measure(base: string, headers: Record<string, string>, shape: Shape, calls: number) {
  const call = async () => {
    const s = performance.now();
    const res = await fetch(`${base}${shape.path}`, { headers });
    const body = (await res.json()) as { items?: unknown[]; total?: number; total_is_estimate?: boolean; error?: { message: string } };
    return { ms: performance.now() - s, status: res.status, body };
  };
  const first = await call();
  if (first.status !== 200) return { refused: `${first.status} ${first.body.error?.message ?? ''}`.slice(0, 90) };
  const times: number[] = [];
  for (let i = 0; i < calls; i++) times.push((await call()).ms);
  return { times, items: first.body.items?.length ?? 0, total: first.body.total, estimate: first.body.total_is_estimate };
}

async function main() {
  const o = parseArgs();
  const dbName = o.db || `svc_bench_lists_${Date.now().toString(36)}`;
  const url = databaseUrl(dbName);
  const keyFile = path.join(os.tmpdir(), `${dbName}.key`);
  console.log(`bench:lists on ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? '?'}), load average ${load()} at the start`);
  console.log(`database ${dbName}`);
  const db = new pg.Client({ connectionString: url });
  let api: ChildProcess | undefined;
  try {
    const m = performance.now();
    const applied = await applyMigrations(url);
    console.log(`migrations: ${applied.length} applied in ${ms(performance.now() - m)}${applied.length ? ` (${applied.join(', ')})` : ''}`);
    await db.connect();
    if (!o.db) {
      console.log('fill:');
      await fill(db);
    } else {
      await db.query('ANALYZE');
    }
    console.log('size:');
    await sizes(db);

    const prisma = createDb(url, 2);
    const auth = createAuthService({ db: prisma });
    const user = await auth.createUser({ email: `bench-${Date.now()}@svc.test`, group: 'administrator' });
    const { token } = await auth.createToken(user.id, 'bench');
    await prisma.$disconnect();
    const headers = { authorization: `Bearer ${token}` };

    const port = await freePort();
    api = startApi({ DATABASE_URL: url, REDIS_URL, QUEUE_PREFIX: dbName, SVC_MASTER_KEY_FILE: keyFile, PORT: String(port) });
    const base = `http://127.0.0.1:${port}`;
    await waitUntilUp(`${base}/api/v1/partners`);

    // A build with cursors makes them; one without goes by offset.
    const probe = (await (await fetch(`${base}/api/v1/partners?limit=1`, { headers })).json()) as Record<string, unknown>;
    const cursors = 'next_cursor' in probe;
    const lists = cursors ? await import('../src/core/lists.js') : null;
    // Signed as the API signs them: with the key derived from its master key file.
    const secret = lists ? lists.cursorSecret(createSecretBox(prisma, await loadOrCreateMasterKey(keyFile))) : null;
    const encode = lists && secret ? (key: CursorKey, values: unknown[]) => lists.encodeCursor(secret, key, values) : null;
    const deepPage: DeepPage = async ({ resource, sort, sql, depth }) => {
      if (!encode) return `offset=${depth}`;
      const row = (await db.query(sql)).rows[0] as { id: number | string; t?: number };
      return `cursor=${encode({ resource, sort }, row.t !== undefined ? [new Date(Number(row.t)), BigInt(row.id)] : [Number(row.id)])}`;
    };
    console.log(
      `deep pages by ${cursors ? 'cursor' : 'offset (no cursors in this build)'}; ${o.calls} calls per shape after one unmeasured`,
    );
    console.log('\n| list | shape | p50 | p99 | ≤ 50 ms p99 | rows | total |');
    console.log('|---|---|---|---|---|---|---|');
    let met = 0;
    let measured = 0;
    const searches: string[] = [];
    for (const shape of (await shapes(db, deepPage)).filter((s) => !o.only || `${s.list} ${s.name}`.includes(o.only))) {
      const r = await measure(base, headers, shape, o.calls);
      if ('refused' in r) {
        console.log(`| ${shape.list} | ${shape.name} | | | refused: ${r.refused} | | |`);
        continue;
      }
      const p99 = pct(r.times, 99);
      measured++;
      if (shape.name.startsWith('q=')) {
        searches.push(`${p99 <= TARGET_MS ? 'met   ' : 'missed'}  ${shape.list} ${shape.name}: p99 ${ms(p99)} <= ${TARGET_MS} ms`);
      }
      if (p99 <= TARGET_MS) met++;
      const total = `${r.total?.toLocaleString('en') ?? '?'}${r.estimate ? ' (estimate)' : ''}`;
      console.log(
        `| ${shape.list} | ${shape.name} | ${ms(pct(r.times, 50))} | ${ms(p99)} | ${p99 <= TARGET_MS ? 'met' : 'MISSED'} | ${r.items} | ${total} |`,
      );
    }
    console.log(`\n${met} of ${measured} measured shapes met p99 <= ${TARGET_MS} ms; load average ${load()} at the end`);
    // The searches (`q`): a trigram scan each, the costliest shapes.
    if (searches.length > 0) console.log(`\n${searches.join('\n')}`);
  } finally {
    api?.kill('SIGTERM');
    await db.end().catch(() => {});
    const redis = new Redis(REDIS_URL);
    const keys = await redis.keys(`${dbName}:*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
    if (!o.keep) {
      await dropDatabase(dbName);
      await rm(keyFile, { force: true });
    } else {
      console.log(`kept: npm run bench:lists -- --db ${dbName}`);
    }
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
