// The rollout jobs. One job per host runs its rollouts, oldest first, one at a time (the key); it
// is run again after a crash of its worker (rerun): every step of a tenant is persisted
// (rollout-tenant.ts), so the run resumes where it was. A schedule queues it again for every host
// with an unfinished rollout, which also resumes rollouts whose job Redis lost.
import { z } from 'zod';
import { refId } from '../core/http/schemas.js';
import { defineJobs, job, requestedBy } from '../core/jobs.js';

export const rolloutJobs = defineJobs({
  rollout_host: job({
    queue: 'rollouts',
    payload: z.object({ root_server_id: refId, ...requestedBy }),
    key: (p) => String(p.root_server_id),
    afterCrash: 'rerun',
  }),
  rollout_resume: job({ queue: 'rollouts', payload: z.object({ ...requestedBy }), key: () => 'all', afterCrash: 'rerun' }),
});
