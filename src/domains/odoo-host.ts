// The Odoo host of a subscription's instance: the root server it was deployed on (its database
// template's) or moved to, where its filestore lives and where Caddy serves its domains. A customer's
// DNS must point at that host's address: A/AAAA records to the address the server record names
// (or, when that is a name, to the addresses it resolves to).
import { isIP } from 'node:net';
import type { Db } from '../core/db.js';
import { ConflictError } from '../core/errors.js';
import type { OutboundTarget } from '../core/outbound-log.js';
import type { RootServer, Subscription } from '../generated/prisma/client.js';
import { PLACEMENT_INCLUDE, placementOf } from '../instances/index.js';
import type { createDomainLookup } from '../settings/index.js';

/** The root server serving the subscription's domains; 409 naming what is missing. */
export async function odooHostOf(db: Db, sub: Pick<Subscription, 'id'>): Promise<RootServer> {
  const found = await db.subscription.findUnique({ where: { id: sub.id }, include: PLACEMENT_INCLUDE });
  if (!found?.database_template) {
    throw new ConflictError(`Subscription ${sub.id} has no database template, so no Odoo host serves its domains`, {
      fields: [{ field: 'subscription_id', message: 'no database template' }],
    });
  }
  const { template, host } = placementOf(found);
  if (!host) {
    throw new ConflictError(
      `Database template ${template.id} (${template.name}) of subscription ${sub.id} has no root_server_id: no Odoo host serves its domains`,
      { fields: [{ field: 'subscription_id', message: `template ${template.id} has no root server` }] },
    );
  }
  return host;
}

/** The addresses the customer's records must point to. */
export async function hostAddresses(
  lookup: ReturnType<typeof createDomainLookup>,
  server: Pick<RootServer, 'ip'>,
  target: Partial<OutboundTarget>,
): Promise<string[]> {
  if (isIP(server.ip)) return [server.ip];
  return (await lookup.lookup(server.ip, target)).addresses;
}

/** "A 203.0.113.10, AAAA 2001:db8::10". */
export function dnsTargetOf(addresses: readonly string[]): string {
  return addresses.map((a) => `${isIP(a) === 6 ? 'AAAA' : 'A'} ${a}`).join(', ');
}
