// Background jobs: GET /api/v1/jobs (newest first), GET /api/v1/jobs/{id} (state,
// progress, result) and POST /api/v1/jobs/{id}/actions/cancel (a job that has not started).
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { operationId } from '../core/http/actions.js';
import { listOf, listQuery } from '../core/http/schemas.js';
import type { Registry } from '../feature.js';
import { createJobService, JOB_STATES } from './job-service.js';

const jobOut = z.object({
  id: z.string(),
  queue: z.string(),
  name: z.string(),
  state: z.enum(JOB_STATES),
  progress: z.unknown().describe('null until the job reports progress; its shape per job is in docs/jobs.md'),
  result: z.unknown(),
  error: z.string().nullable(),
  created_at: z.string(),
  finished_at: z.string().nullable(),
});

const jobId = z
  .string()
  .max(200)
  .regex(/^[a-z][a-z_]*-[A-Za-z0-9:_-]+$/, 'must be a job id as answered by a 202, e.g. ssh-t5k2qa-12');

export function registerJobRoutes(parent: FastifyInstance, ctx: AppContext, registry: Registry) {
  const service = createJobService(ctx, registry.jobs);
  const app = parent.withTypeProvider<ZodTypeProvider>();
  const tags = ['jobs'];
  const oneOf = (values: string[]) => z.enum(values as [string, ...string[]]);

  app.get('/api/v1/jobs', {
    // BullMQ reads a state's jobs by position: the list pages by offset, and Link says the next one.
    config: { group: 'user', paging: 'offset' },
    schema: {
      tags,
      operationId: operationId('/jobs', 'list'),
      summary: 'List jobs',
      description:
        'Background jobs, newest first (finished jobs are kept 7 days, failed ones 30 days). Pages by offset only: next_cursor is always null, and Link: rel="next" names the next offset.',
      querystring: listQuery.omit({ cursor: true }).extend({
        state: z.enum(JOB_STATES).optional(),
        queue: oneOf(registry.jobs.queueNames()).optional(),
        name: oneOf(registry.jobs.names()).optional(),
      }),
      response: { 200: listOf(jobOut) },
    },
    handler: (req) => service.list(req.query),
  });

  app.post('/api/v1/jobs/:id/actions/cancel', {
    config: { group: 'operator' },
    schema: {
      tags,
      operationId: operationId('/jobs', 'cancel'),
      summary: 'Cancel a job',
      description:
        'Removes a job that is waiting or delayed, so it never runs; answers it with state "cancelled". 409 once it runs or ran.',
      params: z.object({ id: jobId }),
      response: { 200: jobOut.extend({ state: z.enum([...JOB_STATES, 'cancelled']) }) },
    },
    handler: (req) => service.cancel(req.params.id),
  });

  app.get('/api/v1/jobs/:id', {
    config: { group: 'user' },
    schema: {
      tags,
      operationId: operationId('/jobs', 'get'),
      summary: 'Get a job',
      params: z.object({ id: jobId }),
      response: { 200: jobOut },
    },
    handler: (req) => service.get(req.params.id),
  });
}
