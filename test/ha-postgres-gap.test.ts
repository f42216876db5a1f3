// PostgreSQL away for a moment (docs/high-availability.md), without a replica: the app's database
// address is a TCP relay in front of the test database that the test cuts (every connection
// dropped, new ones refused) and restores, as a failover behind a proxy looks to svc. In the gap
// the API answers 503 with Retry-After (never 500) and the webhook endpoint 503 with Retry-After
// (never 200 for a call not stored); afterwards both work again in the same process, and the
// caller's retry is stored once. A call whose statement was cut off mid-way answers 503 and leaves
// nothing behind. A job that may run twice, met by the gap, is put off and runs once the
// database is back. (The full failover, with a streaming replica promoted behind HAProxy: bench:ha.)
import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import pg from 'pg';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../src/app.js';
import { type AppContext, createContext } from '../src/context.js';
import { settingsJobs } from '../src/settings/settings-job-specs.js';
import { startWorkers } from '../src/worker.js';
import { request } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';
import { databaseUrl } from './helpers/pg.js';
import { startTcpProxy, type TcpProxy } from './helpers/tcp-proxy.js';

const t = useTestApp();
let proxy: TcpProxy;
let ctx: AppContext;
let app: FastifyInstance;
let base: string;
let hook: { token: string; rec_id: number };

beforeAll(async () => {
  proxy = await startTcpProxy({ host: '127.0.0.1', port: Number(new URL(databaseUrl('x')).port || 5432) });
  // The same database, reached through the relay: this app is the one that sees the gap.
  const url = new URL(t.ctx.config.DATABASE_URL);
  url.port = String(proxy.port);
  ctx = await createContext({ ...t.ctx.config, DATABASE_URL: url.toString() }, pino({ level: 'silent' }));
  app = await buildApp(ctx);
  base = await app.listen({ port: 0, host: '127.0.0.1' });
  const partner = await t.ctx.db.partner.create({ data: { name: 'Gap Co', email: 'gap@example.com' } });
  const token = randomBytes(32).toString('hex');
  await t.ctx.db.webhook.create({ data: { token, model_name: 'res.partner', rec_id: partner.id, message_type: 'notification' } });
  hook = { token, rec_id: partner.id };
});
afterAll(async () => {
  proxy?.restore();
  await app?.close();
  await ctx?.close();
  await proxy?.close();
});

async function call(message: string) {
  const res = await fetch(`${base}/svc/webhook/${hook.token}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ message }),
    signal: AbortSignal.timeout(20_000),
  });
  return { status: res.status, retryAfter: res.headers.get('retry-after'), body: await res.json() };
}

const stored = (body: string) => t.ctx.db.message.count({ where: { model_name: 'res.partner', rec_id: hook.rec_id, body } });

describe('PostgreSQL away behind its address', () => {
  it('the API answers 503 with Retry-After in the gap, and 200 again afterwards without a restart', async () => {
    const list = () => request(app, t.as.user, { method: 'GET', url: '/api/v1/partners' });
    expect((await list()).statusCode).toBe(200);
    proxy.cut();
    const gap = await list();
    expect(gap.statusCode, gap.body).toBe(503);
    expect(gap.headers['retry-after']).toBe('5');
    expect(gap.json().error.code).toBe('unavailable');
    proxy.restore();
    await expect.poll(async () => (await list()).statusCode, { timeout: 15_000, interval: 200 }).toBe(200);
  });

  it('the webhook endpoint answers 503 with Retry-After for a call it could not store; the retry is stored once', async () => {
    expect((await call('before the gap')).status).toBe(200);
    proxy.cut();
    const gap = await call('in the gap');
    expect(gap).toEqual({ status: 503, retryAfter: '5', body: { error: 'Service unavailable: send the call again later' } });
    expect(await stored('in the gap')).toBe(0);
    proxy.restore();
    // The caller retries (as Retry-After asks) until it is answered 200.
    await expect.poll(async () => (await call('in the gap')).status, { timeout: 15_000, interval: 500 }).toBe(200);
    expect(await stored('in the gap')).toBe(1);
  });

  it('a call whose statement was cut off mid-way answers 503 and leaves nothing behind; its retry is stored once', async () => {
    // The batch's INSERT waits on a lock held here; its connection is then killed under it.
    const locker = new pg.Client({ connectionString: t.ctx.config.DATABASE_URL });
    await locker.connect();
    try {
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE messages IN ACCESS EXCLUSIVE MODE');
      const pending = call('cut mid-way');
      const waiting = async () =>
        (
          await t.ctx.db.$queryRaw<{ n: number }[]>`SELECT count(*)::int AS n FROM pg_stat_activity
            WHERE application_name = 'svc-webhooks' AND wait_event_type = 'Lock'`
        )[0]!.n;
      await expect.poll(waiting, { timeout: 10_000, interval: 50 }).toBeGreaterThan(0);
      proxy.cut();
      const answer = await pending;
      expect(answer.status).toBe(503);
      expect(answer.retryAfter).toBe('5');
      await locker.query('ROLLBACK');
      proxy.restore();
      expect(await stored('cut mid-way')).toBe(0);
      await expect.poll(async () => (await call('cut mid-way')).status, { timeout: 15_000, interval: 500 }).toBe(200);
      expect(await stored('cut mid-way')).toBe(1);
    } finally {
      await locker.end();
    }
  });

  it('a job that may run again, met by the gap, is put off and runs once the database is back (same process)', async () => {
    const workers = await startWorkers(ctx);
    try {
      proxy.cut();
      const id = await ctx.queues.enqueue(settingsJobs.rotate_encryption_key, { user_id: t.as.admin.userId });
      const job = async () => (await ctx.queues.find(id, ['maintenance']))!;
      // It ran into the gap and waits to be run again (not failed).
      await expect.poll(async () => (await job()).attemptsStarted, { timeout: 15_000, interval: 100 }).toBeGreaterThan(0);
      await expect.poll(async () => (await job()).getState(), { timeout: 15_000, interval: 100 }).toBe('delayed');
      proxy.restore();
      await expect.poll(async () => (await job()).getState(), { timeout: 30_000, interval: 200 }).toBe('completed');
    } finally {
      proxy.restore();
      await workers.close();
    }
  }, 60_000);
});
