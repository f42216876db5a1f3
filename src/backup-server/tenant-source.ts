// Where a tenant the backup server is sent by name lives, read from svc's own records: the
// subscription whose database it is, its PostgreSQL server, the role its database is read and
// written as (its own role, or the template's owner role for a database without one; never the
// server's administrator), its Odoo host and the filestore there.
import type { AppContext } from '../context.js';
import { NotFoundError } from '../core/errors.js';
import type { PostgresqlServer, RootServer } from '../generated/prisma/client.js';
import { filestorePath, PLACEMENT_INCLUDE, placementOf } from '../instances/index.js';
import { basePathOf } from '../servers/index.js';

export interface TenantSource {
  subscriptionId: number;
  dbName: string;
  pg: PostgresqlServer;
  /** The tenant's role: password is svc ciphertext (null: a role that signs in without one, e.g. trust). */
  role: { user: string; password: string | null } | null;
  /** The Odoo host holding the filestore; null for a database without one. */
  host: RootServer | null;
  filestore: string | null;
  /** The Odoo series of the host (manifest.json's version), when known. */
  odooVersion: string | null;
  retention: { keepDaily: number; keepWeekly: number; keepMonthly: number };
}

/** The subscription whose live database `dbName` is (made by a deployment, not dropped). */
export async function tenantSource(ctx: Pick<AppContext, 'db' | 'config'>, dbName: string): Promise<TenantSource> {
  const sub = await ctx.db.subscription.findFirst({
    where: { database_name: dbName, database_created_at: { not: null } },
    include: { ...PLACEMENT_INCLUDE },
  });
  if (!sub) throw new NotFoundError(`Database ${dbName}: no subscription of svc has it`);
  const place = placementOf(sub);
  const host = place.host;
  const version = host?.odoo_version_id ? await ctx.db.odooVersion.findUnique({ where: { id: host.odoo_version_id } }) : null;
  return {
    subscriptionId: sub.id,
    dbName,
    pg: place.pg,
    role: place.tenantRole ? { user: place.tenantRole.role, password: place.tenantRole.password } : null,
    host,
    filestore: host ? filestorePath(basePathOf(ctx.config, host), dbName) : null,
    odooVersion: version?.name ?? null,
    retention: { keepDaily: sub.backup_keep_daily, keepWeekly: sub.backup_keep_weekly, keepMonthly: sub.backup_keep_monthly },
  };
}
