// A webhook batch whose COMMIT was sent and whose answer was lost (docs/high-availability.md, "A
// call whose COMMIT's answer was lost"), on a real PostgreSQL behind a TCP relay that breaks right
// at the COMMIT: either it forwards the COMMIT and drops the server's answer (the transaction
// committed), or it drops the COMMIT itself (the server aborts it); the relay then stays cut for a
// moment, as in a failover. The endpoint finds out which on a fresh connection once the database
// answers again: committed → 200 and the message stored once; not committed → 503 + Retry-After
// and the caller's retry stored once; database still away at the bound → 503 (the one case left
// at least once). The same for a call that runs a trigger_action (its Prisma transaction, found by
// its settlement record): committed → 200, run once; not committed → 503 and the retry runs it once;
// still away at the bound → 503, and the retry of the same delivery runs nothing.
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../src/app.js';
import { type AppContext, createContext } from '../src/context.js';
import { useTestApp } from './helpers/app.js';
import { databaseUrl } from './helpers/pg.js';
import { type CommitBreak, startTcpProxy, type TcpProxy } from './helpers/tcp-proxy.js';

const t = useTestApp();
let proxy: TcpProxy;
let ctx: AppContext;
let app: FastifyInstance;
let base: string;
let hook: { token: string; rec_id: number };
let partnerId: number;

beforeAll(async () => {
  proxy = await startTcpProxy({ host: '127.0.0.1', port: Number(new URL(databaseUrl('x')).port || 5432) });
  const url = new URL(t.ctx.config.DATABASE_URL);
  url.port = String(proxy.port);
  // Prisma's connections carry this name (the endpoint's own pool names itself svc-webhooks first).
  url.searchParams.set('fallback_application_name', 'svc-prisma');
  ctx = await createContext({ ...t.ctx.config, DATABASE_URL: url.toString() }, pino({ level: 'silent' }));
  app = await buildApp(ctx);
  base = await app.listen({ port: 0, host: '127.0.0.1' });
  const partner = await t.ctx.db.partner.create({ data: { name: 'Commit Co', email: 'commit@example.com' } });
  const token = randomBytes(32).toString('hex');
  await t.ctx.db.webhook.create({ data: { token, model_name: 'res.partner', rec_id: partner.id, message_type: 'notification' } });
  hook = { token, rec_id: partner.id };
  partnerId = partner.id;
});
afterEach(() => proxy.restore());
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
    signal: AbortSignal.timeout(30_000),
  });
  return { status: res.status, retryAfter: res.headers.get('retry-after'), body: await res.json() };
}

const stored = (body: string) => t.ctx.db.message.count({ where: { model_name: 'res.partner', rec_id: hook.rec_id, body } });

/** Sends `message` with the relay armed to break at its batch's COMMIT; the database comes back `awayMs` later (never: null). */
async function callBrokenAtCommit(message: string, how: CommitBreak, awayMs: number | null) {
  expect((await call(`warm-up before ${message}`)).status).toBe(200);
  const broke = proxy.breakAtCommit('svc-webhooks', how);
  const answer = call(message);
  await broke;
  if (awayMs !== null) {
    await sleep(awayMs);
    proxy.restore();
  }
  return answer;
}

describe('a webhook batch whose COMMIT was sent when the connection broke', () => {
  it('committed (the answer lost): once the database answers again the call is answered 200, stored once', async () => {
    const answer = await callBrokenAtCommit('committed, answer lost', 'answer-lost', 1_000);
    expect(answer).toEqual({ status: 200, retryAfter: null, body: {} });
    expect(await stored('committed, answer lost')).toBe(1);
  });

  it('not committed (the COMMIT never arrived): 503 + Retry-After, and the retry is stored once', async () => {
    const answer = await callBrokenAtCommit('never committed', 'never-arrives', 1_000);
    expect(answer).toEqual({ status: 503, retryAfter: '5', body: { error: 'Service unavailable: send the call again later' } });
    expect(await stored('never committed')).toBe(0);
    await expect.poll(async () => (await call('never committed')).status, { timeout: 15_000, interval: 500 }).toBe(200);
    expect(await stored('never committed')).toBe(1);
  });

  it('the COMMIT still on its way (the old backend holds the transaction): that backend is ended first, so the COMMIT arriving later commits nothing; 503, the retry stored once', async () => {
    const answer = await callBrokenAtCommit('commit held back', 'held', 1_000);
    expect(answer.status).toBe(503);
    // The server connection that held the transaction was ended by the check, not left to commit later.
    await expect.poll(() => proxy.holdsCommit(), { timeout: 5_000, interval: 50 }).toBe(false);
    proxy.releaseHeldCommit();
    expect(await stored('commit held back')).toBe(0);
    await expect.poll(async () => (await call('commit held back')).status, { timeout: 15_000, interval: 500 }).toBe(200);
    expect(await stored('commit held back')).toBe(1);
  });

  it('the database still away at the bound: 503 (the call was stored; its retry would store it again)', async () => {
    const answer = await callBrokenAtCommit('unknown at the bound', 'answer-lost', null);
    expect(answer.status).toBe(503);
    expect(answer.retryAfter).toBe('5');
    proxy.restore();
    expect(await stored('unknown at the bound')).toBe(1);
  });
});

describe('a trigger_action call whose COMMIT was sent when the connection broke', () => {
  /** A draft subscription and a webhook that confirms it, with a message. */
  async function confirmingHook() {
    const sub = await t.ctx.db.subscription.create({ data: { name: `Commit ${randomBytes(4).toString('hex')}`, partner_id: partnerId } });
    const token = randomBytes(32).toString('hex');
    await t.ctx.db.webhook.create({ data: { token, model_name: 'svc.subscription', rec_id: sub.id, trigger_action: 'action_confirm' } });
    return { sub, token };
  }
  const fire = async (token: string, delivery: string) => {
    const res = await fetch(`${base}/svc/webhook/${token}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': delivery },
      body: JSON.stringify({ message: 'Paid' }),
      signal: AbortSignal.timeout(30_000),
    });
    return { status: res.status, retryAfter: res.headers.get('retry-after'), body: await res.json() };
  };
  const outcome = async (id: number) => ({
    state: (await t.ctx.db.subscription.findUniqueOrThrow({ where: { id } })).state,
    messages: await t.ctx.db.message.count({ where: { model_name: 'svc.subscription', rec_id: id, body: 'Paid' } }),
  });
  /** Fires with the relay armed to break at the next COMMIT of a Prisma connection; the database comes back `awayMs` later (never: null). */
  async function fireBrokenAtCommit(token: string, delivery: string, how: CommitBreak, awayMs: number | null) {
    expect((await call(`warm-up before ${delivery}`)).status).toBe(200);
    const broke = proxy.breakAtCommit('svc-prisma', how);
    const answer = fire(token, delivery);
    await broke;
    if (awayMs !== null) {
      await sleep(awayMs);
      proxy.restore();
    }
    return answer;
  }

  it('committed (the answer lost): once the database answers again the call is answered 200; the method ran once', async () => {
    const { sub, token } = await confirmingHook();
    const answer = await fireBrokenAtCommit(token, 'trigger-committed', 'answer-lost', 1_000);
    expect(answer).toEqual({ status: 200, retryAfter: null, body: {} });
    expect(await outcome(sub.id)).toEqual({ state: 'confirmed', messages: 1 });
  });

  it('not committed (the COMMIT never arrived): 503, and the retry of the delivery runs it once', async () => {
    const { sub, token } = await confirmingHook();
    const answer = await fireBrokenAtCommit(token, 'trigger-never', 'never-arrives', 1_000);
    expect(answer).toEqual({ status: 503, retryAfter: '5', body: { error: 'Service unavailable: send the call again later' } });
    expect(await outcome(sub.id)).toEqual({ state: 'draft', messages: 0 });
    await expect.poll(async () => (await fire(token, 'trigger-never')).status, { timeout: 15_000, interval: 500 }).toBe(200);
    expect(await outcome(sub.id)).toEqual({ state: 'confirmed', messages: 1 });
  });

  it('the COMMIT still on its way: the backend holding the transaction is ended first; 503, and the retry runs it once', async () => {
    const { sub, token } = await confirmingHook();
    const answer = await fireBrokenAtCommit(token, 'trigger-held', 'held', 1_000);
    expect(answer.status).toBe(503);
    await expect.poll(() => proxy.holdsCommit(), { timeout: 5_000, interval: 50 }).toBe(false);
    proxy.releaseHeldCommit();
    expect(await outcome(sub.id)).toEqual({ state: 'draft', messages: 0 });
    await expect.poll(async () => (await fire(token, 'trigger-held')).status, { timeout: 15_000, interval: 500 }).toBe(200);
    expect(await outcome(sub.id)).toEqual({ state: 'confirmed', messages: 1 });
  });

  it('the database still away at the bound: 503; it had committed, and the retry of the same delivery runs nothing (200)', async () => {
    const { sub, token } = await confirmingHook();
    const answer = await fireBrokenAtCommit(token, 'trigger-unknown', 'answer-lost', null);
    expect(answer.status).toBe(503);
    proxy.restore();
    expect(await outcome(sub.id)).toEqual({ state: 'confirmed', messages: 1 });
    await expect.poll(async () => (await fire(token, 'trigger-unknown')).status, { timeout: 15_000, interval: 500 }).toBe(200);
    expect(await outcome(sub.id)).toEqual({ state: 'confirmed', messages: 1 });
  });
});
