// PostgreSQL servers: connection settings with a write-only password, and
// test_connection, which really connects (TLS when the server offers it) and reports the version.
import type { AppContext } from '../context.js';
import { ConflictError, NotFoundError, UserError } from '../core/errors.js';
import { createRecordService } from '../core/records.js';
import { writeActionLog } from '../core/action-log.js';
import { connectPostgresqlServer } from './postgresql-connection.js';
import { postgresqlServerModel } from './postgresql-models.js';

export interface ConnectionReport {
  ok: true;
  version: string;
  server_version: string;
  tls: boolean;
  tls_version: string | null;
}

export function createPostgresqlService(ctx: Pick<AppContext, 'db' | 'secretBox'>) {
  const { db, secretBox } = ctx;
  const records = createRecordService(ctx, postgresqlServerModel, {
    // Customer databases are found on this server: it cannot be pointed at another cluster under them.
    async prepareUpdate(tx, before, _data, moved) {
      const fields = moved.filter((f) => f === 'ip' || f === 'port');
      if (fields.length === 0) return undefined;
      const bound =
        (await tx.subscription.count({
          where: {
            OR: [
              // Being deployed there, or (deployed before subscriptions recorded their server) living there.
              { database_template: { postgresql_server_id: before.id }, OR: [{ state: 'deploying' }, { postgresql_server_id: null }] },
              { postgresql_server_id: before.id },
            ],
            AND: [{ OR: [{ database_created_at: { not: null } }, { state: 'deploying' }] }],
          },
        })) +
        (await tx.standbyDatabase.count({ where: { postgresql_server_id: before.id } })) +
        // The old copies moves keep there (dropped by their recorded identity later).
        (await tx.subscriptionMove.count({ where: { from_postgresql_server_id: before.id, state: 'done', old_dropped_at: null } }));
      if (bound > 0) {
        throw new ConflictError(
          `${bound} subscription or standby database(s) live on this PostgreSQL server: ${fields.join(' and ')} cannot change`,
          {
            fields: fields.map((field) => ({ field, message: 'subscription databases live on this server' })),
          },
        );
      }
      // The passwords of the roles made on this server (templates' owner roles, Odoo hosts' roles) are
      // sent to it too: they do not follow it elsewhere (setup_odoo gives a host role a new one).
      await tx.databaseTemplate.updateMany({
        where: { postgresql_server_id: before.id, owner_password: { not: null } },
        data: { owner_password: null },
      });
      await tx.rootServer.updateMany({
        where: { odoo_postgresql_server_id: before.id, odoo_db_password: { not: null } },
        data: { odoo_db_password: null },
      });
      return undefined;
    },
  });

  return {
    ...records,

    async testConnection(id: number, userId: number | null): Promise<ConnectionReport> {
      const server = await db.postgresqlServer.findUnique({ where: { id } });
      if (!server) throw new NotFoundError('PostgreSQL server');
      const where = `${server.username ?? 'postgres'}@${server.ip}:${server.port}`;
      const log = {
        model_name: 'svc.postgresql.server' as const,
        rec_id: id,
        action_type: 'database' as const,
        input_text: `test_connection ${where}`,
        user_id: userId,
      };
      let report: ConnectionReport;
      try {
        const { client, tls } = await connectPostgresqlServer(secretBox, server);
        try {
          // pg_stat_ssl is the server's own view of this session: proof of what was negotiated.
          const { rows } = await client.query<{ version: string; server_version: string; tls_version: string | null }>(
            `SELECT version() AS version, current_setting('server_version') AS server_version,
                    (SELECT version FROM pg_stat_ssl WHERE pid = pg_backend_pid() AND ssl) AS tls_version`,
          );
          report = { ok: true, ...rows[0]!, tls };
        } finally {
          // Closing a connection the work is done with: a close that fails leaves nothing open (the server ends the session with its socket).
          await client.end().catch(() => {});
        }
      } catch (err) {
        const message = `Could not connect to PostgreSQL at ${where}: ${(err as Error).message}`;
        await writeActionLog(db, { ...log, status: 'failure', output_text: message });
        throw new UserError(message);
      }
      await writeActionLog(db, { ...log, output_text: `${report.version}${report.tls ? ` (TLS ${report.tls_version})` : ' (no TLS)'}` });
      return report;
    },
  };
}
