// Real Redis + BullMQ workers: job state, progress and result at GET /api/v1/jobs/{id}, failed jobs
// keeping their error, deduplication, and graceful shutdown letting a running job finish.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../src/app.js';
import { createJobHandlers, startWorkers } from '../src/worker.js';
import { createTestContext, type TestContext } from './helpers/context.js';
import { createCaller, request, waitForJob, type Caller } from './helpers/api.js';

let ctx: TestContext;
let app: FastifyInstance;
let admin: Caller;
let user: Caller;

beforeAll(async () => {
  ctx = await createTestContext();
  app = await buildApp(ctx);
  admin = await createCaller(ctx, 'administrator');
  user = await createCaller(ctx, 'user');
});
afterAll(async () => {
  await app.close();
  await ctx.cleanup();
});

describe('GET /api/v1/jobs/{id}', () => {
  it('shows a waiting job, then its completion with progress and result', async () => {
    await ctx.db.$executeRaw`INSERT INTO postgresql_servers (ip, password, updated_at) VALUES ('1.1.1.1', ${await ctx.box.encrypt('pw')}, now())`;
    const jobId = await ctx.queues.enqueue('rotate_encryption_key', { user_id: admin.userId });
    const waiting = await request(app, user, { method: 'GET', url: `/api/v1/jobs/${jobId}` });
    expect(waiting.statusCode).toBe(200);
    expect(waiting.json()).toMatchObject({ id: jobId, queue: 'maintenance', name: 'rotate_encryption_key', state: 'waiting', finished_at: null });

    const workers = await startWorkers(ctx);
    try {
      const done = await waitForJob(app, user, jobId);
      expect(done).toMatchObject({ state: 'completed', progress: { reencrypted: 1 }, error: null });
      expect(done.result).toMatchObject({ reencrypted: 1 });
      expect(Date.parse(done.finished_at)).not.toBeNaN();
    } finally {
      await workers.close();
    }
  });

  it('a failed job keeps its error', async () => {
    // A ciphertext from another master key: the rotation cannot read it and must fail visibly.
    await ctx.db.$executeRaw`INSERT INTO postgresql_servers (ip, password, updated_at) VALUES ('2.2.2.2', 'v999:AAAA', now())`;
    const workers = await startWorkers(ctx);
    try {
      const jobId = await ctx.queues.enqueue('rotate_encryption_key', { user_id: null }, { attempts: 1 });
      const failed = await waitForJob(app, user, jobId);
      expect(failed.state).toBe('failed');
      expect(failed.error).toMatch(/Encryption key v999 is missing/);
    } finally {
      await workers.close();
      await ctx.db.$executeRaw`DELETE FROM postgresql_servers WHERE password = 'v999:AAAA'`;
    }
  });

  it('404 for an unknown job id', async () => {
    for (const id of ['maintenance-999999', 'nope-1', 'garbage']) {
      const res = await request(app, user, { method: 'GET', url: `/api/v1/jobs/${id}` });
      expect(res.statusCode).toBe(404);
    }
  });

  it('a deduplicated job returns the id of the one already waiting', async () => {
    const a = await ctx.queues.enqueue('rotate_encryption_key', { user_id: null });
    const b = await ctx.queues.enqueue('rotate_encryption_key', { user_id: null });
    expect(b).toBe(a);
    await (await ctx.queues.find(a))!.remove();
  });
});

describe('graceful shutdown', () => {
  it('close() waits for the running job to finish', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let started!: () => void;
    const running = new Promise<void>((r) => (started = r));
    const real = createJobHandlers(ctx);
    const workers = await startWorkers(ctx, {
      ...real,
      async rotate_encryption_key(payload, job) {
        started();
        await gate;
        return real.rotate_encryption_key(payload, job);
      },
    });
    const jobId = await ctx.queues.enqueue('rotate_encryption_key', { user_id: null });
    await running;
    let closed = false;
    const closing = workers.close().then(() => (closed = true));
    await new Promise((r) => setTimeout(r, 200));
    expect(closed).toBe(false); // still running: close() is waiting for it
    release();
    await closing;
    const job = (await request(app, user, { method: 'GET', url: `/api/v1/jobs/${jobId}` })).json();
    expect(job.state).toBe('completed');
  });
});
