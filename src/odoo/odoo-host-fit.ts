// Whether an Odoo host, sized as setup_odoo is about to write it, fits beside the other hosts svc set
// up on its PostgreSQL server (the numbers: odoo-connections.ts). Checked by setup_odoo's route when
// the workers are given, and by its job once the host's facts are read, before anything changes.
import type { AppContext } from '../context.js';
import { ConflictError } from '../core/errors.js';
import type { PostgresqlServer } from '../generated/prisma/client.js';
import { onServer, serverWhere } from '../instances/index.js';
import { type OtherHost, postgresqlRoom, sizingRefusal } from './odoo-connections.js';

/** The other hosts svc set up on the PostgreSQL server, as their last setup_odoo sized them. */
export async function otherHosts(db: AppContext['db'], pgServerId: number, hostId: number): Promise<OtherHost[]> {
  const rows = await db.rootServer.findMany({
    where: {
      odoo_postgresql_server_id: pgServerId,
      id: { not: hostId },
      odoo_state: { not: 'not_installed' },
      odoo_workers: { not: null },
    },
    select: { id: true, odoo_workers: true, odoo_max_cron_threads: true },
    orderBy: { id: 'asc' },
  });
  return rows.map((r) => ({ id: r.id, workers: r.odoo_workers!, maxCronThreads: r.odoo_max_cron_threads ?? 0 }));
}

/** A ConflictError (409) with the numbers unless the host, sized so, fits beside the others on the server. */
export async function assertHostFits(ctx: Pick<AppContext, 'db' | 'secretBox'>, pgServer: PostgresqlServer, host: OtherHost) {
  const [others, settings, room] = await Promise.all([
    otherHosts(ctx.db, pgServer.id, host.id),
    ctx.db.rolloutSettings.findUnique({ where: { id: 1 } }),
    onServer(ctx.secretBox, pgServer, postgresqlRoom),
  ]);
  const refusal = sizingRefusal(serverWhere(pgServer), room, host, others, settings?.tenants_per_host ?? 1);
  if (refusal) throw new ConflictError(refusal);
}
