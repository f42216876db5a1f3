// The worker role: one BullMQ worker per queue of the job catalog, dispatching each job to the
// handler its feature gives (src/features.ts), and every feature's schedules, put back whenever
// Redis lost its data. close() lets running jobs finish. Crash recovery follows each queue's
// afterCrash (src/core/jobs.ts): a job whose worker died is run again, or, if it changes a remote
// system, recorded as interrupted and failed.
import { DelayedError, UnrecoverableError, Worker, type Job, type WorkerOptions } from 'bullmq';
import type { AppContext } from './context.js';
import { isDatabaseUnavailable } from './core/db.js';
import type { Interruption, JobHandler, JobPayload, JobSpec } from './core/jobs.js';
import { instrumentWorker } from './core/metrics.js';
import { publicJobId } from './core/queue.js';
import { createRedis, isRedisUnavailable } from './core/redis.js';
import type { BackgroundTask, Feature, Registry } from './feature.js';
import { composeFeatures, FEATURES } from './features.js';
import { INTERRUPTED, recordInterruption } from './jobs/job-interruption.js';

/** Times a job of a `rerun` queue is taken up again after its worker died, before it is failed. */
const RERUNS_AFTER_CRASH = 2;
/**
 * A `rerun` job that met PostgreSQL or Redis away (a failover) is put off this long and run again,
 * up to POSTPONES_AT_MOST times (about ten minutes), instead of failing.
 */
const POSTPONE_MS = 5_000;
const POSTPONES_AT_MOST = 120;

interface Runnable {
  spec: JobSpec;
  handler: JobHandler<JobSpec>;
  interruption?: Interruption<JobSpec, AppContext>;
}

/** Every job's spec, handler and interruption, from the features' manifests. */
function runnables(ctx: AppContext, registry: Registry, features: readonly Feature[]): Map<string, Runnable> {
  const out = new Map<string, Runnable>();
  for (const { jobs } of features) {
    if (!jobs) continue;
    const handlers = jobs.handlers(ctx, registry);
    for (const [name, spec] of Object.entries(jobs.specs)) {
      out.set(name, { spec, handler: handlers[name]!, interruption: jobs.interruptions[name] });
    }
  }
  return out;
}

/**
 * Stalled-job recovery of a queue. An `interrupt` queue gives a stalled job back once
 * (maxStalledCount 1) so the dispatcher records the interruption instead of running it; if that
 * too is cut short, BullMQ fails the job without handing it out again.
 */
function crashOptionsOf(
  queue: string,
  ctx: AppContext,
  registry: Registry,
): Pick<WorkerOptions, 'lockDuration' | 'stalledInterval' | 'maxStalledCount'> {
  return {
    lockDuration: ctx.config.JOB_LOCK_MS,
    stalledInterval: ctx.config.JOB_STALLED_INTERVAL_MS,
    maxStalledCount: registry.jobs.afterCrashOf(queue) === 'interrupt' ? 1 : RERUNS_AFTER_CRASH,
  };
}

/** Records the interruption (action log, chatter, record), then fails the job with INTERRUPTED. */
async function failInterrupted(ctx: AppContext, job: Job, run: Runnable, payload: JobPayload<JobSpec>): Promise<never> {
  ctx.log.warn({ job_id: job.id, queue: job.queueName, job: job.name }, 'job interrupted by a worker crash; not run again');
  try {
    const id = publicJobId(job.queueName, job.id!);
    await recordInterruption(ctx, { name: job.name, id, payload }, run.interruption!);
  } catch (err) {
    throw new UnrecoverableError(`${INTERRUPTED} (recording it on the record failed: ${(err as Error).message})`);
  }
  throw new UnrecoverableError(INTERRUPTED);
}

/** Concurrency per queue; SSH-bound queues wait on the network, not the CPU. */
function concurrencyOf(queue: string, ctx: AppContext): number {
  return queue === 'maintenance' ? 1 : ctx.config.WORKER_CONCURRENCY;
}

/** Every feature's schedules, from PostgreSQL; idempotent, so worker processes may do it at once. */
async function installSchedules(ctx: AppContext, features: readonly Feature[]) {
  for (const feature of features) await feature.schedules?.(ctx);
}

/**
 * Redis keeps nothing on disk: restarted, it has lost the schedules. Every REDIS_LOSS_CHECK_MS the
 * epoch of its data set is read (set if missing, src/core/queue.ts); another one than this process
 * knew means the data set is new, and the schedules are put back. Every worker process does so on
 * its own: installing them is idempotent.
 */
function watchRedisLoss(ctx: AppContext, features: readonly Feature[], known: string): BackgroundTask {
  let timer: NodeJS.Timeout | undefined;
  let checking: Promise<void> = Promise.resolve();
  let stopped = false;
  const check = async () => {
    try {
      const epoch = await ctx.queues.epoch();
      if (epoch === known) return;
      ctx.log.warn({ epoch, previous: known }, 'Redis lost its data: putting the schedules back from PostgreSQL');
      await installSchedules(ctx, features);
      known = epoch; // only once they are back: a failure is tried again at the next check
      ctx.log.info({ epoch }, 'schedules put back after the loss of Redis data');
    } catch (err) {
      ctx.log.error({ err }, 'checking Redis for a loss of its data failed; tried again at the next check');
    }
  };
  const next = () => {
    timer = setTimeout(() => {
      checking = check().finally(() => {
        if (!stopped) next();
      });
    }, ctx.config.REDIS_LOSS_CHECK_MS);
  };
  next();
  return {
    async close() {
      stopped = true;
      clearTimeout(timer);
      await checking;
    },
  };
}

export interface Workers {
  workers: Worker[];
  close(): Promise<void>;
}

export async function startWorkers(ctx: AppContext, features: readonly Feature[] = FEATURES): Promise<Workers> {
  const registry = composeFeatures(ctx, features);
  const jobs = runnables(ctx, registry, features);
  const queueNames = registry.jobs.queueNames();
  // The workers' own connection (src/core/redis.ts): it waits out a Redis that is away (a
  // failover, a restart) instead of failing, and BullMQ duplicates it for its blocking commands.
  const connection = createRedis(ctx.config, { use: 'workers', log: ctx.log });
  const workers = queueNames.map((queue) => {
    const worker = new Worker(
      queue,
      async (job: Job, token?: string) => {
        const run = jobs.get(job.name);
        if (!run) throw new Error(`Unknown job ${job.name}`);
        const payload = run.spec.payload.parse(job.data);
        // Its worker died while it ran (BullMQ counted a stall): a job that changes a remote system
        // is not run again, only recorded as interrupted.
        if (job.stalledCounter > 0 && run.spec.afterCrash === 'interrupt') return failInterrupted(ctx, job, run, payload);
        try {
          return await run.handler(payload, job);
        } catch (err) {
          // A job that may run twice is safe to run again when the database or Redis was away; one
          // that changes a remote system fails as before (what it did there is not known).
          const away = isDatabaseUnavailable(err) || isRedisUnavailable(err);
          if (!away || run.spec.afterCrash !== 'rerun' || !token || job.attemptsStarted > POSTPONES_AT_MOST) throw err;
          ctx.log.warn({ err, job_id: job.id, queue: job.queueName, job: job.name }, 'database or Redis unavailable: job put off');
          await job.moveToDelayed(Date.now() + POSTPONE_MS, token);
          throw new DelayedError();
        }
      },
      { connection, prefix: ctx.queues.prefix, concurrency: concurrencyOf(queue, ctx), ...crashOptionsOf(queue, ctx, registry) },
    );
    worker.on('failed', (job, err) => ctx.log.warn({ job_id: job?.id, queue, job: job?.name, err }, 'job failed'));
    worker.on('error', (err) => ctx.log.error({ err, queue }, 'worker error'));
    instrumentWorker(worker, registry.jobs.names());
    return worker;
  });
  await Promise.all(workers.map((w) => w.waitUntilReady()));
  // Read before the schedules go in: a loss meanwhile is seen at the first check.
  const epoch = await ctx.queues.epoch();
  await installSchedules(ctx, features);
  const background: BackgroundTask[] = [watchRedisLoss(ctx, features, epoch)];
  for (const feature of features) if (feature.background) background.push(await feature.background(ctx, registry));
  ctx.log.info({ queues: queueNames }, 'workers started');
  return {
    workers,
    /** Stops taking jobs and the background work, and waits for the running ones to finish. */
    async close() {
      await Promise.all(background.map((b) => b.close()));
      await Promise.all(workers.map((w) => w.close()));
      connection.disconnect();
    },
  };
}
