// A real PostgreSQL failover under webhook load (docs/high-availability.md): a private primary with
// a synchronous streaming replica (pg_basebackup -R) behind HAProxy, whose health check passes only
// on the server that is not in recovery (test/helpers/pg-failover.ts). The app and its workers run
// in this process with DATABASE_URL on HAProxy. The primary is killed (pg_ctl -m immediate) and the
// replica promoted: every call is answered 200 or 503 with Retry-After (never 500, never a 200 for
// a call not stored), every call answered 200 is on the promoted server, writes and jobs resume in
// the same process. The time from the proxy's switch to the first write is printed.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import pg from 'pg';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/core/config.js';
import { applyMigrations } from '../src/core/migrate.js';
import { type AppContext, createContext } from '../src/context.js';
import { settingsJobs } from '../src/settings/settings-job-specs.js';
import { startWorkers, type Workers } from '../src/worker.js';
import { callers, request, waitForJob } from './helpers/api.js';
import { LOOPBACK_DEFAULTS } from './helpers/loopback.js';
import { type PgFailover, startPgFailover } from './helpers/pg-failover.js';
import { REDIS_URL } from './helpers/pg.js';

let set: PgFailover;
let ctx: AppContext;
let app: FastifyInstance;
let workers: Workers;
let base: string;
let dir: string;
let as: Awaited<ReturnType<typeof callers>>;
let token: string;
let recId: number;

beforeAll(async () => {
  set = await startPgFailover('svc');
  await applyMigrations(set.url);
  dir = mkdtempSync(path.join(tmpdir(), 'svc-ha-pg-'));
  const config = loadConfig({
    DATABASE_URL: set.url,
    REDIS_URL,
    QUEUE_PREFIX: `ha-pg-${Date.now().toString(36)}`,
    SVC_MASTER_KEY_FILE: path.join(dir, 'master.key'),
    OUTBOUND_ALLOW_NETS: '127.0.0.0/8,::1/128',
    ...LOOPBACK_DEFAULTS,
  });
  ctx = await createContext(config, pino({ level: 'silent' }));
  app = await buildApp(ctx);
  base = await app.listen({ port: 0, host: '127.0.0.1' });
  workers = await startWorkers(ctx);
  as = await callers(ctx);
  const partner = await ctx.db.partner.create({ data: { name: 'Failover Co', email: 'failover@example.com' } });
  recId = partner.id;
  token = 'fa'.repeat(32);
  await ctx.db.webhook.create({ data: { token, model_name: 'res.partner', rec_id: recId, message_type: 'notification' } });
}, 180_000);

afterAll(async () => {
  await workers?.close();
  await app?.close();
  if (ctx) {
    const keys = await ctx.redis.keys(`${ctx.config.QUEUE_PREFIX}:*`);
    if (keys.length > 0) await ctx.redis.del(...keys);
    await ctx.close();
  }
  await set?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('the PostgreSQL primary killed and its replica promoted behind HAProxy', () => {
  it('every call is answered 200 or 503 + Retry-After; every 200 is on the new primary; writes and jobs resume without a restart', async () => {
    const answers: { status: number; retryAfter: string | null; at: number }[] = [];
    const acked: string[] = [];
    let loading = true;
    const load = Promise.all(
      Array.from({ length: 4 }, async (_, c) => {
        for (let n = 0; loading; n++) {
          const body = `c${c}-${n}`;
          for (;;) {
            const res = await fetch(`${base}/svc/webhook/${token}`, {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: JSON.stringify({ message: body }),
              signal: AbortSignal.timeout(30_000),
            });
            await res.arrayBuffer();
            answers.push({ status: res.status, retryAfter: res.headers.get('retry-after'), at: Date.now() });
            if (res.status === 200) {
              acked.push(body);
              break;
            }
            if (!loading) break;
            await new Promise((r) => setTimeout(r, 100));
          }
          await new Promise((r) => setTimeout(r, 20));
        }
      }),
    );
    await expect.poll(() => acked.length, { timeout: 20_000 }).toBeGreaterThan(20);

    set.kill(set.primary);
    // An API read in the gap: 503 with Retry-After (HAProxy has no primary to send it to).
    const gap = await request(app, as.user, { method: 'GET', url: '/api/v1/partners' });
    expect(gap.statusCode, gap.body).toBe(503);
    expect(gap.headers['retry-after']).toBe('5');
    await set.promote(set.replica);
    await expect.poll(async () => (await set.servedBy())?.name, { timeout: 30_000, interval: 100 }).toBe('b');
    const switchedAt = Date.now();
    const ackedBefore = acked.length;
    await expect.poll(() => acked.length, { timeout: 30_000, interval: 100 }).toBeGreaterThan(ackedBefore + 20);
    const firstWrite = answers.find((a) => a.at > switchedAt && a.status === 200)!.at;
    console.log(`PostgreSQL failover: first webhook call stored ${((firstWrite - switchedAt) / 1000).toFixed(1)} s after HAProxy switched`);
    loading = false;
    await load;

    const statuses = new Set(answers.map((a) => a.status));
    expect([...statuses].filter((s) => s !== 200 && s !== 503)).toEqual([]);
    expect(answers.filter((a) => a.status === 503).every((a) => a.retryAfter === '5')).toBe(true);
    expect(answers.some((a) => a.status === 503)).toBe(true);

    // Read on the promoted server itself: every call answered 200 is there.
    const direct = new pg.Client({ connectionString: set.directUrl(set.replica) });
    await direct.connect();
    try {
      const { rows } = await direct.query<{ body: string }>(`SELECT body FROM messages WHERE model_name = 'res.partner' AND rec_id = $1`, [
        recId,
      ]);
      const stored = new Set(rows.map((r) => r.body));
      expect(acked.filter((b) => !stored.has(b))).toEqual([]);
    } finally {
      await direct.end();
    }

    // The API and the queues work again in the same process.
    expect((await request(app, as.user, { method: 'GET', url: '/api/v1/partners' })).statusCode).toBe(200);
    const job = await ctx.queues.enqueue(settingsJobs.rotate_encryption_key, { user_id: as.admin.userId });
    expect(await waitForJob(app, as.user, job, 30_000)).toMatchObject({ state: 'completed' });
  }, 120_000);
});
