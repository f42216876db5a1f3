// setup_odoo: makes a root server run an Odoo version, and running it again converges: what is
// already as it should be is left alone, and the running Odoo is restarted only when its source,
// configuration or service file changed (or it was not running). Everything that can fail on bad
// input (packages, the source's checksum and odoo-bin, the PostgreSQL role, its login from the host)
// is done before the running Odoo is touched: such a failure leaves it running its old version.
// The steps are in odoo-setup-steps.ts; this runs them in order and keeps the server's state.
import type { Job } from 'bullmq';
import type { AppContext } from '../context.js';
import { createOutboundHttp } from '../core/outbound-http.js';
import { publicJobId } from '../core/queue.js';
import type { RootServer } from '../generated/prisma/client.js';
import { openRemoteSession } from '../servers/index.js';
import { sizeWorkers } from './odoo-config.js';
import { assertHostFits } from './odoo-host-fit.js';
import { odooLayout } from './odoo-layout.js';
import { listHostModules } from './odoo-modules.js';
import { ensureRole, odooPasswordHash, randomSecret, roleNameOf } from './odoo-role.js';
import { serviceRunning, startService } from './odoo-scripts.js';
import {
  describe,
  ensureAddons,
  ensureSource,
  prepareOs,
  readFacts,
  STEP_TIMEOUT_MS,
  type SetupRun,
  type SetupSecrets,
  writeConfig,
  writeServiceFile,
} from './odoo-setup-steps.js';
import { type OdooHostStore, odooHostStore, setupBasePath } from './odoo-store.js';
import { convertTenants } from './odoo-tenant-roles.js';

export interface SetupPayload {
  root_server_id: number;
  odoo_version_id: number;
  postgresql_server_id: number;
  http_port?: number | undefined;
  base_path?: string | undefined;
  workers?: number | undefined;
  max_cron_threads: number;
  dbfilter: string;
  user_id: number | null;
}

/** Secrets made once per host and kept (encrypted) on its record, so running set-up again changes nothing. */
async function hostSecrets(ctx: Pick<AppContext, 'secretBox'>, store: OdooHostStore, server: RootServer, pgServerId: number) {
  const samePg = server.odoo_postgresql_server_id === pgServerId;
  const role = samePg && server.odoo_db_user ? server.odoo_db_user : roleNameOf(server);
  const stored = samePg ? await ctx.secretBox.reveal(server.odoo_db_password) : null;
  const dbPassword = stored ?? randomSecret();
  const adminPasswd = (await ctx.secretBox.reveal(server.odoo_admin_passwd)) ?? randomSecret();
  let sealed = server.odoo_db_password;
  // (Another PostgreSQL server: nothing is stored for it.)
  if (!stored || !sealed || !server.odoo_admin_passwd || role !== server.odoo_db_user) {
    // Kept before they are used anywhere: a crash after this point finds them again.
    sealed = await store.keepSecrets(server.id, { pgServerId, role, dbPassword, adminPasswd });
  }
  // svc's own calls to the host's Odoo carry it (the addon serves only tenants to any other request).
  let hostSecret = await ctx.secretBox.reveal(server.odoo_host_secret);
  if (!hostSecret) {
    hostSecret = randomSecret();
    await store.keepHostSecret(server.id, hostSecret);
  }
  return { role, dbPassword, adminPasswd, hostSecret, sealed };
}

export function createOdooSetup(ctx: AppContext) {
  const store = odooHostStore(ctx);
  const http = createOutboundHttp(ctx);

  /** The host's facts and Odoo's workers sized by them. */
  async function sizeHost(run: SetupRun, payload: SetupPayload) {
    const facts = await readFacts(run);
    // Placement derives the host's capacity from its memory (src/placement).
    await ctx.db.rootServer.update({ where: { id: run.server.id }, data: { memory_bytes: facts.memoryBytes } });
    return { facts, sizing: sizeWorkers(facts, payload.workers, payload.max_cron_threads) };
  }

  /** The host's PostgreSQL role (LOGIN CREATEDB), and the templates whose copies it owns follow its password. */
  async function databaseRole(run: SetupRun, secrets: SetupSecrets & { sealed: string }) {
    const { server, pgServer, audit } = run;
    const input = `PostgreSQL role ${secrets.role} (LOGIN CREATEDB NOSUPERUSER) on ${pgServer.ip}:${pgServer.port}`;
    await store.logged(server.id, audit.user_id, audit.job_id, input, () =>
      ensureRole(ctx.secretBox, pgServer, secrets.role, secrets.dbPassword),
    );
    await store.followRolePassword(pgServer.id, secrets.role, secrets.sealed);
  }

  /** Starts (or restarts) the service; from here it is this version's on this port, even if it fails. */
  async function start(run: SetupRun) {
    const { server, version, l, audit } = run;
    await store.setState(server.id, { odoo_http_port: l.port, odoo_version: { connect: { id: version.id } } }, audit.user_id);
    await run.session.check(startService(l), `Starting Odoo on port ${l.port} failed`, { timeoutMs: STEP_TIMEOUT_MS });
  }

  return async function setup(payload: SetupPayload, job: Job) {
    const jobId = publicJobId(job.queueName, job.id!);
    const { server, version, pgServer } = await store.loadForSetup(payload);
    const before = { state: server.odoo_state, port: server.odoo_http_port };
    const port = payload.http_port ?? server.odoo_http_port ?? ctx.config.ODOO_HTTP_PORT;
    const l = odooLayout(setupBasePath(ctx.config, server, payload.base_path), port);
    const secrets = await hostSecrets(ctx, store, server, pgServer.id);
    // Its job recorded with the state: a job Redis lost is found (odoo-lost-setups.ts).
    await store.setState(server.id, { odoo_state: 'installing', odoo_base_path: l.base, odoo_job_id: jobId }, payload.user_id);

    const session = await openRemoteSession(ctx, server, {
      user_id: payload.user_id,
      job_id: jobId,
      secrets: [secrets.dbPassword, secrets.adminPasswd, secrets.hostSecret],
    });
    const run: SetupRun = {
      ctx,
      session,
      l,
      server,
      version,
      pgServer,
      audit: { rec_id: server.id, job_id: jobId, user_id: payload.user_id },
    };
    const step = (name: string, percent: number) => job.updateProgress({ step: name, percent });
    /** Once the running Odoo was touched, a failure leaves it `failed`; before, its old state. */
    let touched = false;
    /** Refused for PostgreSQL's connections: nothing was done, the server keeps its state. */
    let refused = false;
    try {
      await step('facts', 2);
      const { facts, sizing } = await sizeHost(run, payload);
      // Before anything changes: the host, sized so, beside the other hosts of its PostgreSQL server.
      await assertHostFits(ctx, pgServer, { id: server.id, workers: sizing.workers, maxCronThreads: payload.max_cron_threads }).catch(
        (err: Error) => {
          refused = true;
          throw err;
        },
      );
      await step('packages', 5);
      const packages = await prepareOs(run);
      await step('source', 30);
      const changed = { source: await ensureSource(run, http), addons: false, config: false, service: false };
      const source = await describe(run);
      touched ||= changed.source; // the tree under the running Odoo's path is the new one
      await step('addons', 50);
      changed.addons = await ensureAddons(run);
      touched ||= changed.addons;
      await step('database role', 60);
      await databaseRole(run, secrets);
      await step('configuration', 70);
      const config = { ...source, sizing, maxCronThreads: payload.max_cron_threads, dbfilter: payload.dbfilter };
      changed.config = await writeConfig(run, secrets, await odooPasswordHash(secrets.adminPasswd), config);
      touched ||= changed.config;
      await ctx.db.rootServer.update({
        where: { id: server.id },
        data: { odoo_workers: sizing.workers, odoo_max_cron_threads: payload.max_cron_threads },
      });
      // What its templates and packages may name (odoo-modules.ts).
      const modules = await listHostModules(ctx, session, server.id, l);
      changed.service = await writeServiceFile(run, facts.systemd);
      touched ||= changed.service;
      await step('tenant roles', 75);
      const tenants = await convertTenants(ctx, server, pgServer, secrets.role, { user_id: payload.user_id, job_id: jobId });

      await step('start', 80);
      const running =
        (await session.check(serviceRunning(l), 'Reading whether Odoo runs failed', { timeoutMs: STEP_TIMEOUT_MS })).stdout.trim() ===
        'running';
      // A converted tenant: no pooled connection as the host's role may stay.
      const restart = !running || Object.values(changed).some(Boolean) || tenants.converted.length > 0;
      if (restart) {
        touched = true;
        await start(run);
      }
      await step('health', 90);
      await store.waitReady(session, l, port, server.id, payload.user_id);
      // Moved to another port: the service on the old one goes, with its files (its configuration holds the password).
      if (before.port !== null && before.port !== port) await store.removeService(session, odooLayout(l.base, before.port));
      await store.setState(
        server.id,
        { odoo_state: 'running', odoo_error: null, odoo_http_port: port, odoo_version: { connect: { id: version.id } } },
        payload.user_id,
      );
      await step('done', 100);
      return {
        odoo_state: 'running' as const,
        version: source.versionLine,
        http_port: port,
        workers: sizing.workers,
        max_cron_threads: payload.max_cron_threads,
        db_user: secrets.role,
        packages,
        changed,
        restarted: restart,
        modules: modules.length,
        tenant_roles: tenants,
      };
    } catch (err) {
      const current = await ctx.db.rootServer.findUnique({ where: { id: server.id }, select: { odoo_state: true } });
      if (current?.odoo_state === 'installing') {
        const keep = refused || (!touched && before.state !== 'not_installed' && before.state !== 'installing');
        await store.setState(
          server.id,
          keep ? { odoo_state: before.state } : { odoo_state: 'failed', odoo_error: session.mask((err as Error).message).slice(-4000) },
          payload.user_id,
        );
      }
      throw err;
    } finally {
      session.close();
    }
  };
}
