// The command lines of the programs setup_odoo and the Odoo actions run on a host (src/odoo/host/*,
// POSIX sh and /usr/bin/python3, as root through the session's sudo). Each program is a file, sent
// over SSH with its arguments quoted one by one (core/host-program.ts); secrets never appear on a
// command line (the configuration goes on stdin). Exit code 3 is an outcome the program explains on
// stderr (a checksum that differs, a tarball without odoo-bin), not a crash: session.check fails the
// step with that text alone.
import { hostProgram, pythonCommand, shCommand } from '../core/host-program.js';
import { shellQuote as q } from '../core/ssh.js';
import type { OdooLayout } from './odoo-layout.js';

const program = (name: string) => hostProgram(new URL(`./host/${name}`, import.meta.url));

const HOST_FACTS = program('host-facts.sh');
const INSTALL_PACKAGES = program('install-packages.sh');
const PREPARE_HOST = program('prepare-host.sh');
const ODOO_SOURCE = program('odoo-source.sh');
const ADDONS_DIRS = program('addons-dirs.sh');
const WRITE_IF_CHANGED = program('write-if-changed.sh');
const CHECK_DB_LOGIN = program('check_db_login.py');
const ODOO_SERVICE = program('odoo-service.sh');
const ODOO_PROCESSES = program('odoo_processes.py');
const ROUTING_PROBE = program('routing_probe.py');
/** svc's one poll of an Odoo's /web/health (setup, restarts, the graceful restart's new Odoo, odoo_status). */
const WEB_HEALTH = program('web_health.py');
/** odoo-bin started with SO_REUSEPORT on its sockets (the graceful restart's two Odoos share the port). */
const LAUNCHER_PY = program('launcher.py');

/** The host's cores, memory (the cgroup's limit when lower) and whether systemd runs: key=value lines. */
export const hostFacts = () => shCommand(HOST_FACTS, 'host-facts');

/** Installs the packages that are missing (none missing: nothing runs). */
export const installPackages = (packages: readonly string[]) => shCommand(INSTALL_PACKAGES, 'install-packages', ...packages);

/** The odoo system user and the directories; data_dir and what is in it become odoo's. */
export const prepareHost = (l: OdooLayout) => shCommand(PREPARE_HOST, 'prepare-host', l.base, l.dataDir, l.tenantRoles);

/** Prints the SHA-256 the version's tree was unpacked from ("none" when it is not there). */
export const installedSource = (l: OdooLayout, version: string) => shCommand(ODOO_SOURCE, 'odoo-source', 'installed', l.sourceOf(version));

/** Where an https source is written while it arrives (on stdin), before it is checked. */
export const incomingPath = (l: OdooLayout, version: string, token: string) => `${l.versionsDir}/.incoming-${version}-${token}.tar.gz`;

export const receiveFile = (path: string) => `umask 077; mkdir -p ${q(path.replace(/\/[^/]*$/, ''))} && cat > ${q(path)}`;

/**
 * Checks the tarball (its SHA-256, an odoo-bin at its top or in its one top directory), unpacks it
 * beside the version's current tree, checks that it runs with /usr/bin/python3 (`--version`), and
 * only then puts it in place of the old tree. Any failure before that removes what it unpacked and
 * leaves the old tree (and the Odoo running from it) alone. `removeTarball`: an https download.
 */
export const unpackSource = (l: OdooLayout, version: string, tarball: string, sha256: string, removeTarball: boolean) =>
  shCommand(ODOO_SOURCE, 'odoo-source', 'unpack', l.versionsDir, version, tarball, sha256, removeTarball ? 'yes' : 'no');

/**
 * Prints the version line of a source tree (e.g. "Odoo Server 18.0", the first line) and
 * `addons=<dir>` for each of its addons directories; exit code 3 when it has none.
 */
export const describeSource = (source: string) => shCommand(ODOO_SOURCE, 'odoo-source', 'describe', source);

/** Prints `addons=<path>` for each of `paths` that is a directory holding a module (a folder with a manifest). */
export const addonsDirsAmong = (paths: readonly string[]) => shCommand(ADDONS_DIRS, 'addons-dirs', ...paths);

/** Writes stdin to `path` (root:`group`, `mode`) when it differs from what is there; prints changed/unchanged. */
export const writeIfChanged = (path: string, mode: string, group = 'odoo') =>
  shCommand(WRITE_IF_CHANGED, 'write-if-changed', path, mode, group);

/** Checks that Odoo's role can sign in to PostgreSQL with what the configuration says, from this host. */
export const checkDatabaseLogin = (l: OdooLayout) => pythonCommand(CHECK_DB_LOGIN, l.config);

/**
 * The supervisor script where systemd does not run: Odoo as odoo, started again 2 s after it stops,
 * while the `enabled` flag exists and the supervisor is the current one (its token, the first
 * argument, is in `current`: a graceful restart hands over to a new supervisor that way).
 */
export function runScript(l: OdooLayout, source: string): string {
  const current = q(`${l.runDir}/current`);
  return [
    '#!/bin/sh',
    `# Written by svc (setup_odoo): runs Odoo on port ${l.service.slice(5)} as odoo, and again 2 s after it stops,`,
    `# while ${l.runDir}/enabled exists (stop_odoo removes it and stops the process group) and this`,
    `# supervisor is the current one (its token, $1, is in ${l.runDir}/current).`,
    'GEN="$' + '{1:-}"',
    `while [ -f ${q(`${l.runDir}/enabled`)} ] && { [ -z "$GEN" ] || [ "$(cat ${current} 2>/dev/null)" = "$GEN" ]; }; do`,
    `  setpriv --reuid=odoo --regid=odoo --init-groups env HOME=${q(l.dataDir)} ${pythonCommand(LAUNCHER_PY, `${source}/odoo-bin`, '-c', l.config)} >> ${q(l.log)} 2>&1`,
    '  sleep 2',
    'done',
    '',
  ].join('\n');
}

/** The systemd unit where systemd runs. */
export function systemdUnit(l: OdooLayout, source: string, version: string): string {
  return [
    '# Written by svc (setup_odoo).',
    '[Unit]',
    `Description=Odoo ${version} on port ${l.service.slice(5)} (svc)`,
    'After=network-online.target postgresql.service',
    '',
    '[Service]',
    'Type=simple',
    'User=odoo',
    'Group=odoo',
    `Environment=HOME=${l.dataDir}`,
    `ExecStart=/usr/bin/python3 ${source}/odoo-bin -c ${l.config}`,
    `StandardOutput=append:${l.log}`,
    'StandardError=inherit',
    'Restart=always',
    'RestartSec=2',
    'KillMode=mixed',
    'TimeoutStopSec=30',
    '',
    '[Install]',
    'WantedBy=multi-user.target',
    '',
  ].join('\n');
}

/** Where the service file goes: the unit under systemd, the supervisor script otherwise. */
export function serviceFileTarget(l: OdooLayout, systemd: boolean) {
  return systemd ? { path: l.unit, mode: '644', group: 'root' } : { path: l.runScript, mode: '750', group: 'root' };
}

/** host/odoo-service.sh on the service of `l` (its port). */
const service = (l: OdooLayout, action: string, ...more: (string | number)[]) =>
  shCommand(ODOO_SERVICE, 'odoo-service', action, l.service, l.runDir, l.runScript, l.log, l.unit, l.config, l.port, ...more);

/** Prints "running" when the service runs, else "stopped". */
export const serviceRunning = (l: OdooLayout) => service(l, 'state');

/**
 * Starts the service only when it should run and does not (a reboot without systemd, a crash):
 * prints "running" when it runs, "disabled" when stop_odoo stopped it, and starts it otherwise.
 */
export const startIfStopped = (l: OdooLayout) => service(l, 'start-if-stopped');

/** Stops the service (and keeps it from starting again: disabled, or the supervisor's flag removed). */
export const stopService = (l: OdooLayout) => service(l, 'stop');

/** (Re)starts the service; a port held by another program is refused (exit code 3) before anything stops. */
export const startService = (l: OdooLayout) => service(l, 'start');

/**
 * Restarts a running service without refusing a request (see host/odoo-service.sh): the old Odoo
 * stops only once the new one answers within `seconds`; if it does not, it is stopped and the old
 * one keeps serving (exit code 3).
 */
export const gracefulRestart = (l: OdooLayout, seconds: number) =>
  service(l, 'restart-gracefully', Math.max(1, Math.trunc(seconds)), WEB_HEALTH);

/** Stops a service and removes its files (its configuration holds the database password). */
export const removeService = (l: OdooLayout) => service(l, 'remove');

/** Prints `service=running|stopped` and `workers=<n>` (only that line of the configuration). */
export const serviceStatus = (l: OdooLayout) => service(l, 'status');

/** Waits until /web/health answers 200 on the host, at most `seconds` (0: asks once). */
export const waitHealthy = (port: number, seconds: number) => pythonCommand(WEB_HEALTH, port, seconds);

/** Prints `processes=<json>`: the service's processes (by its configuration) and their memory. */
export const odooProcesses = (l: OdooLayout) => pythonCommand(ODOO_PROCESSES, l.config);

/**
 * Whether svc's routing (svc_instance, server-wide) is loaded in the Odoo answering on the port
 * (host/routing_probe.py); exit code 3 with the reason on stderr when it is not.
 */
export const routingProbe = (port: number) => pythonCommand(ROUTING_PROBE, port);

/** The end of Odoo's output. */
export const logTail = (l: OdooLayout, lines = 40) => `tail -n ${lines} ${q(l.log)} 2>/dev/null || true`;

/** Removes a database's filestore directory (a build that failed). */
export const removeFilestore = (dir: string) => `rm -rf -- ${q(dir)}; echo removed`;
