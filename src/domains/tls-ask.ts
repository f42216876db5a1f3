// Caddy's on-demand TLS asks svc before it obtains a certificate for a name (GET
// /svc/tls/ask?domain=<name>, the main Caddyfile's `on_demand_tls { ask … }`): 200 only for a
// live tenant's own address (SUBSCRIPTION_URL's pattern: a subscription whose database was made and
// not dropped; STAGING_URL's: a staging copy that is ready or being refreshed) or a verified
// customer domain of such a subscription; 404 for anything else, so nobody gets a certificate for a
// name nobody sells. Public: Caddy runs on the Odoo hosts, maybe other machines, and the answer
// tells no more than the address itself does (a tenant's page or "No instance at this address").
// Every answer is one or two lookups by a unique index, or none for a malformed name: no scan.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { TLS_ASK_PATH, tenantHostPatterns, tenantsOfHostname } from '../servers/index.js';
import { HOSTNAME } from './hostname.js';

type Ctx = Pick<AppContext, 'db' | 'config'>;

/** A name Caddy may ask about: lower-case letters, digits, '.', '-' and '_' (database names hold '_'). */
const ASKABLE = /^[a-z0-9_.-]{1,253}$/;
const STAGING_SERVED = ['ready', 'refreshing'] as const;

const live = (sub: { database_created_at: Date | null; database_dropped_at: Date | null } | null) =>
  sub !== null && sub.database_created_at !== null && sub.database_dropped_at === null;

export function createTlsAsk(ctx: Ctx) {
  const { db, config } = ctx;
  /** Whether Caddy may obtain a certificate for `name`. Reads only; changes nothing. */
  return async function allowed(name: string): Promise<boolean> {
    const hostname = name.trim().toLowerCase().replace(/\.$/, '');
    if (!ASKABLE.test(hostname)) return false;
    for (const { kind, database } of tenantsOfHostname(tenantHostPatterns(config), hostname)) {
      if (kind === 'subscription') {
        const sub = await db.subscription.findUnique({
          where: { database_name: database },
          select: { database_created_at: true, database_dropped_at: true },
        });
        if (live(sub)) return true;
      } else {
        const copy = await db.stagingInstance.findUnique({ where: { database_name: database }, select: { state: true } });
        if (copy && (STAGING_SERVED as readonly string[]).includes(copy.state)) return true;
      }
    }
    if (!HOSTNAME.test(hostname)) return false;
    const domain = await db.domain.findUnique({
      where: { hostname },
      select: { verified_at: true, subscription: { select: { database_created_at: true, database_dropped_at: true } } },
    });
    return domain !== null && domain.verified_at !== null && live(domain.subscription);
  };
}

const answer = z.object({ allowed: z.boolean() });

export function registerTlsAskRoute(parent: FastifyInstance, ctx: AppContext) {
  const allowed = createTlsAsk(ctx);
  parent.withTypeProvider<ZodTypeProvider>().get(TLS_ASK_PATH, {
    config: { group: 'public' },
    schema: {
      tags: ['domains'],
      operationId: 'domains.tlsAsk',
      summary: 'May Caddy obtain a certificate for a name',
      description:
        "Caddy's on-demand TLS question (public): 200 when `domain` is a live tenant's own address (SUBSCRIPTION_URL's or STAGING_URL's pattern) or a verified customer domain, 404 otherwise.",
      querystring: z
        .object({
          domain: z.string().min(1).max(300).describe('The host name Caddy is asked to serve').meta({ example: 'acme_7.example.com' }),
        })
        .strict(),
      response: { 200: answer, 404: answer },
    },
    handler: async (req, reply) => {
      if (await allowed(req.query.domain)) return { allowed: true };
      return reply.status(404).send({ allowed: false });
    },
  });
}
