// /api/v1/domains (read: user; write and actions: operator): customer domains, and the action
// verify (202, a job) that makes one live once its DNS points at the Odoo host; and Caddy's
// on-demand TLS question (public: tls-ask.ts).
import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../context.js';
import { action, registerActions } from '../core/http/actions.js';
import { registerCrud } from '../core/http/crud.js';
import { domainModel } from './domain-models.js';
import { domainCreate, domainFilters, domainOut, domainUpdate } from './domain-schemas.js';
import { createDomainService } from './domain-service.js';
import { registerTlsAskRoute } from './tls-ask.js';

export function registerDomainRoutes(app: FastifyInstance, ctx: AppContext) {
  const service = createDomainService(ctx);
  registerTlsAskRoute(app, ctx);
  registerCrud(app, {
    path: '/domains',
    model: domainModel,
    tag: 'domains',
    service,
    output: domainOut,
    create: domainCreate,
    update: domainUpdate,
    filters: domainFilters,
    read: 'user',
    write: 'operator',
  });
  registerActions(app, {
    path: '/domains',
    tag: 'domains',
    group: 'operator',
    actions: {
      verify: action({
        summary: 'Verify a domain',
        description:
          "Checks that the host name resolves to the Odoo host's address only, then writes its Caddy site (validated, reloaded) and reads the certificate served for it: active, or pending_dns / failed with last_error.",
        response: 'job',
        run: ({ id, user }) => service.verify(id, user.id),
      }),
    },
  });
}
