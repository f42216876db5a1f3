// setup_odoo: makes a root server run an Odoo version, and running it again converges: what is
// already as it should be is left alone, and the running Odoo is restarted only when its source,
// configuration or service file changed (or it was not running). Everything that can fail on bad
// input (packages, the source's checksum and odoo-bin, the PostgreSQL role, its login from the host)
// is done before the running Odoo is touched: such a failure leaves it running its old version.
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import type { Job } from 'bullmq';
import type { AppContext } from '../context.js';
import { MASK } from '../core/action-log.js';
import { UserError } from '../core/errors.js';
import { createOutboundHttp } from '../core/outbound-http.js';
import { OutboundError } from '../core/outbound-error.js';
import { publicJobId } from '../core/queue.js';
import { shellQuote } from '../core/ssh.js';
import type { OdooVersion, RootServer } from '../generated/prisma/client.js';
import { type formatResult, stepFailed as hostStepFailed, openRemoteSession, type RemoteSession } from '../servers/index.js';
import { type HostFacts, odooConfig, sizeWorkers } from './odoo-config.js';
import { assertHostFits } from './odoo-host-fit.js';
import { odooLayout, type OdooLayout } from './odoo-layout.js';
import { ensureRole, odooPasswordHash, randomSecret, roleNameOf } from './odoo-role.js';
import { deployedAddons } from './odoo-deployed-addons.js';
import { listHostModules } from './odoo-modules.js';
import { convertTenants } from './odoo-tenant-roles.js';
import {
  checkDatabaseLogin,
  describeSource,
  HOST_FACTS,
  incomingPath,
  installedSource,
  installPackages,
  prepareHost,
  receiveFile,
  runScript,
  serviceFileTarget,
  serviceRunning,
  startService,
  systemdUnit,
  unpackSource,
  writeIfChanged,
} from './odoo-scripts.js';
import { type OdooHostStore, odooHostStore, setupBasePath } from './odoo-store.js';
import { addonsBundle, installAddons, installedAddons } from './odoo-svc-addons.js';

const INSTALL_TIMEOUT_MS = 20 * 60_000;
const SOURCE_TIMEOUT_MS = 30 * 60_000;
const STEP_TIMEOUT_MS = 2 * 60_000;
/** The largest source tarball downloaded (an Odoo tree with every addon is about 300 MB). */
const MAX_SOURCE_BYTES = 4 * 1024 ** 3;

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

/** A failed step: the job fails with its (masked) output. */
/** A failed step of the host's scripts: exit code 3 is a refusal the script worded itself (on stderr). */
export function stepFailed(session: RemoteSession, what: string, res: Parameters<typeof formatResult>[0]): never {
  return hostStepFailed(session, what, res, res.exitCode === 3 ? res.stderr.trim() : undefined);
}

export function parseFacts(text: string): HostFacts {
  const kv = Object.fromEntries(text.split('\n').map((line) => line.split('=', 2) as [string, string]));
  return { cores: Number(kv.cores) || 1, memoryBytes: Number(kv.memory) || 1024 ** 3, systemd: kv.systemd === 'yes' };
}

/** The Odoo series of `odoo-bin --version` ("Odoo Server 18.0" → 18). */
export function seriesOf(versionLine: string): number {
  const m = /Odoo Server (?:saas~)?(\d+)/.exec(versionLine);
  if (!m) throw new UserError(`odoo-bin --version said "${versionLine.slice(0, 200)}": not an Odoo server`);
  return Number(m[1]);
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

  /** Puts the version's source tree in place when it is not there already; answers whether it changed. */
  async function ensureSource(
    session: RemoteSession,
    l: OdooLayout,
    version: OdooVersion,
    target: { rec_id: number; job_id: string; user_id: number | null },
  ) {
    const present = await session.run(installedSource(l, version.name), { timeoutMs: STEP_TIMEOUT_MS });
    if (present.exitCode === 0 && present.stdout.trim() === version.source_sha256) return false;
    let tarball: string;
    let downloaded = false;
    if (version.source_url.startsWith('file://')) {
      tarball = decodeURIComponent(new URL(version.source_url).pathname);
    } else {
      tarball = incomingPath(l, version.name, randomBytes(6).toString('hex'));
      let download;
      try {
        download = await http.download(
          { model_name: 'svc.root.server', ...target },
          { url: version.source_url },
          { maxRedirects: 3, maxResponseBytes: MAX_SOURCE_BYTES, timeoutMs: SOURCE_TIMEOUT_MS },
        );
      } catch (err) {
        throw err instanceof OutboundError ? new UserError(`Downloading the source of Odoo ${version.name} failed: ${err.message}`) : err;
      }
      const received = await session
        .run(receiveFile(tarball), { stdin: download.body, timeoutMs: SOURCE_TIMEOUT_MS })
        .catch(async (err: Error) => {
          // What arrived of it goes: only a whole, checked tarball is kept (and then unpacked and removed).
          await session.run(`rm -f ${shellQuote(tarball)}`, { timeoutMs: STEP_TIMEOUT_MS }).catch(() => {});
          throw new UserError(`Downloading the source of Odoo ${version.name} failed: ${err.message}`);
        });
      await download.logged;
      if (received.exitCode !== 0) stepFailed(session, `Writing the source of Odoo ${version.name} on the host failed`, received);
      downloaded = true;
    }
    const unpacked = await session.run(unpackSource(l, version.name, tarball, version.source_sha256, downloaded), {
      timeoutMs: SOURCE_TIMEOUT_MS,
    });
    if (unpacked.exitCode !== 0) stepFailed(session, `The source of Odoo ${version.name} (${version.source_url}) was refused`, unpacked);
    return true;
  }

  /** Puts svc's addons on the host when the tree there differs from the repository's; answers whether it changed. */
  async function ensureAddons(session: RemoteSession, l: OdooLayout) {
    const bundle = addonsBundle();
    const present = await session.run(installedAddons(l), { timeoutMs: STEP_TIMEOUT_MS });
    if (present.exitCode !== 0) stepFailed(session, `Reading ${l.svcAddons} failed`, present);
    if (present.stdout.trim() === bundle.sha256) return false;
    const res = await session.run(installAddons(l, bundle.sha256), {
      stdin: Readable.from([bundle.tarball]),
      timeoutMs: STEP_TIMEOUT_MS,
      label: `${installAddons(l, bundle.sha256)} < svc's odoo-addons (${bundle.files} files)`,
    });
    if (res.exitCode !== 0) stepFailed(session, `Writing svc's addons to ${l.svcAddons} failed`, res);
    return true;
  }

  /** Writes a file from stdin when it differs; answers whether it changed. `shown`: the text for the action log. */
  async function writeFile(session: RemoteSession, path: string, mode: string, group: string, content: string, shown: string) {
    const script = writeIfChanged(path, mode, group);
    const res = await session.run(script, { stdin: content, timeoutMs: STEP_TIMEOUT_MS, label: `${script} <<EOF\n${shown}EOF` });
    if (res.exitCode !== 0) stepFailed(session, `Writing ${path} failed`, res);
    return res.stdout.trim() === 'changed';
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
    /** Once the running Odoo was touched, a failure leaves it `failed`; before, its old state. */
    let touched = false;
    /** Refused for PostgreSQL's connections: nothing was done, the server keeps its state. */
    let refused = false;
    try {
      const step = (name: string, percent: number) => job.updateProgress({ step: name, percent });
      await step('facts', 2);
      const factsRes = await session.run(HOST_FACTS, { timeoutMs: STEP_TIMEOUT_MS });
      if (factsRes.exitCode !== 0) stepFailed(session, 'Reading the host (cores, memory) failed', factsRes);
      const facts = parseFacts(factsRes.stdout);
      // Placement derives the host's capacity from its memory (src/placement).
      await ctx.db.rootServer.update({ where: { id: server.id }, data: { memory_bytes: facts.memoryBytes } });
      const sizing = sizeWorkers(facts, payload.workers, payload.max_cron_threads);
      // Before anything changes: the host, sized so, beside the other hosts of its PostgreSQL server.
      await assertHostFits(ctx, pgServer, { id: server.id, workers: sizing.workers, maxCronThreads: payload.max_cron_threads }).catch(
        (err: Error) => {
          refused = true;
          throw err;
        },
      );

      await step('packages', 5);
      const packages = await session.run(installPackages(version.os_packages), { timeoutMs: INSTALL_TIMEOUT_MS });
      if (packages.exitCode !== 0) stepFailed(session, `Installing the OS packages of Odoo ${version.name} failed`, packages);
      const prepared = await session.run(prepareHost(l), { timeoutMs: INSTALL_TIMEOUT_MS });
      if (prepared.exitCode !== 0) stepFailed(session, `Preparing the odoo user and ${l.base} failed`, prepared);

      await step('source', 30);
      const sourceChanged = await ensureSource(session, l, version, { rec_id: server.id, job_id: jobId, user_id: payload.user_id });
      const described = await session.run(describeSource(l, version.name), { timeoutMs: STEP_TIMEOUT_MS });
      if (described.exitCode !== 0) stepFailed(session, `The source of Odoo ${version.name} does not run`, described);
      const lines = described.stdout.trim().split('\n');
      const versionLine = lines[0]!.trim();
      const series = seriesOf(versionLine);
      const addonsDirs = [
        ...lines.filter((x) => x.startsWith('addons=')).map((x) => x.slice(7)),
        ...(await deployedAddons(ctx, session, server.id)),
      ];
      if (sourceChanged) touched = true; // the tree under the running Odoo's path is the new one

      await step('addons', 50);
      const addonsChanged = await ensureAddons(session, l);
      if (addonsChanged) touched = true;

      await step('database role', 60);
      await store.logged(
        server.id,
        payload.user_id,
        jobId,
        `PostgreSQL role ${secrets.role} (LOGIN CREATEDB NOSUPERUSER) on ${pgServer.ip}:${pgServer.port}`,
        () => ensureRole(ctx.secretBox, pgServer, secrets.role, secrets.dbPassword),
      );
      await store.followRolePassword(pgServer.id, secrets.role, secrets.sealed);

      await step('configuration', 70);
      const configOf = async (dbPassword: string, adminPasswdHash: string, hostSecret: string) =>
        odooConfig({
          layout: l,
          source: l.sourceOf(version.name),
          series,
          addonsDirs,
          httpPort: port,
          db: { host: pgServer.ip, port: pgServer.port, user: secrets.role, password: dbPassword },
          adminPasswdHash,
          dbfilter: payload.dbfilter,
          sizing,
          maxCronThreads: payload.max_cron_threads,
          serverWideModules: version.server_wide_modules,
          hostSecret,
        });
      const adminHash = await odooPasswordHash(secrets.adminPasswd);
      const config = await configOf(secrets.dbPassword, adminHash, secrets.hostSecret);
      const configChanged = await writeFile(session, l.config, '640', 'odoo', config, await configOf(MASK, MASK, MASK));
      if (configChanged) touched = true;
      await ctx.db.rootServer.update({
        where: { id: server.id },
        data: { odoo_workers: sizing.workers, odoo_max_cron_threads: payload.max_cron_threads },
      });
      const login = await session.run(checkDatabaseLogin(l), { timeoutMs: STEP_TIMEOUT_MS });
      if (login.exitCode !== 0) stepFailed(session, 'The host cannot reach PostgreSQL as its role', login);
      // What its templates and packages may name (odoo-modules.ts).
      const modules = await listHostModules(ctx, session, server.id, l);

      const target = serviceFileTarget(l, facts.systemd);
      const serviceText = facts.systemd ? systemdUnit(l, l.sourceOf(version.name), version.name) : runScript(l, l.sourceOf(version.name));
      const serviceChanged = await writeFile(session, target.path, target.mode, target.group, serviceText, serviceText);
      if (serviceChanged) touched = true;

      await step('tenant roles', 75);
      const tenants = await convertTenants(ctx, server, pgServer, secrets.role, { user_id: payload.user_id, job_id: jobId });

      await step('start', 80);
      const running = (await session.run(serviceRunning(l), { timeoutMs: STEP_TIMEOUT_MS })).stdout.trim() === 'running';
      // A converted tenant: no pooled connection as the host's role may stay.
      const restart = !running || sourceChanged || addonsChanged || configChanged || serviceChanged || tenants.converted.length > 0;
      if (restart) {
        touched = true;
        // From here the service is this version's on this port, even if it fails: stop and restart reach it.
        await store.setState(server.id, { odoo_http_port: port, odoo_version: { connect: { id: version.id } } }, payload.user_id);
        const started = await session.run(startService(l, port), { timeoutMs: STEP_TIMEOUT_MS });
        if (started.exitCode !== 0) stepFailed(session, `Starting Odoo on port ${port} failed`, started);
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
        version: versionLine,
        http_port: port,
        workers: sizing.workers,
        max_cron_threads: payload.max_cron_threads,
        db_user: secrets.role,
        packages: session.mask(packages.stdout).trim().split('\n').pop() ?? '',
        changed: { source: sourceChanged, addons: addonsChanged, config: configChanged, service: serviceChanged },
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
