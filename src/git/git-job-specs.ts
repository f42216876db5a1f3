import { z } from 'zod';
import { refId } from '../core/http/schemas.js';
import { defineJobs, job, requestedBy } from '../core/jobs.js';

export const gitJobs = defineJobs({
  // Deploy a recorded commit to the repository's root server; one job per commit. On the ssh queue
  // with the other jobs that change a server.
  git_push_commit: job({
    queue: 'ssh',
    payload: z.object({ repository_id: refId, commit_id: refId, ...requestedBy }),
    key: (p) => `${p.repository_id}:${p.commit_id}`,
    afterCrash: 'interrupt',
  }),
});
