import { z } from 'zod';
import { refId } from '../core/http/schemas.js';
import { defineJobs, job, requestedBy } from '../core/jobs.js';

export const domainJobs = defineJobs({
  // DNS, then the site file on the Odoo host, then the certificate read back.
  verify_domain: job({
    queue: 'domains',
    payload: z.object({ domain_id: refId, ...requestedBy }),
    key: (p) => String(p.domain_id),
    afterCrash: 'interrupt', // changes Caddy's configuration on the host
  }),
  // Every 5 minutes: verify_domain for the domains waiting for DNS (failed ones hourly), the served
  // certificates read again (expiry notices), and the domains of ended subscriptions removed.
  verify_domains: job({
    queue: 'maintenance',
    payload: z.object({ ...requestedBy }),
    // Idempotent: a removal run again finds the file gone, the rest are reads and deduplicated jobs.
    afterCrash: 'rerun',
  }),
});
