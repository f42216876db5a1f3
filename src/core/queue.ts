// BullMQ plumbing: queues opened on first use, jobs added from their spec (payload checked,
// deduplication key applied), recurring jobs. Public job ids are "<queue>-<bullmq id>", so
// GET /api/v1/jobs/{id} knows which queue to look in.
//
// Redis keeps nothing on disk, so its counters start again after it lost its data. A job's id is
// therefore "<epoch>-<n>": the epoch names Redis's data set (the second it was first used, base
// 36) and is stored in it, n counts the queue's jobs within it. An id is never given twice, and
// the epoch is what tells a worker that Redis lost its data (src/worker.ts).
import { Queue, type Job, type JobsOptions, type RepeatOptions } from 'bullmq';
import type { Redis } from 'ioredis';
import type { z } from 'zod';
import type { JobSpec } from './jobs.js';

/** Finished and failed jobs are kept long enough for operators to read their outcome. */
const defaultJobOptions: JobsOptions = {
  removeOnComplete: { age: 7 * 24 * 3600, count: 10_000 },
  removeOnFail: { age: 30 * 24 * 3600, count: 10_000 },
};

/** Redis connections are made in one place (./redis.ts); re-exported for the callers of old. */
export { createRedis } from './redis.js';

export function publicJobId(queue: string, bullId: string): string {
  return `${queue}-${bullId}`;
}

/**
 * The epoch of Redis's data set, set here if it has none yet (KEYS[1], ARGV[1] the new one); with
 * KEYS[2], a queue's counter, the next job id of that queue instead. One script: an id is never
 * made of a new data set's counter and an old epoch.
 */
const EPOCH_SCRIPT = `
local epoch = redis.call('GET', KEYS[1])
if not epoch then
  epoch = ARGV[1]
  redis.call('SET', KEYS[1], epoch)
end
if #KEYS == 1 then return epoch end
return epoch .. '-' .. redis.call('INCR', KEYS[2])`;

const newEpoch = () => Math.floor(Date.now() / 1000).toString(36);

export type Queues = ReturnType<typeof createQueues>;

export function createQueues(redis: Redis, prefix: string) {
  const queues = new Map<string, Queue>();
  /** The queue of that name (opened on first use). */
  function queue(name: string): Queue {
    let q = queues.get(name);
    if (!q) {
      q = new Queue(name, { connection: redis, prefix, defaultJobOptions });
      // Each reconnection attempt's error is also an 'error' of every queue, which BullMQ prints
      // on stderr when nobody listens: the connection's outage is logged once (./redis.ts).
      q.on('error', () => {});
      queues.set(name, q);
    }
    return q;
  }

  function jobOptions(spec: JobSpec, data: z.output<JobSpec['payload']>): JobsOptions {
    return {
      attempts: spec.attempts ?? 1,
      backoff: { type: 'exponential', delay: 5_000 },
      ...(spec.key ? { deduplication: { id: `${spec.name}:${spec.key(data)}` } } : {}),
    };
  }

  // Outside BullMQ's keys ("<prefix>:<queue>:…"): a queue name holds no dash.
  const epochKey = `${prefix}:redis-epoch`;
  const counterKey = (name: string) => `${prefix}:job-ids:${name}`;

  return {
    prefix,
    queue,
    /** The epoch of Redis's data set: another one than before means Redis lost its data. */
    async epoch(): Promise<string> {
      return (await redis.eval(EPOCH_SCRIPT, 1, epochKey, newEpoch())) as string;
    },
    /** Validates the payload against the spec and queues the job; returns its public id. */
    async enqueue<S extends JobSpec>(spec: S, payload: z.input<S['payload']>, opts: JobsOptions = {}): Promise<string> {
      const data = spec.payload.parse(payload);
      const jobId = opts.jobId ?? ((await redis.eval(EPOCH_SCRIPT, 2, epochKey, counterKey(spec.queue), newEpoch())) as string);
      // A deduplicated job answers the id of the one already there.
      const job = await queue(spec.queue).add(spec.name, data, { ...jobOptions(spec, data), ...opts, jobId });
      return publicJobId(spec.queue, job.id!);
    },
    /** Creates or updates a recurring job; one run per interval across every worker process. */
    async schedule<S extends JobSpec>(
      schedulerId: string,
      repeat: Omit<RepeatOptions, 'key'>,
      spec: S,
      payload: z.input<S['payload']>,
      opts: Pick<JobsOptions, 'removeOnComplete' | 'removeOnFail'> = {},
    ) {
      const data = spec.payload.parse(payload);
      await queue(spec.queue).upsertJobScheduler(schedulerId, repeat, { name: spec.name, data, opts: { attempts: 1, ...opts } });
    },
    async unschedule(spec: JobSpec, schedulerId: string) {
      await queue(spec.queue).removeJobScheduler(schedulerId);
    },
    /** Finds a job by its public id among the given queues, or null. */
    async find(publicId: string, queueNames: readonly string[]): Promise<Job | null> {
      const dash = publicId.indexOf('-');
      const name = publicId.slice(0, dash);
      if (dash < 1 || !queueNames.includes(name)) return null;
      return (await queue(name).getJob(publicId.slice(dash + 1))) ?? null;
    },
    async close() {
      await Promise.all([...queues.values()].map((q) => q.close()));
    },
  };
}
