// BullMQ plumbing over the job catalog. Public job ids are "<queue>-<bullmq id>", so
// GET /api/v1/jobs/{id} knows which queue to look in.
import { Queue, type Job, type JobsOptions, type RepeatOptions } from 'bullmq';
import { Redis } from 'ioredis';
import { JOBS, QUEUE_NAMES, type JobInput, type JobName, type QueueName } from './job-catalog.js';

/** Finished and failed jobs are kept long enough for operators to read their outcome. */
const defaultJobOptions: JobsOptions = {
  removeOnComplete: { age: 7 * 24 * 3600, count: 10_000 },
  removeOnFail: { age: 30 * 24 * 3600, count: 10_000 },
};

export function createRedis(url: string): Redis {
  // BullMQ requires maxRetriesPerRequest: null for its blocking connections.
  return new Redis(url, { maxRetriesPerRequest: null });
}

export type Queues = ReturnType<typeof createQueues>;

export function createQueues(redis: Redis, prefix: string) {
  const queues = new Map<QueueName, Queue>(
    QUEUE_NAMES.map((name) => [name, new Queue(name, { connection: redis, prefix, defaultJobOptions })]),
  );
  const queue = (name: QueueName) => queues.get(name)!;

  function jobOptions<N extends JobName>(name: N, data: object): JobsOptions {
    const spec: { queue: string; key?: (p: never) => string; attempts?: number } = JOBS[name];
    return {
      attempts: spec.attempts ?? 1,
      backoff: { type: 'exponential', delay: 5_000 },
      ...(spec.key ? { deduplication: { id: `${name}:${spec.key(data as never)}` } } : {}),
    };
  }

  return {
    prefix,
    queue,
    /** Validates the payload against the catalog and queues the job; returns its public id. */
    async enqueue<N extends JobName>(name: N, payload: JobInput<N>, opts: JobsOptions = {}): Promise<string> {
      const spec = JOBS[name];
      const data = spec.payload.parse(payload);
      const job = await queue(spec.queue).add(name, data, { ...jobOptions(name, data), ...opts });
      return publicJobId(spec.queue, job.id!);
    },
    /** Creates or updates a recurring job; one run per interval across every worker process. */
    async schedule<N extends JobName>(
      schedulerId: string,
      repeat: Omit<RepeatOptions, 'key'>,
      name: N,
      payload: JobInput<N>,
      opts: Pick<JobsOptions, 'removeOnComplete' | 'removeOnFail'> = {},
    ) {
      const spec = JOBS[name];
      const data = spec.payload.parse(payload);
      await queue(spec.queue).upsertJobScheduler(schedulerId, repeat, { name, data, opts: { attempts: 1, ...opts } });
    },
    async unschedule(name: JobName, schedulerId: string) {
      await queue(JOBS[name].queue).removeJobScheduler(schedulerId);
    },
    /** Finds a job by its public id, or null. */
    async find(publicId: string): Promise<Job | null> {
      const dash = publicId.indexOf('-');
      const name = publicId.slice(0, dash) as QueueName;
      if (dash < 1 || !queues.has(name)) return null;
      return (await queue(name).getJob(publicId.slice(dash + 1))) ?? null;
    },
    async close() {
      await Promise.all([...queues.values()].map((q) => q.close()));
    },
  };
}

export function publicJobId(queue: string, bullId: string): string {
  return `${queue}-${bullId}`;
}
