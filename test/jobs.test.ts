// Real Redis + BullMQ workers: job state, progress and result at GET /api/v1/jobs/{id}, failed jobs
// keeping their error, deduplication, and graceful shutdown letting a running job finish.
import { describe, expect, it } from 'vitest';
import { startWorkers } from '../src/worker.js';
import { settingsJobs } from '../src/settings/settings-job-specs.js';
import { withJobHandler } from './helpers/features.js';
import { findJob, request, waitForJob } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';
import { webhookJobs } from '../src/webhooks/webhook-job-specs.js';
import { monitorJobs } from '../src/monitoring/monitor-job-specs.js';
import { composeFeatures } from '../src/features.js';
import { createJobService } from '../src/jobs/job-service.js';
import { subscriptionJobs } from '../src/subscriptions/subscription-job-specs.js';

const t = useTestApp();

describe('GET /api/v1/jobs/{id}', () => {
  it('shows a waiting job, then its completion with progress and result', async () => {
    await t.ctx.db
      .$executeRaw`INSERT INTO postgresql_servers (ip, password, updated_at) VALUES ('1.1.1.1', ${await t.ctx.secretBox.encrypt('pw')}, now())`;
    const jobId = await t.ctx.queues.enqueue(settingsJobs.rotate_encryption_key, { user_id: t.as.admin.userId });
    const waiting = await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/jobs/${jobId}` });
    expect(waiting.statusCode).toBe(200);
    expect(waiting.json()).toMatchObject({
      id: jobId,
      queue: 'maintenance',
      name: 'rotate_encryption_key',
      state: 'waiting',
      progress: null, // nothing reported yet
      finished_at: null,
    });

    const workers = await startWorkers(t.ctx);
    try {
      const done = await waitForJob(t.app, t.as.user, jobId);
      expect(done).toMatchObject({ state: 'completed', progress: { reencrypted: 1 }, error: null });
      expect(done.result).toMatchObject({ reencrypted: 1 });
      expect(Date.parse(done.finished_at)).not.toBeNaN();
    } finally {
      await workers.close();
    }
  });

  it('a failed job keeps its error', async () => {
    // A ciphertext from another master key: the rotation cannot read it and must fail visibly.
    await t.ctx.db.$executeRaw`INSERT INTO postgresql_servers (ip, password, updated_at) VALUES ('2.2.2.2', 'v999:AAAA', now())`;
    const workers = await startWorkers(t.ctx);
    try {
      const jobId = await t.ctx.queues.enqueue(settingsJobs.rotate_encryption_key, { user_id: null }, { attempts: 1 });
      const failed = await waitForJob(t.app, t.as.user, jobId);
      expect(failed.state).toBe('failed');
      expect(failed.error).toMatch(/Encryption key v999 is missing/);
    } finally {
      await workers.close();
      await t.ctx.db.$executeRaw`DELETE FROM postgresql_servers WHERE password = 'v999:AAAA'`;
    }
  });

  it('404 for an unknown job id, 400 for something that is no job id', async () => {
    for (const id of ['maintenance-999999', 'nope-1']) {
      const res = await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/jobs/${id}` });
      expect(res.statusCode).toBe(404);
    }
    // Not the shape of a job id at all: bad input.
    expect((await request(t.app, t.as.user, { method: 'GET', url: '/api/v1/jobs/garbage' })).statusCode).toBe(400);
  });

  it('a deduplicated job returns the id of the one already waiting', async () => {
    const a = await t.ctx.queues.enqueue(settingsJobs.rotate_encryption_key, { user_id: null });
    const b = await t.ctx.queues.enqueue(settingsJobs.rotate_encryption_key, { user_id: null });
    expect(b).toBe(a);
    await (await findJob(t.ctx, a))!.remove();
  });
});

describe('deduplication keys', () => {
  it('a restore of another backup asked while one waits is its own job; the same backup again is the same job', async () => {
    const restore = (backup_id: string) =>
      t.ctx.queues.enqueue(subscriptionJobs.restore_subscription, { subscription_id: 424242, backup_id, user_id: null });
    const first = await restore('b-1');
    expect(await restore('b-1')).toBe(first);
    expect(await restore('b-2')).not.toBe(first);
  });
});

describe('graceful shutdown', () => {
  it('GET /api/v1/jobs lists newest first, filters by state, queue and name, pages; an unknown filter value is a 400', async () => {
    await t.ctx.queues.queue('maintenance').obliterate({ force: true });
    const older = await t.ctx.queues.enqueue(webhookJobs.prune_webhook_calls, {});
    const newer = await t.ctx.queues.enqueue(monitorJobs.monitor_log_retention, {}, { delay: 60_000 });
    const list = async (query: string) => (await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/jobs?${query}` })).json();
    const all = await list('queue=maintenance');
    expect(all.items.map((j: { id: string }) => j.id)).toEqual([newer, older]);
    expect(all).toMatchObject({ total: 2, limit: 50, offset: 0 });
    expect((await list('queue=maintenance&state=delayed')).items.map((j: { id: string }) => j.id)).toEqual([newer]);
    expect((await list('name=prune_webhook_calls')).items.map((j: { id: string }) => j.id)).toEqual([older]);
    expect(await list('queue=maintenance&limit=1&offset=1')).toMatchObject({ items: [{ id: older }], total: 2 });
    for (const query of ['state=finished', 'queue=nope', 'name=rm_rf', 'colour=red']) {
      expect((await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/jobs?${query}` })).statusCode, query).toBe(400);
    }
  });

  it('GET /api/v1/jobs pages by offset and its Link says so: the next offset, the other parameters kept; none on the last page', async () => {
    await t.ctx.queues.queue('maintenance').obliterate({ force: true });
    const later = { delay: 60_000 };
    const ids = [
      await t.ctx.queues.enqueue(webhookJobs.prune_webhook_calls, {}, later),
      await t.ctx.queues.enqueue(monitorJobs.monitor_log_retention, {}, later),
      await t.ctx.queues.enqueue(settingsJobs.rotate_encryption_key, { user_id: null }, later),
    ];
    const page = (url: string) => request(t.app, t.as.user, { method: 'GET', url });
    const first = await page('/api/v1/jobs?queue=maintenance&state=delayed&limit=2');
    expect(first.json()).toMatchObject({ total: 3, offset: 0, next_cursor: null });
    expect(first.headers.link).toBe('<http://svc.test/api/v1/jobs?queue=maintenance&state=delayed&limit=2&offset=2>; rel="next"');
    const second = await page('/api/v1/jobs?queue=maintenance&state=delayed&limit=2&offset=2');
    expect(second.headers.link).toBeUndefined();
    const listed = [...first.json().items, ...second.json().items].map((j: { id: string }) => j.id);
    expect(listed.sort()).toEqual([...ids].sort());
  });

  it('a page far past the jobs kept reads none of them; no read asks for more jobs than are kept', async () => {
    await t.ctx.queues.queue('maintenance').obliterate({ force: true });
    await t.ctx.queues.enqueue(webhookJobs.prune_webhook_calls, {});
    // Count what the list asks Redis for, through the queues it is given.
    const ranges: number[] = [];
    const queues = {
      ...t.ctx.queues,
      queue(name: string) {
        const queue = t.ctx.queues.queue(name);
        return new Proxy(queue, {
          get(target, prop, receiver) {
            if (prop !== 'getJobs') return Reflect.get(target, prop, receiver);
            return (types: string[], start: number, end: number, asc: boolean) => {
              ranges.push(end - start + 1);
              return target.getJobs(types as never, start, end, asc);
            };
          },
        });
      },
    } as typeof t.ctx.queues;
    const service = createJobService({ queues }, composeFeatures(t.ctx).jobs);
    expect((await service.list({ limit: 50, offset: 2_147_483_000 })).items).toEqual([]);
    expect(ranges).toEqual([]);
    const named = await service.list({ limit: 50, offset: 2_147_483_000, name: 'prune_webhook_calls' });
    expect(named).toMatchObject({ items: [], total: 1 });
    expect(Math.max(...ranges)).toBe(1);
  });

  it('cancel removes a waiting or delayed job (it never runs); a finished one is a 409; users may not cancel', async () => {
    const delayed = await t.ctx.queues.enqueue(
      webhookJobs.prune_webhook_calls,
      {},
      { delay: 60_000, deduplication: undefined, jobId: 'cancel-me' },
    );
    expect((await request(t.app, t.as.user, { method: 'POST', url: `/api/v1/jobs/${delayed}/actions/cancel` })).statusCode).toBe(403);
    const cancelled = await request(t.app, t.as.admin, { method: 'POST', url: `/api/v1/jobs/${delayed}/actions/cancel` });
    expect(cancelled.statusCode).toBe(200);
    expect(cancelled.json()).toMatchObject({ id: delayed, state: 'cancelled' });
    expect((await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/jobs/${delayed}` })).statusCode).toBe(404);

    const workers = await startWorkers(t.ctx);
    try {
      const ran = await t.ctx.queues.enqueue(settingsJobs.rotate_encryption_key, { user_id: null });
      await waitForJob(t.app, t.as.user, ran);
      const late = await request(t.app, t.as.admin, { method: 'POST', url: `/api/v1/jobs/${ran}/actions/cancel` });
      expect(late.statusCode).toBe(409);
      expect(late.json().error).toMatchObject({ code: 'conflict', details: { state: 'completed' } });
    } finally {
      await workers.close();
    }
  });

  it("a schedule's next run cannot be cancelled: 409 saying so", async () => {
    await t.ctx.queues.schedule('new-year-test', { pattern: '0 0 1 1 *', tz: 'UTC' }, webhookJobs.prune_webhook_calls, {});
    const next = (await t.ctx.queues.queue('maintenance').getJobs(['delayed'])).find((j) => j.repeatJobKey === 'new-year-test');
    expect(next).toBeDefined();
    const res = await request(t.app, t.as.admin, { method: 'POST', url: `/api/v1/jobs/maintenance-${next!.id}/actions/cancel` });
    expect(res.statusCode).toBe(409);
    expect(res.json().error.message).toMatch(/is the next run of a schedule .*: it cannot be cancelled$/);
    await t.ctx.queues.unschedule(webhookJobs.prune_webhook_calls, 'new-year-test');
  });

  it('close() waits for the running job to finish', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let started!: () => void;
    const running = new Promise<void>((r) => (started = r));
    const workers = await startWorkers(
      t.ctx,
      withJobHandler('rotate_encryption_key', (real) => async (payload, job) => {
        started();
        await gate;
        return real(payload, job);
      }),
    );
    const jobId = await t.ctx.queues.enqueue(settingsJobs.rotate_encryption_key, { user_id: null });
    await running;
    let closed = false;
    const closing = workers.close().then(() => (closed = true));
    await new Promise((r) => setTimeout(r, 200));
    expect(closed).toBe(false); // still running: close() is waiting for it
    release();
    await closing;
    const job = (await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/jobs/${jobId}` })).json();
    expect(job.state).toBe('completed');
  });
});
