// Benchmark: what the outbound HTTP client costs on top of a bare fetch (timeout signal, bounded
// read, and the api_call action-log row written to PostgreSQL for every call). Runs against a
// local HTTP server and a throw-away database; prints figures and ratios measured in this run.
// Usage: npm run bench:outbound [-- <calls>]   (DATABASE_URL names the PostgreSQL server)
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { loadConfig } from '../src/core/config.js';
import { applyMigrations } from '../src/core/migrate.js';
import { createDb } from '../src/core/db.js';
import { createOutboundHttp } from '../src/core/outbound-http.js';

const calls = Number(process.argv[2] ?? 1000);
const config = loadConfig();
const benchDb = `svc_bench_outbound_${process.pid}`;
const benchUrl = new URL(config.DATABASE_URL);
benchUrl.pathname = `/${benchDb}`;

async function admin(sql: string) {
  const url = new URL(config.DATABASE_URL);
  url.pathname = '/postgres';
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

async function timed(label: string, concurrency: number, call: () => Promise<unknown>) {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next++ < calls) await call();
    }),
  );
  const ms = performance.now() - started;
  const perSecond = (calls / ms) * 1000;
  console.log(`${label.padEnd(50)} ${(ms / calls).toFixed(3).padStart(8)} ms/call ${perSecond.toFixed(0).padStart(7)} calls/s`);
  return perSecond;
}

const server = createServer((_req, res) => {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ status: 'ok', api_key: 'would-be-redacted' }));
});
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/ping`;

await applyMigrations(benchUrl.toString());
const db = createDb(benchUrl.toString());
try {
  // The stand-in listens on loopback, which the outbound guard refuses unless allowed.
  const http = createOutboundHttp({ db, config: { ...config, OUTBOUND_ALLOW_NETS: ['127.0.0.1/32'] } });
  const target = { model_name: 'svc.saas.backup.server' as const, rec_id: 1 };
  const headers = { 'X-API-Key': 'bench-key' };
  const bare = () => fetch(url, { headers, signal: AbortSignal.timeout(10_000) }).then((r) => r.json());
  const client = () => http.request(target, { url, headers }, { secrets: ['bench-key'], read: (r) => r.okJson() });

  console.log(`${calls} calls per line, local HTTP server, PostgreSQL at ${benchUrl.host}`);
  await timed('warm-up', 4, client);
  const bare1 = await timed('bare fetch, 1 at a time', 1, bare);
  const client1 = await timed('outbound client (+ action-log row), 1 at a time', 1, client);
  const bare20 = await timed('bare fetch, 20 at a time', 20, bare);
  const client20 = await timed('outbound client (+ action-log row), 20 at a time', 20, client);
  console.log(`ratio client/bare throughput: 1 at a time ${(client1 / bare1).toFixed(2)}, 20 at a time ${(client20 / bare20).toFixed(2)}`);
  console.log(`action-log rows written: ${await db.actionLog.count()}`);
} finally {
  await db.$disconnect();
  server.close();
  await admin(`DROP DATABASE IF EXISTS "${benchDb}" WITH (FORCE)`);
}
