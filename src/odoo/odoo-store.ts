// The Odoo fields of root server records, and the steps every Odoo action shares: loading what a
// set-up needs, keeping the host's secrets, tracked state changes, waiting for health (failed with
// the end of Odoo's log when it does not come), and removing a service.
import type { AppContext } from '../context.js';
import { runLoggedStep } from '../core/action-log.js';
import { authorOfUser } from '../core/chatter.js';
import { ConflictError, NotFoundError, UserError } from '../core/errors.js';
import type { RootServer } from '../generated/prisma/client.js';
import { loadRootServer, type RemoteSession, requireConfirmed, updateRootServer } from '../servers/index.js';
import type { OdooLayout } from './odoo-layout.js';
import { logTail, removeService, routingProbe, stopService, waitHealthy } from './odoo-scripts.js';

type StateChange = Parameters<typeof updateRootServer>[2];
const STEP_TIMEOUT_MS = 2 * 60_000;

export type OdooHostStore = ReturnType<typeof odooHostStore>;

export function odooHostStore(ctx: Pick<AppContext, 'db' | 'secretBox' | 'config'>) {
  async function setState(id: number, data: StateChange, userId: number | null) {
    const author = await authorOfUser(ctx.db, userId);
    return ctx.db.$transaction((tx) => updateRootServer(tx, id, data, author));
  }

  const store = {
    setState,

    async loadForSetup(p: { root_server_id: number; odoo_version_id: number; postgresql_server_id: number }) {
      const server = await loadRootServer(ctx.db, p.root_server_id);
      requireConfirmed(server);
      const version = await ctx.db.odooVersion.findUnique({ where: { id: p.odoo_version_id } });
      if (!version) throw new UserError(`Odoo version ${p.odoo_version_id} does not exist (any more)`);
      const pgServer = await ctx.db.postgresqlServer.findUnique({ where: { id: p.postgresql_server_id } });
      if (!pgServer) throw new UserError(`PostgreSQL server ${p.postgresql_server_id} does not exist (any more)`);
      return { server, version, pgServer };
    },

    /** The host's role and its secrets, encrypted, on its record (never through the API); answers the sealed role password. */
    async keepSecrets(id: number, s: { pgServerId: number; role: string; dbPassword: string; adminPasswd: string }) {
      const sealed = await ctx.secretBox.encrypt(s.dbPassword);
      await ctx.db.rootServer.update({
        where: { id },
        data: {
          odoo_postgresql_server_id: s.pgServerId,
          odoo_db_user: s.role,
          odoo_db_password: sealed,
          odoo_admin_passwd: await ctx.secretBox.encrypt(s.adminPasswd),
        },
      });
      return sealed;
    },

    /** The secret svc's own calls to the host's Odoo carry, kept (encrypted) before it is written anywhere. */
    async keepHostSecret(id: number, secret: string) {
      await ctx.db.rootServer.update({ where: { id }, data: { odoo_host_secret: await ctx.secretBox.encrypt(secret) } });
    },

    /**
     * The templates on that PostgreSQL server whose copies the role owns sign in to them with its
     * password (build copied it): once the role has a new one, so do they.
     */
    async followRolePassword(pgServerId: number, role: string, sealed: string) {
      await ctx.db.databaseTemplate.updateMany({
        where: { postgresql_server_id: pgServerId, owner_role: role, OR: [{ owner_password: null }, { NOT: { owner_password: sealed } }] },
        data: { owner_password: sealed },
      });
    },

    /** A step outside the SSH session (PostgreSQL), in the server's action log; `input` holds no secret. */
    logged<T>(id: number, userId: number | null, jobId: string, input: string, work: () => Promise<T>) {
      const entry = {
        model_name: 'svc.root.server' as const,
        rec_id: id,
        action_type: 'database' as const,
        user_id: userId,
        job_id: jobId,
      };
      return runLoggedStep(ctx.db, { ...entry, input_text: input }, work, (out) => JSON.stringify(out));
    },

    /** Waits for /web/health; when it does not come, the server is `failed` with the end of Odoo's log. */
    async waitHealthy(session: RemoteSession, l: OdooLayout, port: number, id: number, userId: number | null) {
      const seconds = Math.ceil(ctx.config.ODOO_HEALTH_TIMEOUT_MS / 1000);
      const healthy = await session.run(waitHealthy(port, seconds), { timeoutMs: ctx.config.ODOO_HEALTH_TIMEOUT_MS + STEP_TIMEOUT_MS });
      if (healthy.exitCode === 0) return healthy.stdout.trim();
      const tail = await session.run(logTail(l), { timeoutMs: STEP_TIMEOUT_MS });
      const said = healthy.stderr.trim() || healthy.stdout.trim() || 'no answer';
      const error = session.mask(`${said}\n--- end of ${l.log} ---\n${tail.stdout.trim()}`).slice(-8000);
      await setState(id, { odoo_state: 'failed', odoo_error: error }, userId);
      throw new UserError(session.mask(`Odoo on port ${port} did not become healthy: ${said}`));
    },

    /**
     * Proves svc's routing is loaded in the Odoo answering on the port (routingProbe). When it is
     * not, that Odoo is stopped (fails closed: through the proxy it would serve templates, standbys
     * and any database by RPC) and the server is `failed` with the reason and the end of Odoo's log.
     */
    async requireRouting(session: RemoteSession, l: OdooLayout, port: number, id: number, userId: number | null) {
      const probe = await session.run(routingProbe(port), { timeoutMs: STEP_TIMEOUT_MS });
      if (probe.exitCode === 0) return probe.stdout.trim();
      const said = probe.stderr.trim() || probe.stdout.trim() || 'no answer';
      const stopped = await session.run(stopService(l), { timeoutMs: STEP_TIMEOUT_MS });
      const tail = await session.run(logTail(l), { timeoutMs: STEP_TIMEOUT_MS });
      const action = stopped.exitCode === 0 ? 'Odoo was stopped' : `stopping Odoo failed too: ${stopped.stderr.trim()}`;
      const error = session.mask(`svc's routing is not loaded: ${said} (${action})\n--- end of ${l.log} ---\n${tail.stdout.trim()}`);
      await setState(id, { odoo_state: 'failed', odoo_error: error.slice(-8000) }, userId);
      throw new UserError(
        session.mask(`svc's routing is not loaded in Odoo on port ${port}: ${said} (${action}; odoo_error has the end of its log)`),
      );
    },

    /** Health, then the routing: what every start of Odoo waits for. */
    async waitReady(session: RemoteSession, l: OdooLayout, port: number, id: number, userId: number | null) {
      const health = await store.waitHealthy(session, l, port, id, userId);
      await store.requireRouting(session, l, port, id, userId);
      return health;
    },

    /** Stops a service and removes its files (its configuration holds the database password). */
    async removeService(session: RemoteSession, l: OdooLayout) {
      await session.check(removeService(l), `Removing the Odoo service ${l.service} failed`, { timeoutMs: STEP_TIMEOUT_MS });
    },
  };
  return store;
}

/** The server, which must have Odoo set up (409 otherwise), with its port. */
export async function loadOdooHost(db: AppContext['db'], id: number): Promise<RootServer & { odoo_http_port: number }> {
  const server = await db.rootServer.findUnique({ where: { id } });
  if (!server) throw new NotFoundError('Root server');
  requireConfirmed(server);
  if (server.odoo_state === 'not_installed' || server.odoo_http_port === null || server.odoo_version_id === null) {
    throw new ConflictError('Odoo is not set up on this root server (actions/setup_odoo)');
  }
  return server as RootServer & { odoo_http_port: number };
}

/**
 * Where a setup puts Odoo: the place the host already has (another is refused: it holds the data and
 * filestores), else the one asked for, else ODOO_BASE_PATH.
 */
export function setupBasePath(
  config: { ODOO_BASE_PATH: string },
  server: Pick<RootServer, 'id' | 'odoo_base_path' | 'odoo_state'>,
  asked: string | undefined,
): string {
  const current = server.odoo_base_path ?? (server.odoo_state === 'not_installed' ? null : config.ODOO_BASE_PATH);
  if (current && asked && asked !== current) {
    throw new ConflictError(
      `Odoo on root server ${server.id} lives in ${current}: base_path cannot change (its data and filestores are there)`,
    );
  }
  return current ?? asked ?? config.ODOO_BASE_PATH;
}
