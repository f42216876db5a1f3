// Customer domains with automatic TLS: the customer points DNS at the Odoo host, the service
// writes a Caddy site there and HTTPS goes live with a certificate Caddy obtains (docs/domains.md).
import type { Feature } from '../feature.js';
import { domainJobHandlers, registerDomainSchedules } from './domain-jobs.js';
import { domainModel } from './domain-models.js';
import { registerDomainRoutes } from './domain-routes.js';

export const domains: Feature = {
  name: 'domains',
  models: [domainModel],
  routes: registerDomainRoutes,
  jobs: domainJobHandlers,
  schedules: registerDomainSchedules,
};

export { createDomainVerification } from './domain-verification.js';
export { dnsTargetOf, hostAddresses } from './odoo-host.js';
