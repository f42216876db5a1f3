// The move jobs. A move is run again after a crash of its worker: before its switch it starts over
// (what the earlier run made on the target is removed first), after it only finishes what is left.
import { z } from 'zod';
import { refId } from '../core/http/schemas.js';
import { defineJobs, job, requestedBy } from '../core/jobs.js';

export const moveJobs = defineJobs({
  subscription_move: job({
    queue: 'moves',
    payload: z.object({ move_id: refId, ...requestedBy }),
    key: (p) => String(p.move_id),
    afterCrash: 'rerun',
  }),
  moves_sweep: job({ queue: 'moves', payload: z.object({ ...requestedBy }), key: () => 'all', afterCrash: 'rerun' }),
});
