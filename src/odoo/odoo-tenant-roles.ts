// Customer databases deployed on a host before each had a role of its own (instances'
// tenant-role.ts) are converted by setup_odoo: each is handed from the host's role to its own, its
// credentials file written, the subscription told in its chatter. The host's Odoo is then restarted
// (setup_odoo's own restart), so no connection opened as the host's role stays in its pools: the
// instance is down no longer than that restart. A tenant that cannot be converted keeps working as
// before (the host's role still owns it) and is named in the job's result and its chatter.
import type { AppContext } from '../context.js';
import { postMessage } from '../core/chatter.js';
import type { PostgresqlServer, RootServer } from '../generated/prisma/client.js';
import {
  handOverToTenantRole,
  newRolePassword,
  PLACEMENT_INCLUDE,
  placementOf,
  tenantRoleName,
  writeTenantCredentials,
} from '../instances/index.js';
import type { Audit } from '../servers/index.js';

export interface Conversion {
  converted: string[];
  failed: { database_name: string; error: string }[];
}

/** Hands every tenant of `host` on `pg` still owned by `hostRole` to a role of its own. */
export async function convertTenants(
  ctx: Pick<AppContext, 'db' | 'secretBox' | 'config'>,
  host: RootServer,
  pg: PostgresqlServer,
  hostRole: string,
  audit: Audit,
): Promise<Conversion> {
  const candidates = await ctx.db.subscription.findMany({
    where: { database_role: null, database_created_at: { not: null }, database_oid: { not: null }, database_dropped_at: null },
    include: PLACEMENT_INCLUDE,
    orderBy: { id: 'asc' },
  });
  const result: Conversion = { converted: [], failed: [] };
  for (const sub of candidates) {
    const place = placementOf(sub);
    if (place.host?.id !== host.id || place.pg.id !== pg.id) continue;
    const name = sub.database_name!;
    const made = { name, systemIdentifier: sub.database_system_identifier!, oid: sub.database_oid! };
    const role = tenantRoleName(made);
    try {
      const password = newRolePassword();
      await handOverToTenantRole(ctx.secretBox, pg, made, hostRole, password);
      await writeTenantCredentials(ctx, host, name, { role, password }, { ...audit, operation: 'setup_odoo' });
      await ctx.db.subscription.update({
        where: { id: sub.id },
        data: { database_role: role, database_role_password: await ctx.secretBox.encrypt(password) },
      });
      result.converted.push(name);
      await postMessage(ctx.db, {
        model_name: 'svc.subscription',
        rec_id: sub.id,
        body: `Database ${name} now belongs to a PostgreSQL role of its own (${role}), which Odoo on root server ${host.id} signs in as (setup_odoo).`,
        message_type: 'notification',
      });
    } catch (err) {
      const error = (err as Error).message;
      result.failed.push({ database_name: name, error });
      await postMessage(ctx.db, {
        model_name: 'svc.subscription',
        rec_id: sub.id,
        body: `Database ${name} could not be given a role of its own (setup_odoo on root server ${host.id}): ${error}. It keeps the host's role; run setup_odoo again.`,
        message_type: 'notification',
        subtype_xmlid: 'mail.mt_alert',
      });
    }
  }
  return result;
}
