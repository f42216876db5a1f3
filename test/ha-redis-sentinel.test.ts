// Redis through Sentinel (docs/high-availability.md) on real engines started here on loopback: a
// primary, its replica and three sentinels (test/helpers/redis-sentinel.ts). Start-up refuses a
// Sentinel set that names no reachable sentinel or a primary it does not know, saying which; the
// primary killed, Sentinel promotes the replica and the same process (API and workers) carries on:
// a job queued after the failover runs; with every sentinel gone, a request that needs Redis is
// answered 503 with Retry-After, and the process recovers once they are back. A connection that
// ioredis gives up on ("end") without svc closing it is connected again.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkRedis } from '../src/core/reachability.js';
import { createRedis } from '../src/core/redis.js';
import { settingsJobs } from '../src/settings/settings-job-specs.js';
import { request, waitForJob } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';
import { redisCommand, SENTINEL_NAME, type SentinelSet, startSentinelSet } from './helpers/redis-sentinel.js';
import { freePort } from './helpers/sshd.js';

let set: SentinelSet;
beforeAll(async () => {
  set = await startSentinelSet();
});
afterAll(async () => {
  await set?.stop();
});
const t = useTestApp({ workers: true, env: () => set.env });

const sentinelsOf = (env: { REDIS_SENTINELS: string }) =>
  env.REDIS_SENTINELS.split(',').map((s) => ({ host: '127.0.0.1', port: Number(s.split(':')[1]) }));

/** Queues a job (again until Redis takes it: in a failover it may refuse for a moment) and waits for it to finish. */
async function jobRuns(): Promise<void> {
  let id: string | undefined;
  await expect
    .poll(
      async () => {
        id = await t.ctx.queues.enqueue(settingsJobs.rotate_encryption_key, { user_id: t.as.admin.userId }).catch(() => undefined);
        return id;
      },
      { timeout: 30_000, interval: 100 },
    )
    .toBeDefined();
  expect(await waitForJob(t.app, t.as.user, id!, 30_000)).toMatchObject({ state: 'completed' });
}

describe('start-up through Sentinel', () => {
  it('no reachable sentinel, or a primary name no sentinel knows: start-up stops saying which', async () => {
    const nobody = await freePort();
    await expect(
      checkRedis({
        REDIS_URL: 'redis://127.0.0.1:1',
        REDIS_SENTINELS: [{ host: '127.0.0.1', port: nobody }],
        REDIS_SENTINEL_NAME: SENTINEL_NAME,
      }),
    ).rejects.toThrow(new RegExp(`^No sentinel of REDIS_SENTINELS answers \\(127\\.0\\.0\\.1:${nobody}: .*ECONNREFUSED`));
    await expect(
      checkRedis({ REDIS_URL: 'redis://127.0.0.1:1', REDIS_SENTINELS: sentinelsOf(set.env), REDIS_SENTINEL_NAME: 'nosuchprimary' }),
    ).rejects.toThrow(/knows a primary named "nosuchprimary" \(REDIS_SENTINEL_NAME\)$/);
    await expect(
      checkRedis({ REDIS_URL: 'redis://127.0.0.1:1', REDIS_SENTINELS: sentinelsOf(set.env), REDIS_SENTINEL_NAME: SENTINEL_NAME }),
    ).resolves.toBeUndefined();
  });
});

describe('a Sentinel failover', () => {
  it('the primary killed: the replica is promoted and the same process queues and runs jobs again', async () => {
    await jobRuns();
    const before = await set.primary();
    // Every write so far is on the replica before the primary dies (replication is asynchronous).
    // (WAIT's own bound under the request connection's 3 s command timeout, asked again until it holds.)
    await expect.poll(() => t.ctx.redis.call('WAIT', 1, 1_000), { timeout: 30_000, interval: 100 }).toBe(1);
    const killedAt = Date.now();
    await set.killPrimary();
    const after = await set.waitForNewPrimary(before);
    expect(after).not.toBe(before);
    await jobRuns();
    console.log(`Sentinel failover: a job queued and run ${((Date.now() - killedAt) / 1000).toFixed(1)} s after the primary was killed`);
  }, 90_000);

  it('every sentinel gone and the connection lost: a request that needs Redis is answered 503; back when they are', async () => {
    const job = await t.ctx.queues.enqueue(settingsJobs.rotate_encryption_key, { user_id: t.as.admin.userId });
    const getJob = () => request(t.app, t.as.user, { method: 'GET', url: `/api/v1/jobs/${job}` });
    expect((await getJob()).statusCode).toBe(200);
    await set.killSentinels();
    try {
      // The primary drops every client: reconnecting needs a sentinel to name it, and none answers.
      await redisCommand(set.primaryPort(), 'CLIENT KILL TYPE normal');
      const gap = await getJob();
      expect(gap.statusCode, gap.body).toBe(503);
      expect(gap.headers['retry-after']).toBe('5');
      expect(gap.json().error.code).toBe('unavailable');
    } finally {
      await set.startSentinels();
    }
    await expect.poll(async () => (await getJob()).statusCode, { timeout: 30_000, interval: 200 }).toBe(200);
    await jobRuns();
  }, 90_000);

  it('a connection ioredis gave up on without svc closing it is connected again; one svc closed stays closed', async () => {
    const redis = createRedis(t.ctx.config);
    try {
      expect(await redis.ping()).toBe('PONG');
      const name = `ha-end-${Date.now()}`;
      await redis.client('SETNAME', name);
      // ioredis ends a connection for good when a reconnection is not wanted: as it does when a
      // connect attempt is cut during the sentinel search.
      const retry = redis.options.retryStrategy;
      redis.options.retryStrategy = () => null as unknown as number;
      const ended = new Promise<void>((resolve) => redis.once('end', () => resolve()));
      const list = (await t.ctx.redis.client('LIST')) as string;
      const id = /id=(\d+)/.exec(list.split('\n').find((l) => l.includes(`name=${name}`))!)![1]!;
      await t.ctx.redis.client('KILL', 'ID', id);
      await ended;
      redis.options.retryStrategy = retry;
      expect(redis.status).toBe('end');
      await expect.poll(() => redis.status, { timeout: 10_000, interval: 100 }).toBe('ready');
      expect(await redis.ping()).toBe('PONG');
    } finally {
      redis.disconnect();
    }
    await new Promise((r) => setTimeout(r, 1_500));
    expect(redis.status).toBe('end');
  });
});
