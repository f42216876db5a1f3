import { z } from 'zod';
import { refId } from '../core/http/schemas.js';
import { defineJobs, job, requestedBy } from '../core/jobs.js';

export const domainJobs = defineJobs({
  // Everything that touches a domain's host or tenant, one job per domain: the key makes its
  // deduplication id "verify_domain:<domain id>", so at most one waits or runs per domain, whoever
  // asked. The operator's verify: DNS, then the site file on the Odoo host, then the certificate
  // read back. The run's (`scheduled`): the same for a domain waiting for DNS, the served
  // certificate read again for an active one, the domain removed when its subscription ended.
  verify_domain: job({
    queue: 'domains',
    payload: z.object({ domain_id: refId, scheduled: z.boolean().default(false), ...requestedBy }),
    key: (p) => String(p.domain_id),
    afterCrash: 'interrupt', // changes Caddy's configuration on the host and the tenant's web.base.url
  }),
  // Every 5 minutes: reads which domains need work and queues a verify_domain for each; it
  // touches no host and no tenant itself, so a dead host holds up only its own domains' jobs.
  verify_domains: job({
    queue: 'maintenance',
    payload: z.object({ ...requestedBy }),
    // Idempotent: it reads and queues deduplicated jobs.
    afterCrash: 'rerun',
  }),
});
