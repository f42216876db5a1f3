// GET /api/v1/jobs/{id}: state, progress and result of a background job (DESIGN §8).
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { NotFoundError } from '../core/errors.js';
import { publicJobId } from '../core/queue.js';

const JOB_STATES = ['waiting', 'delayed', 'active', 'completed', 'failed'] as const;

const jobOut = z.object({
  id: z.string(),
  queue: z.string(),
  name: z.string(),
  state: z.enum(JOB_STATES),
  progress: z.unknown(),
  result: z.unknown(),
  error: z.string().nullable(),
  created_at: z.string(),
  finished_at: z.string().nullable(),
});

export function registerJobRoutes(parent: FastifyInstance, ctx: AppContext) {
  parent.withTypeProvider<ZodTypeProvider>().get('/api/v1/jobs/:id', {
    config: { group: 'user' },
    schema: { tags: ['jobs'], params: z.object({ id: z.string().min(1).max(200) }), response: { 200: jobOut } },
    handler: async (req) => {
      let job = await ctx.queues.find(req.params.id);
      if (!job) throw new NotFoundError('Job');
      const raw = await job.getState();
      // It may have finished between the two reads: read it again so state and result agree.
      if ((raw === 'completed' || raw === 'failed') && !job.finishedOn) job = (await ctx.queues.find(req.params.id)) ?? job;
      // BullMQ has more states (prioritized, waiting-children...); to a caller they are all "waiting".
      const state = (JOB_STATES as readonly string[]).includes(raw) ? (raw as (typeof JOB_STATES)[number]) : 'waiting';
      return {
        id: publicJobId(job.queueName, job.id!),
        queue: job.queueName,
        name: job.name,
        state,
        progress: job.progress ?? null,
        result: job.returnvalue ?? null,
        error: job.failedReason ?? null,
        created_at: new Date(job.timestamp).toISOString(),
        finished_at: job.finishedOn ? new Date(job.finishedOn).toISOString() : null,
      };
    },
  });
}
