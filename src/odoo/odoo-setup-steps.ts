// The steps of setup_odoo (odoo-setup.ts runs them in order). Each converges: what is already as it
// should be is left alone, and each answers whether it changed what the running Odoo uses (then it
// is restarted). Every host program's failure fails the step with its output (session.check).
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import type { AppContext } from '../context.js';
import { MASK } from '../core/action-log.js';
import { UserError } from '../core/errors.js';
import type { OutboundHttp } from '../core/outbound-http.js';
import { OutboundError } from '../core/outbound-error.js';
import { shellQuote } from '../core/ssh.js';
import type { OdooVersion, PostgresqlServer, RootServer } from '../generated/prisma/client.js';
import type { RemoteSession } from '../servers/index.js';
import { type HostFacts, odooConfig, type Sizing } from './odoo-config.js';
import { deployedAddons } from './odoo-deployed-addons.js';
import type { OdooLayout } from './odoo-layout.js';
import {
  checkDatabaseLogin,
  describeSource,
  hostFacts,
  incomingPath,
  installedSource,
  installPackages,
  prepareHost,
  receiveFile,
  runScript,
  serviceFileTarget,
  systemdUnit,
  unpackSource,
  writeIfChanged,
} from './odoo-scripts.js';
import { addonsBundle, installAddons, installedAddons } from './odoo-svc-addons.js';

const INSTALL_TIMEOUT_MS = 20 * 60_000;
const SOURCE_TIMEOUT_MS = 30 * 60_000;
export const STEP_TIMEOUT_MS = 2 * 60_000;
/** The largest source tarball downloaded (an Odoo tree with every addon is about 300 MB). */
const MAX_SOURCE_BYTES = 4 * 1024 ** 3;

/** What every step works on: the host's session, its layout, the version and who asked. */
export interface SetupRun {
  ctx: AppContext;
  session: RemoteSession;
  l: OdooLayout;
  server: RootServer;
  version: OdooVersion;
  pgServer: PostgresqlServer;
  audit: { rec_id: number; job_id: string; user_id: number | null };
}

/** The secrets a host's Odoo is configured with (its role's password, its admin password, the host's secret). */
export interface SetupSecrets {
  role: string;
  dbPassword: string;
  adminPasswd: string;
  hostSecret: string;
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

/** The host's cores, memory and whether systemd runs. */
export async function readFacts({ session }: SetupRun): Promise<HostFacts> {
  const res = await session.check(hostFacts(), 'Reading the host (cores, memory) failed', { timeoutMs: STEP_TIMEOUT_MS });
  return parseFacts(res.stdout);
}

/** The OS packages of the version, the odoo user and the base directory's folders; answers what apt-get said last. */
export async function prepareOs({ session, l, version }: SetupRun): Promise<string> {
  const opts = { timeoutMs: INSTALL_TIMEOUT_MS };
  const packages = await session.check(
    installPackages(version.os_packages),
    `Installing the OS packages of Odoo ${version.name} failed`,
    opts,
  );
  await session.check(prepareHost(l), `Preparing the odoo user and ${l.base} failed`, opts);
  return session.mask(packages.stdout).trim().split('\n').pop() ?? '';
}

/** Downloads an https source onto the host (on the command's stdin); answers where it is. */
async function download(run: SetupRun, http: OutboundHttp): Promise<string> {
  const { session, l, version } = run;
  const tarball = incomingPath(l, version.name, randomBytes(6).toString('hex'));
  const failed = (why: string) => new UserError(`Downloading the source of Odoo ${version.name} failed: ${why}`);
  let fetched;
  try {
    fetched = await http.download(
      { model_name: 'svc.root.server', ...run.audit },
      { url: version.source_url },
      { maxRedirects: 3, maxResponseBytes: MAX_SOURCE_BYTES, timeoutMs: SOURCE_TIMEOUT_MS },
    );
  } catch (err) {
    throw err instanceof OutboundError ? failed(err.message) : err;
  }
  // Written as it arrives; the download's own log is complete once the body is consumed.
  const what = `Writing the source of Odoo ${version.name} on the host failed`;
  try {
    await Promise.all([session.check(receiveFile(tarball), what, { stdin: fetched.body, timeoutMs: SOURCE_TIMEOUT_MS }), fetched.logged]);
  } catch (e) {
    // The host's refusal as check words it; anything else ended the download itself.
    const err = e instanceof UserError ? e : failed((e as Error).message);
    // What arrived of it goes: only a whole, checked tarball is kept (and then unpacked and removed).
    const left = await session.check(`rm -f ${shellQuote(tarball)}`, `Removing ${tarball} failed`, { timeoutMs: STEP_TIMEOUT_MS }).then(
      () => '',
      (again: Error) => ` (${again.message})`,
    );
    throw left ? new UserError(`${err.message}${left}`) : err;
  }
  return tarball;
}

/** Puts the version's source tree in place when it is not there already; answers whether it changed. */
export async function ensureSource(run: SetupRun, http: OutboundHttp): Promise<boolean> {
  const { session, l, version } = run;
  const present = await session.run(installedSource(l, version.name), { timeoutMs: STEP_TIMEOUT_MS });
  if (present.exitCode === 0 && present.stdout.trim() === version.source_sha256) return false;
  const local = version.source_url.startsWith('file://');
  const tarball = local ? decodeURIComponent(new URL(version.source_url).pathname) : await download(run, http);
  await session.check(
    unpackSource(l, version.name, tarball, version.source_sha256, !local),
    `The source of Odoo ${version.name} (${version.source_url}) was refused`,
    { timeoutMs: SOURCE_TIMEOUT_MS },
  );
  return true;
}

/** The version line of the source, its series, and the addons path: Odoo's directories, then the git deploy paths. */
export async function describe(run: SetupRun) {
  const { session, l, version } = run;
  const described = await session.check(describeSource(l.sourceOf(version.name)), `The source of Odoo ${version.name} does not run`, {
    timeoutMs: STEP_TIMEOUT_MS,
  });
  const lines = described.stdout.trim().split('\n');
  const versionLine = lines[0]!.trim();
  const addonsDirs = [
    ...lines.filter((x) => x.startsWith('addons=')).map((x) => x.slice(7)),
    ...(await deployedAddons(run.ctx, session, run.server.id)),
  ];
  return { versionLine, series: seriesOf(versionLine), addonsDirs };
}

/** Puts svc's addons on the host when the tree there differs from the repository's; answers whether it changed. */
export async function ensureAddons({ session, l }: SetupRun): Promise<boolean> {
  const bundle = addonsBundle();
  const present = await session.check(installedAddons(l), `Reading ${l.svcAddons} failed`, { timeoutMs: STEP_TIMEOUT_MS });
  if (present.stdout.trim() === bundle.sha256) return false;
  await session.check(installAddons(l, bundle.sha256), `Writing svc's addons to ${l.svcAddons} failed`, {
    stdin: Readable.from([bundle.tarball]),
    timeoutMs: STEP_TIMEOUT_MS,
    label: `${installAddons(l, bundle.sha256)} < svc's odoo-addons (${bundle.files} files)`,
  });
  return true;
}

/** Writes a file from stdin when it differs; answers whether it changed. `shown`: the text for the action log. */
async function writeFile(session: RemoteSession, target: { path: string; mode: string; group: string }, content: string, shown: string) {
  const command = writeIfChanged(target.path, target.mode, target.group);
  const res = await session.check(command, `Writing ${target.path} failed`, {
    stdin: content,
    timeoutMs: STEP_TIMEOUT_MS,
    label: `${command} <<EOF\n${shown}EOF`,
  });
  return res.stdout.trim() === 'changed';
}

/**
 * Odoo's configuration (the action log shows it with its secrets masked); answers whether it
 * changed. Then checks that the host reaches PostgreSQL as its role with it.
 */
export async function writeConfig(
  run: SetupRun,
  secrets: SetupSecrets,
  adminPasswdHash: string,
  o: { series: number; addonsDirs: string[]; sizing: Sizing; maxCronThreads: number; dbfilter: string },
): Promise<boolean> {
  const { session, l, version, pgServer } = run;
  const configOf = (dbPassword: string, adminHash: string, hostSecret: string) =>
    odooConfig({
      layout: l,
      source: l.sourceOf(version.name),
      series: o.series,
      addonsDirs: o.addonsDirs,
      httpPort: l.port,
      db: { host: pgServer.ip, port: pgServer.port, user: secrets.role, password: dbPassword },
      adminPasswdHash: adminHash,
      dbfilter: o.dbfilter,
      sizing: o.sizing,
      maxCronThreads: o.maxCronThreads,
      serverWideModules: version.server_wide_modules,
      hostSecret,
    });
  const config = await configOf(secrets.dbPassword, adminPasswdHash, secrets.hostSecret);
  const changed = await writeFile(session, { path: l.config, mode: '640', group: 'odoo' }, config, await configOf(MASK, MASK, MASK));
  await session.check(checkDatabaseLogin(l), 'The host cannot reach PostgreSQL as its role', { timeoutMs: STEP_TIMEOUT_MS });
  return changed;
}

/** The systemd unit, or the supervisor script where systemd does not run; answers whether it changed. */
export async function writeServiceFile({ session, l, version }: SetupRun, systemd: boolean): Promise<boolean> {
  const source = l.sourceOf(version.name);
  const text = systemd ? systemdUnit(l, source, version.name) : runScript(l, source);
  return writeFile(session, serviceFileTarget(l, systemd), text, text);
}
