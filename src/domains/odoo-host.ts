// The Odoo host of a subscription's instance: the root server named by its database template
// (root_server_id), where its filestore lives and where Caddy serves its domains. A customer's
// DNS must point at that host's address: A/AAAA records to the address the server record names
// (or, when that is a name, to the addresses it resolves to).
import { isIP } from 'node:net';
import type { Db } from '../core/db.js';
import { ConflictError } from '../core/errors.js';
import type { OutboundTarget } from '../core/outbound-log.js';
import type { RootServer, Subscription } from '../generated/prisma/client.js';
import type { createDomainLookup } from '../settings/index.js';

/** The root server serving the subscription's domains; 409 naming what is missing. */
export async function odooHostOf(db: Db, sub: Pick<Subscription, 'id' | 'database_template_id'>): Promise<RootServer> {
  const template = sub.database_template_id
    ? await db.databaseTemplate.findUnique({ where: { id: sub.database_template_id }, include: { root_server: true } })
    : null;
  if (!template) {
    throw new ConflictError(`Subscription ${sub.id} has no database template, so no Odoo host serves its domains`, {
      fields: [{ field: 'subscription_id', message: 'no database template' }],
    });
  }
  if (!template.root_server) {
    throw new ConflictError(
      `Database template ${template.id} (${template.name}) of subscription ${sub.id} has no root_server_id: no Odoo host serves its domains`,
      { fields: [{ field: 'subscription_id', message: `template ${template.id} has no root server` }] },
    );
  }
  return template.root_server;
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
