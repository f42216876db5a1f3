// `npm run cli -- wait <job_id>`: follows a job as GET /api/v1/jobs/{id} shows it (the same job
// service, read from Redis with the service's own configuration: no token needed on svc's machine),
// printing its progress each time it changes, then its result or its error. A failed job, or one
// that is not there, exits non-zero.
import pino from 'pino';
import type { Config } from '../core/config.js';
import { createContext } from '../context.js';
import { composeFeatures } from '../features.js';
import { createJobService } from '../jobs/index.js';
import { followJob, type JobView } from './api-session.js';
import { QuickstartError } from './quickstart-errors.js';
import { NotFoundError } from '../core/errors.js';

export async function waitForJob(config: Config, jobId: string, print: (line: string) => void): Promise<JobView> {
  const ctx = await createContext(config, pino({ level: 'warn' }));
  try {
    const jobs = createJobService(ctx, composeFeatures(ctx).jobs);
    const job = await followJob(async () => (await jobs.get(jobId)) as JobView, print).catch((err: unknown) => {
      throw err instanceof NotFoundError ? new QuickstartError(`No job ${jobId} (finished jobs are kept for a while only)`) : err;
    });
    if (job.state === 'failed') throw new QuickstartError(`job ${jobId} (${job.name}) failed: ${job.error}`);
    print(`job ${jobId} (${job.name}) completed: ${JSON.stringify(job.result)}`);
    return job;
  } finally {
    await ctx.close();
  }
}
