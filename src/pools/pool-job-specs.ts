// The pools' jobs (DESIGN §22). A template's copies are made again after a crash (each copy starts
// over: what a dead run left of it is removed first); a drain continues where it was (its state is
// the host's tenants and its moves, read again).
import { z } from 'zod';
import { refId } from '../core/http/schemas.js';
import { defineJobs, job, requestedBy } from '../core/jobs.js';

export const poolJobs = defineJobs({
  template_copies_sync: job({
    queue: 'pools',
    payload: z.object({ database_template_id: refId, ...requestedBy }),
    key: (p) => String(p.database_template_id),
    afterCrash: 'rerun',
  }),
  // Every few minutes, and after setup_odoo and a template's build or update: a sync queued for each
  // template whose pool has a host without an in-step copy.
  pools_sweep: job({ queue: 'pools', payload: z.object({ ...requestedBy }), key: () => 'all', afterCrash: 'rerun' }),
  host_drain: job({
    queue: 'pools',
    payload: z.object({ drain_id: refId, ...requestedBy }),
    key: (p) => String(p.drain_id),
    afterCrash: 'rerun',
  }),
});
