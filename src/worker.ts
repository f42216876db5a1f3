// The worker role: one BullMQ worker per queue of the job catalog, dispatching on the job name to
// the handlers listed here, plus the recurring schedules. close() lets running jobs finish.
import { Worker, type Job } from 'bullmq';
import type { AppContext } from './context.js';
import { JOBS, QUEUE_NAMES, type JobName, type JobPayload, type QueueName } from './core/job-catalog.js';
import { createSettingsJobs } from './settings/settings-jobs.js';
import { createNotificationJobs } from './notifications/notification-jobs.js';
import { createSubscriptionJobs } from './subscriptions/subscription-jobs.js';
import { createTrialJobs } from './trial/trial-jobs.js';
import { createWebhookJobs, scheduleWebhookJobs } from './webhooks/webhook-jobs.js';
import { createRootServerJobs } from './servers/root-server-jobs.js';
import { createMonitorJobs, registerMonitorSchedules } from './monitoring/monitor-jobs.js';
import { createGitJobs } from './git/git-deploy-job.js';

export type JobHandler<N extends JobName> = (payload: JobPayload<N>, job: Job) => Promise<unknown>;
/** Every job of the catalog must have a handler: the compiler checks it here. */
export type JobHandlers = { [N in JobName]: JobHandler<N> };

export function createJobHandlers(ctx: AppContext): JobHandlers {
  return {
    ...createSettingsJobs(ctx),
    ...createNotificationJobs(ctx),
    ...createTrialJobs(ctx),
    ...createSubscriptionJobs(ctx),
    ...createWebhookJobs(ctx),
    ...createRootServerJobs(ctx),
    ...createMonitorJobs(ctx),
    ...createGitJobs(ctx),
  };
}

/** Concurrency per queue; SSH-bound queues wait on the network, not the CPU. */
function concurrencyOf(queue: QueueName, ctx: AppContext): number {
  if (queue === 'monitor') return ctx.config.MONITOR_CONCURRENCY;
  return queue === 'maintenance' ? 1 : ctx.config.WORKER_CONCURRENCY;
}

export interface Workers {
  workers: Worker[];
  close(): Promise<void>;
}

export async function startWorkers(ctx: AppContext, handlers: JobHandlers = createJobHandlers(ctx)): Promise<Workers> {
  const workers = QUEUE_NAMES.map((queue) => {
    const worker = new Worker(
      queue,
      async (job: Job) => {
        const name = job.name as JobName;
        if (!Object.hasOwn(JOBS, name)) throw new Error(`Unknown job ${job.name}`);
        const payload = JOBS[name].payload.parse(job.data);
        return (handlers[name] as JobHandler<typeof name>)(payload as JobPayload<typeof name>, job);
      },
      { connection: ctx.redis, prefix: ctx.queues.prefix, concurrency: concurrencyOf(queue, ctx) },
    );
    worker.on('failed', (job, err) => ctx.log.warn({ job_id: job?.id, queue, job: job?.name, err }, 'job failed'));
    worker.on('error', (err) => ctx.log.error({ err, queue }, 'worker error'));
    return worker;
  });
  await Promise.all(workers.map((w) => w.waitUntilReady()));
  await scheduleWebhookJobs(ctx);
  await registerMonitorSchedules(ctx);
  ctx.log.info({ queues: QUEUE_NAMES }, 'workers started');
  return {
    workers,
    /** Stops taking jobs and waits for the running ones to finish. */
    async close() {
      await Promise.all(workers.map((w) => w.close()));
    },
  };
}
