// Where a subscription's database and instance live. The deployment that creates the database
// records its PostgreSQL server and Odoo host on the subscription when it places it (a host of the
// template's pool, src/placement); a move changes them. Before a deployment, the template's servers.
import type { Db, DbTx } from '../core/db.js';
import { UserError } from '../core/errors.js';
import type { DatabaseTemplate, PostgresqlServer, RootServer, Subscription } from '../generated/prisma/client.js';
import { tenantRoleOf, type TenantRole } from './tenant-session.js';

export interface Placement {
  template: DatabaseTemplate;
  pg: PostgresqlServer;
  /** The Odoo host serving the instance and holding its filestore; null: a database without one. */
  host: RootServer | null;
  /**
   * The role svc is inside the tenant's database: its own role when it has one, else the template's
   * owner_role, or after a move the new host's own role.
   */
  tenantRole: TenantRole | null;
}

type Placed = Pick<
  Subscription,
  'id' | 'database_created_at' | 'placed_at' | 'postgresql_server_id' | 'root_server_id' | 'database_role' | 'database_role_password'
> & {
  postgresql_server: PostgresqlServer | null;
  root_server: RootServer | null;
  database_template: (DatabaseTemplate & { postgresql_server: PostgresqlServer; root_server: RootServer | null }) | null;
};

/** What to include when loading subscriptions whose placement is needed. */
export const PLACEMENT_INCLUDE = {
  postgresql_server: true,
  root_server: true,
  database_template: { include: { postgresql_server: true, root_server: true } },
} as const;

/** The placement of a subscription loaded with PLACEMENT_INCLUDE; a UserError without a template. */
export function placementOf(sub: Placed): Placement {
  const template = sub.database_template;
  if (!template) throw new UserError(`Subscription ${sub.id} has no database template, so where its database lives is unknown`);
  // Placed by a deployment (src/placement) but not yet made: where the deployment puts it.
  if (!sub.postgresql_server || (!sub.database_created_at && !sub.placed_at)) {
    return { template, pg: template.postgresql_server, host: template.root_server, tenantRole: tenantRoleOf(template) };
  }
  const host = sub.root_server;
  // Its own role (tenant-role.ts), wherever it lives.
  if (sub.database_role)
    return { template, pg: sub.postgresql_server, host, tenantRole: { role: sub.database_role, password: sub.database_role_password } };
  const moved = sub.root_server_id !== template.root_server_id || sub.postgresql_server_id !== template.postgresql_server_id;
  const tenantRole = moved && host?.odoo_db_user ? { role: host.odoo_db_user, password: host.odoo_db_password } : tenantRoleOf(template);
  return { template, pg: sub.postgresql_server, host, tenantRole };
}

/** Loads the subscription's placement. */
export async function loadPlacement(db: Db | DbTx, id: number): Promise<Placement> {
  const sub = await db.subscription.findUnique({ where: { id }, include: PLACEMENT_INCLUDE });
  if (!sub) throw new UserError(`Subscription ${id} does not exist`);
  return placementOf(sub);
}
