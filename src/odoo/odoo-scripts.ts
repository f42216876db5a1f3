// The shell setup_odoo and the Odoo actions run on a host (POSIX sh, as root through the session's
// sudo). Only validated values appear here, each shell-quoted; secrets never do (the configuration
// goes on stdin). Exit code 3 is an outcome the script explains on stderr (a checksum that differs,
// a tarball without odoo-bin), not a crash.
import { shellQuote as q } from '../core/ssh.js';
import { type OdooLayout, PYTHON } from './odoo-layout.js';

/** systemd runs here (and not only its tools). */
const USE_SYSTEMD = '[ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1';

/** The host's cores, memory (the cgroup's limit when lower) and whether systemd runs: key=value lines. */
export const HOST_FACTS = [
  'echo "cores=$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN)"',
  'mem=$(awk \'/^MemTotal:/ {printf "%.0f", $2 * 1024}\' /proc/meminfo)',
  'lim=$(cat /sys/fs/cgroup/memory.max 2>/dev/null || echo max)',
  'case "$lim" in ""|max|*[!0-9]*) ;; *) [ "$lim" -lt "$mem" ] && mem=$lim ;; esac',
  'echo "memory=$mem"',
  `if ${USE_SYSTEMD}; then echo systemd=yes; else echo systemd=no; fi`,
].join('\n');

/** Installs the packages that are missing (none missing: nothing runs). One dpkg-query for all of them. */
export function installPackages(packages: readonly string[]): string {
  const list = packages.map(q).join(' ');
  return [
    `installed=$(dpkg-query -W -f='\${Package} \${Status}\\n' ${list} 2>/dev/null | awk '/ install ok installed$/ {print $1}')`,
    'missing=""',
    `for p in ${list}; do printf '%s\\n' "$installed" | grep -qx "$p" || missing="$missing $p"; done`,
    `if [ -z "$missing" ]; then echo "all ${packages.length} packages present"; exit 0; fi`,
    `command -v apt-get >/dev/null 2>&1 || { echo "Missing packages:$missing, and no apt-get to install them" >&2; exit 3; }`,
    'export DEBIAN_FRONTEND=noninteractive',
    // Another apt run (the set-up of a second Odoo service on this host) holds the lock for a while.
    'apt="apt-get -q -y -o DPkg::Lock::Timeout=600 --no-install-recommends"',
    '$apt install $missing || { apt-get -q -o DPkg::Lock::Timeout=600 update && $apt install $missing; } || exit 1',
    'echo "installed:$missing"',
  ].join('\n');
}

/** The odoo system user and the directories; data_dir and what is in it become odoo's. */
export function prepareHost(l: OdooLayout): string {
  const dirs = ['versions', 'config', 'logs', 'run', 'data', 'addons', 'custom-addons', 'backups'].map((d) => q(`${l.base}/${d}`));
  return [
    'set -e',
    'if id odoo >/dev/null 2>&1; then echo "user odoo present"; else',
    `  useradd --system --user-group --home-dir ${q(l.dataDir)} --no-create-home --shell /usr/sbin/nologin odoo || id odoo >/dev/null`,
    '  echo "user odoo created"',
    'fi',
    `mkdir -p ${dirs.join(' ')}`,
    `chmod 755 ${q(l.base)} ${q(`${l.base}/versions`)}`,
    `chown root:odoo ${q(`${l.base}/config`)} && chmod 750 ${q(`${l.base}/config`)}`,
    // Odoo's output names logins, databases and URLs with tokens: root's and odoo's only, files there before included.
    `chown root:odoo ${q(`${l.base}/logs`)} && chmod 750 ${q(`${l.base}/logs`)}`,
    `find ${q(`${l.base}/logs`)} -mindepth 1 ! -group odoo -exec chgrp -h odoo {} +`,
    `find ${q(`${l.base}/logs`)} -mindepth 1 ! -type l -perm /007 -exec chmod o-rwx {} +`,
    // Each customer database's role and password (svc's addon reads them: tenant_db.py).
    `mkdir -p ${q(l.tenantRoles)} && chown root:odoo ${q(l.tenantRoles)} && chmod 750 ${q(l.tenantRoles)}`,
    // Filestores copied in as root before Odoo ran here become odoo's (only what is not already).
    `find ${q(l.dataDir)} ! -user odoo -exec chown -h odoo:odoo {} + && chmod 750 ${q(l.dataDir)}`,
  ].join('\n');
}

/** The marker a checked and unpacked source tree carries: the SHA-256 of its tarball. */
const MARKER = '.svc-source-sha256';
/** What `odoo-bin --version` said of it when it was checked (starting Odoo to ask takes seconds). */
const VERSION_MARKER = '.svc-odoo-version';

/** Prints the SHA-256 the version's tree was unpacked from ("none" when it is not there). */
export function installedSource(l: OdooLayout, version: string): string {
  const marker = q(`${l.sourceOf(version)}/${MARKER}`);
  return `if [ -f ${marker} ] && [ -f ${q(`${l.sourceOf(version)}/odoo-bin`)} ]; then cat ${marker}; else echo none; fi`;
}

/** Where an https source is written while it arrives (on stdin), before it is checked. */
export const incomingPath = (l: OdooLayout, version: string, token: string) => `${l.versionsDir}/.incoming-${version}-${token}.tar.gz`;

export const receiveFile = (path: string) => `umask 077; mkdir -p ${q(path.replace(/\/[^/]*$/, ''))} && cat > ${q(path)}`;

/**
 * Checks the tarball (its SHA-256, an odoo-bin at its top or in its one top directory), unpacks it
 * beside the version's current tree, checks that it runs with /usr/bin/python3 (`--version`), and
 * only then puts it in place of the old tree. Any failure before that removes what it unpacked and
 * leaves the old tree (and the Odoo running from it) alone. `removeTarball`: an https download.
 */
export function unpackSource(l: OdooLayout, version: string, tarball: string, sha256: string, removeTarball: boolean): string {
  const dest = l.sourceOf(version);
  const tar = q(tarball);
  return [
    'umask 022',
    `exec 9>>${q(`${l.versionsDir}/.lock`)}`,
    "flock -w 900 9 || { echo 'Another set-up held the versions directory for 15 minutes' >&2; exit 1; }",
    `new=${q(`${l.versionsDir}/.new-${version}`)}-$$`,
    `old=${q(`${l.versionsDir}/.old-${version}`)}-$$`,
    `cleanup() { rm -rf "$new"; ${removeTarball ? `rm -f ${tar};` : ''} }`,
    'fail() { echo "$1" >&2; cleanup; exit 3; }',
    `[ -f ${tar} ] || fail ${q(`The source ${tarball} does not exist on the host`)}`,
    `got=$(sha256sum ${tar} | cut -d' ' -f1)`,
    `[ "$got" = ${q(sha256)} ] || fail "Checksum mismatch: the source's SHA-256 is $got, the version names ${sha256}"`,
    `list=$(tar -tzf ${tar} 2>&1) || fail "The source is not a gzip-compressed tarball: $(printf '%s' "$list" | tail -n 2)"`,
    `entry=$(printf '%s\\n' "$list" | grep -E '^(\\./)?([^/]+/)?odoo-bin$' | head -n 1)`,
    `[ -n "$entry" ] || fail 'The tarball holds no odoo-bin (at its top or in its one top directory): it is not an Odoo source tree'`,
    `strip=$(printf '%s' "\${entry#./}" | awk -F/ '{print NF-1}')`,
    'rm -rf "$new" && mkdir -p "$new"',
    `tar -xzf ${tar} -C "$new" --strip-components="$strip" --no-same-owner --no-same-permissions || fail 'Unpacking the source failed'`,
    `[ -f "$new/odoo-bin" ] || fail 'The unpacked tree holds no odoo-bin'`,
    `out=$(cd "$new" && ${PYTHON} odoo-bin --version 2>&1) || fail "The source does not run with ${PYTHON}: $(printf '%s' "$out" | tail -n 3)"`,
    `version=$(printf '%s\\n' "$out" | grep -m 1 '^Odoo Server') || fail "odoo-bin --version did not name an Odoo server: $(printf '%s' "$out" | tail -n 3)"`,
    // Compiled once as root: Odoo's user cannot write into its code, and would compile at every start.
    `${PYTHON} -m compileall -q -j 0 "$new/odoo" $( [ -d "$new/addons" ] && echo "$new/addons") >/dev/null 2>&1 || true`,
    `printf '%s\\n' "$version" > "$new/${VERSION_MARKER}"`,
    `printf '%s\\n' ${q(sha256)} > "$new/${MARKER}"`,
    `if [ -e ${q(dest)} ]; then mv ${q(dest)} "$old"; fi`,
    `mv "$new" ${q(dest)}`,
    'rm -rf "$old"',
    removeTarball ? `rm -f ${tar}` : ':',
    'echo "$version"',
  ].join('\n');
}

/** Prints the version line of the tree in the current directory (e.g. "Odoo Server 18.0"): its marker, else Odoo asked. */
const VERSION_LINE = `cat ${VERSION_MARKER} 2>/dev/null || ${PYTHON} odoo-bin --version 2>/dev/null | grep -m 1 '^Odoo Server'`;

/** Prints the version line of a source tree (see VERSION_LINE); exit code 3 when there is none. */
export const sourceVersion = (source: string) => `cd ${q(source)} && { ${VERSION_LINE}; } || exit 3`;

/** Prints the Odoo series of an unpacked tree (e.g. "Odoo Server 18.0") and its addons directories. */
export function describeSource(l: OdooLayout, version: string): string {
  const src = q(l.sourceOf(version));
  return [
    `cd ${src} || exit 3`,
    `${VERSION_LINE} || exit 3`,
    `for d in ${src}/odoo/addons ${src}/addons; do [ -d "$d" ] && echo "addons=$d"; done`,
    ':',
  ].join('\n');
}

/** Prints `addons=<path>` for each of `paths` that is a directory holding a module (a folder with a manifest). */
export function addonsDirsAmong(paths: readonly string[]): string {
  return [
    `for d in ${paths.map(q).join(' ')}; do`,
    '  for m in "$d"/*/__manifest__.py "$d"/*/__openerp__.py; do [ -f "$m" ] && { echo "addons=$d"; break; }; done',
    'done',
    ':',
  ].join('\n');
}

/** Writes stdin to `path` (root:odoo, `mode`) when it differs from what is there; prints changed/unchanged. */
export function writeIfChanged(path: string, mode: string, group = 'odoo'): string {
  const p = q(path);
  return [
    'set -e',
    'umask 077',
    `cat > ${p}.svc-new`,
    `chown root:${group} ${p}.svc-new && chmod ${mode} ${p}.svc-new`,
    `if [ -f ${p} ] && cmp -s ${p} ${p}.svc-new; then rm -f ${p}.svc-new; echo unchanged; else mv -f ${p}.svc-new ${p}; echo changed; fi`,
  ].join('\n');
}

/** Checks that Odoo's role can sign in to PostgreSQL with what the configuration says, from this host. */
export function checkDatabaseLogin(l: OdooLayout): string {
  return [
    `${PYTHON} - ${q(l.config)} <<'PY'`,
    'import configparser, sys',
    'import psycopg2',
    'p = configparser.RawConfigParser()',
    'p.read(sys.argv[1])',
    'o = dict(p.items("options"))',
    'try:',
    '    c = psycopg2.connect(host=o["db_host"], port=int(o["db_port"]), user=o["db_user"], password=o["db_password"], dbname="postgres", connect_timeout=10)',
    '    c.close()',
    'except Exception as e:',
    '    print("Odoo\'s role %s cannot sign in to PostgreSQL at %s:%s from this host: %s" % (o["db_user"], o["db_host"], o["db_port"], str(e).strip()), file=sys.stderr)',
    '    sys.exit(3)',
    'print("role %s signs in at %s:%s" % (o["db_user"], o["db_host"], o["db_port"]))',
    'PY',
  ].join('\n');
}

/**
 * Starts odoo-bin with SO_REUSEPORT on its listening sockets, so that a second Odoo (new code) can
 * listen on the same port while the first still serves: the graceful restart starts the new one,
 * waits until it answers, and only then stops the old one (Odoo's own SIGHUP closes its socket before
 * it re-executes itself: connections are refused meanwhile). Everything else is odoo-bin's own.
 */
export const LAUNCHER_PY = [
  'import os, runpy, socket, sys',
  '_bind = socket.socket.bind',
  'def bind(self, address):',
  '    if self.family in (socket.AF_INET, socket.AF_INET6) and self.type == socket.SOCK_STREAM:',
  '        self.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)',
  '    return _bind(self, address)',
  'socket.socket.bind = bind',
  'sys.argv = sys.argv[1:]',
  'sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[0])))',
  'runpy.run_path(sys.argv[0], run_name="__main__")',
].join('\n');

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
    `  setpriv --reuid=odoo --regid=odoo --init-groups env HOME=${q(l.dataDir)} ${PYTHON} -c ${q(LAUNCHER_PY)} ${q(`${source}/odoo-bin`)} -c ${q(l.config)} >> ${q(l.log)} 2>&1`,
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
    `ExecStart=${PYTHON} ${source}/odoo-bin -c ${l.config}`,
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

const pidFile = (l: OdooLayout) => q(`${l.runDir}/pid`);

/**
 * True when the process `$var` (a shell variable's name) lives and is this service's supervisor. After
 * a reboot the pid file names a pid the kernel may have given to another process: never "running",
 * never signalled.
 */
const supervisorAlive = (l: OdooLayout, v: string) =>
  `[ -n "$${v}" ] && kill -0 "$${v}" 2>/dev/null && tr '\\0' ' ' < /proc/"$${v}"/cmdline 2>/dev/null | grep -qF -- ${q(l.runScript)}`;

/** Prints "running" when the service runs, else "stopped". */
export function serviceRunning(l: OdooLayout): string {
  return [
    `if ${USE_SYSTEMD}; then systemctl is-active --quiet ${q(l.service)} && echo running || echo stopped; exit 0; fi`,
    `sup=$(cat ${pidFile(l)} 2>/dev/null); if ${supervisorAlive(l, 'sup')}; then echo running; else echo stopped; fi`,
  ].join('\n');
}

/**
 * startService, only when the service should run and does not (a reboot without systemd, a crash):
 * prints "running" when it runs, "disabled" when stop_odoo stopped it (the unit disabled, the
 * supervisor's flag removed), and starts it otherwise. One script: a stop on the host between the
 * check and the start is not undone.
 */
export function startIfStopped(l: OdooLayout, port: number): string {
  return [
    `state=$(${serviceRunning(l).replaceAll('\n', '; ')})`,
    'if [ "$state" = running ]; then echo running; exit 0; fi',
    `if ${USE_SYSTEMD}; then systemctl is-enabled --quiet ${q(l.service)} || { echo disabled; exit 0; }`,
    `elif [ ! -f ${q(`${l.runDir}/enabled`)} ]; then echo disabled; exit 0; fi`,
    startService(l, port),
  ].join('\n');
}

/** A shell function stopping the supervised process group (no systemd). */
function stopSupervisedFunction(l: OdooLayout): string {
  return [
    'stop_supervised() {',
    `  rm -f ${q(`${l.runDir}/enabled`)}`,
    `  [ -f ${pidFile(l)} ] || return 0`,
    `  pid=$(cat ${pidFile(l)})`,
    `  if ${supervisorAlive(l, 'pid')}; then`,
    // The supervisor leads its own process group: Odoo, its workers and its gevent process are in it.
    '    kill -TERM -"$pid" 2>/dev/null || kill -TERM "$pid"',
    '    i=0; while kill -0 -"$pid" 2>/dev/null && [ $i -lt 30 ]; do sleep 1; i=$((i+1)); done',
    '    kill -KILL -"$pid" 2>/dev/null || true',
    '  fi',
    `  rm -f ${pidFile(l)}`,
    '}',
  ].join('\n');
}

/** Stops the service (and keeps it from starting again: disabled, or the supervisor's flag removed). */
export function stopService(l: OdooLayout): string {
  return [
    `if ${USE_SYSTEMD}; then systemctl disable --now ${q(l.service)} >/dev/null 2>&1 || systemctl stop ${q(l.service)}; echo stopped; exit 0; fi`,
    stopSupervisedFunction(l),
    'stop_supervised',
    'echo stopped',
  ].join('\n');
}

/**
 * (Re)starts the service. A port held by another program is refused before anything stops (Odoo
 * would fail to bind while the other program answered the health check in its place).
 */
export function startService(l: OdooLayout, port: number): string {
  return [
    `state=$(${serviceRunning(l).replaceAll('\n', '; ')})`,
    'if [ "$state" = stopped ]; then',
    `  if ${PYTHON} -c 'import socket,sys; s=socket.socket(); s.settimeout(2); sys.exit(0 if s.connect_ex(("127.0.0.1", ${port})) == 0 else 1)'; then`,
    `    echo 'Port ${port} on 127.0.0.1 is already in use by another program' >&2; exit 3`,
    '  fi',
    'fi',
    `touch ${q(l.log)}`,
    `if ${USE_SYSTEMD}; then`,
    `  systemctl daemon-reload && systemctl enable ${q(l.service)} >/dev/null 2>&1 && systemctl restart ${q(l.service)} || exit 1`,
    '  echo "restarted (systemd)"; exit 0',
    'fi',
    stopSupervisedFunction(l),
    'stop_supervised',
    `mkdir -p ${q(l.runDir)} && touch ${q(`${l.runDir}/enabled`)}`,
    `tok=$(date +%s%N); echo "$tok" > ${q(`${l.runDir}/current`)}`,
    // A session of its own (it outlives this SSH session), which makes it its process group's leader.
    `setsid /bin/sh ${q(l.runScript)} "$tok" </dev/null >/dev/null 2>&1 &`,
    `echo $! > ${pidFile(l)}`,
    `echo "started (supervised, pid $(cat ${pidFile(l)}))"`,
  ].join('\n');
}

/**
 * Waits (at most `seconds`) until a process of the process group `$new` listens on the port and
 * /web/health answers 200; exit code 3 when it does not (or the group died).
 */
const NEW_GROUP_ANSWERS_PY = [
  'import os, sys, time, urllib.request',
  'port, group, limit = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])',
  'opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))',
  'def listening_inodes():',
  '    found = set()',
  '    for name in ("/proc/net/tcp", "/proc/net/tcp6"):',
  '        try:',
  '            with open(name) as f: rows = f.read().split("\\n")[1:]',
  '        except OSError: continue',
  '        for row in rows:',
  '            c = row.split()',
  '            if len(c) > 9 and c[3] == "0A" and int(c[1].rsplit(":", 1)[1], 16) == port: found.add(c[9])',
  '    return found',
  'def group_listens():',
  '    inodes = listening_inodes()',
  '    for pid in filter(str.isdigit, os.listdir("/proc")):',
  '        try:',
  '            if os.getpgid(int(pid)) != group: continue',
  '            for fd in os.listdir("/proc/%s/fd" % pid):',
  '                link = os.readlink("/proc/%s/fd/%s" % (pid, fd))',
  '                if link.startswith("socket:[") and link[8:-1] in inodes: return True',
  '        except OSError: pass',
  '    return False',
  'end = time.monotonic() + limit',
  'while time.monotonic() < end:',
  '    try: os.killpg(group, 0)',
  '    except OSError: print("the new Odoo stopped before it answered", file=sys.stderr); sys.exit(3)',
  '    if group_listens():',
  '        try:',
  '            with opener.open("http://127.0.0.1:%d/web/health" % port, timeout=5) as r:',
  '                if r.status == 200: print("new Odoo answers"); sys.exit(0)',
  '        except Exception: pass',
  '    time.sleep(0.3)',
  'print("the new Odoo did not answer within %d s" % limit, file=sys.stderr)',
  'sys.exit(3)',
].join('\n');

/**
 * Restarts a running service without refusing a request (supervised mode): a new supervisor starts
 * Odoo with the code on disk now, on the same port (SO_REUSEPORT, see LAUNCHER_PY); once a process
 * of it listens and /web/health answers, the old Odoo gets SIGINT — Odoo's graceful stop: its
 * workers finish the requests in flight — and connections still queued on its socket move to the
 * new one (net.ipv4.tcp_migrate_req). If the new one does not answer, it is stopped and the old one
 * keeps serving (exit code 3). Under systemd: SIGHUP to the main process (Odoo re-executes itself
 * in place; its socket is closed meanwhile). Nothing running: an ordinary start.
 */
export function gracefulRestart(l: OdooLayout, port: number, seconds: number): string {
  const current = q(`${l.runDir}/current`);
  return [
    `if ${USE_SYSTEMD}; then`,
    `  if systemctl is-active --quiet ${q(l.service)}; then systemctl kill -s HUP --kill-whom=main ${q(l.service)} || exit 1; echo "signalled (systemd, SIGHUP)"; exit 0; fi`,
    `  systemctl restart ${q(l.service)} || exit 1; echo "restarted (systemd)"; exit 0`,
    'fi',
    `old=$(cat ${pidFile(l)} 2>/dev/null || true)`,
    `if ! { ${supervisorAlive(l, 'old')}; }; then`,
    startService(l, port)
      .split('\n')
      .map((line) => `  ${line}`)
      .join('\n'),
    '  exit 0',
    'fi',
    'sysctl -qw net.ipv4.tcp_migrate_req=1 2>/dev/null || true',
    `oldtok=$(cat ${current} 2>/dev/null || true)`,
    `tok=$(date +%s%N); echo "$tok" > ${current}`,
    `touch ${q(`${l.runDir}/enabled`)} ${q(l.log)}`,
    `setsid /bin/sh ${q(l.runScript)} "$tok" </dev/null >/dev/null 2>&1 &`,
    'new=$!',
    `if ! ${PYTHON} -c ${q(NEW_GROUP_ANSWERS_PY)} ${port} "$new" ${Math.max(1, Math.trunc(seconds))}; then`,
    `  printf '%s\\n' "$oldtok" > ${current}`,
    '  kill -INT -"$new" 2>/dev/null; sleep 2; kill -KILL -"$new" 2>/dev/null',
    `  tail -n 20 ${q(l.log)} >&2; exit 3`,
    'fi',
    `echo "$new" > ${pidFile(l)}`,
    // The old supervisor's Odoo (its child: setpriv and env exec into it) stops gracefully; the
    // supervisor, no longer current, does not start it again.
    'for child in $(pgrep -P "$old"); do kill -INT "$child" 2>/dev/null || true; done',
    'i=0; while kill -0 -"$old" 2>/dev/null && [ $i -lt 120 ]; do sleep 0.5; i=$((i+1)); done',
    'kill -KILL -"$old" 2>/dev/null || true',
    'echo "restarted gracefully (supervised, pid $new; the old pid $old stopped)"',
  ].join('\n');
}

/** Waits until /web/health answers 200 on the host, at most `seconds`. */
export function waitHealthy(port: number, seconds: number): string {
  return [
    `${PYTHON} - ${port} ${seconds} <<'PY'`,
    'import sys, time, urllib.error, urllib.request',
    'port, limit = int(sys.argv[1]), float(sys.argv[2])',
    'opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))',
    'end, last = time.monotonic() + limit, "no answer"',
    'while True:',
    '    try:',
    '        with opener.open("http://127.0.0.1:%d/web/health" % port, timeout=5) as r:',
    '            print("healthy: HTTP %d %s" % (r.status, r.read(200).decode("utf-8", "replace")))',
    '            sys.exit(0)',
    '    except urllib.error.HTTPError as e:',
    '        last = "HTTP %d" % e.code',
    '    except Exception as e:',
    '        last = str(getattr(e, "reason", e))',
    '    if time.monotonic() > end:',
    '        print("/web/health did not answer 200 within %d s (last: %s)" % (limit, last), file=sys.stderr)',
    '        sys.exit(3)',
    '    time.sleep(0.3)',
    'PY',
  ].join('\n');
}

/**
 * Whether svc's routing (svc_instance, server-wide) is loaded in the Odoo answering on the port: a
 * JSON-RPC db.db_exist sent as if through a proxy (X-Forwarded-For) is refused by the routing
 * (AccessDenied) and answered by core without it. Odoo only logs a server-wide module that fails to
 * import, so without this check the routing would be off unseen. Exit code 3 with the reason on
 * stderr when it is not loaded (or /jsonrpc does not tell: 19.0 needs the rpc server-wide module).
 */
export function routingProbe(port: number): string {
  return [
    `${PYTHON} - ${port} <<'PY'`,
    'import json, sys, urllib.error, urllib.request',
    'port = int(sys.argv[1])',
    'opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))',
    'body = {"jsonrpc": "2.0", "method": "call", "id": 1, "params": {"service": "db", "method": "db_exist", "args": ["svc_routing_probe"]}}',
    'headers = {"Content-Type": "application/json", "X-Forwarded-For": "192.0.2.1"}',
    'req = urllib.request.Request("http://127.0.0.1:%d/jsonrpc" % port, json.dumps(body).encode(), headers)',
    'try:',
    '    with opener.open(req, timeout=30) as r:',
    '        answer = json.loads(r.read())',
    'except urllib.error.HTTPError as e:',
    '    print("/jsonrpc answered HTTP %d to the probe (db.db_exist through a proxy), so it cannot tell" % e.code, file=sys.stderr)',
    '    sys.exit(3)',
    'except Exception as e:',
    '    print("/jsonrpc did not answer the probe: %s" % getattr(e, "reason", e), file=sys.stderr)',
    '    sys.exit(3)',
    'error = answer.get("error") if isinstance(answer, dict) else None',
    'name = ((error or {}).get("data") or {}).get("name", "")',
    'if name.endswith("AccessDenied"):',
    '    print("routing loaded: db.db_exist through a proxy refused")',
    '    sys.exit(0)',
    'if isinstance(answer, dict) and "result" in answer:',
    '    print("Odoo answered db.db_exist to a request through a proxy (%r), which svc_instance refuses" % (answer["result"],), file=sys.stderr)',
    'else:',
    '    print("unexpected answer to db.db_exist through a proxy: %s" % json.dumps(answer)[:300], file=sys.stderr)',
    'sys.exit(3)',
    'PY',
  ].join('\n');
}

/** The end of Odoo's output. */
export const logTail = (l: OdooLayout, lines = 40) => `tail -n ${lines} ${q(l.log)} 2>/dev/null || true`;

/** What odoo_status reports of the host: health, the processes of this service (by its config) and their memory. */
export function statusScript(l: OdooLayout, port: number, source: string): string {
  return [
    `(cd ${q(source)} 2>/dev/null && echo "version=$(${VERSION_LINE})")`,
    `echo "service=$(${serviceRunning(l).replaceAll('\n', '; ')})"`,
    // Only this line of the configuration: the file holds the database password.
    `echo "workers=$(sed -n 's/^workers = \\([0-9]*\\)$/\\1/p' ${q(l.config)})"`,
    `${PYTHON} - ${port} ${q(l.config)} <<'PY'`,
    'import json, os, sys, urllib.request',
    'port, conf = int(sys.argv[1]), sys.argv[2]',
    'opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))',
    'try:',
    '    with opener.open("http://127.0.0.1:%d/web/health" % port, timeout=5) as r:',
    '        health = "HTTP %d %s" % (r.status, r.read(200).decode("utf-8", "replace"))',
    'except Exception as e:',
    '    health = str(getattr(e, "reason", e))',
    'procs = []',
    'for pid in filter(str.isdigit, os.listdir("/proc")):',
    '    try:',
    '        with open("/proc/%s/cmdline" % pid, "rb") as f: args = f.read().split(b"\\0")',
    '        if b"-c" not in args or conf.encode() not in args or not os.path.basename(args[0]).startswith(b"python"): continue',
    '        with open("/proc/%s/status" % pid) as f: rss = next((int(x.split()[1]) * 1024 for x in f if x.startswith("VmRSS:")), 0)',
    '        procs.append({"pid": int(pid), "rss_bytes": rss, "gevent": b"gevent" in args})',
    '    except OSError: pass',
    'print("status=" + json.dumps({"health": health, "processes": procs}))',
    'PY',
  ].join('\n');
}

/** Stops a service and removes its files (its configuration holds the database password). */
export function removeService(l: OdooLayout): string {
  return [
    `if ${USE_SYSTEMD}; then`,
    `  systemctl disable --now ${q(l.service)} >/dev/null 2>&1 || true`,
    `  rm -f ${q(l.unit)}; systemctl daemon-reload`,
    'else',
    stopSupervisedFunction(l),
    '  stop_supervised',
    'fi',
    `rm -f ${q(l.config)} ${q(l.runScript)}`,
    `echo ${q(`${l.service} removed`)}`,
  ].join('\n');
}

/** Removes a database's filestore directory (a build that failed). */
export const removeFilestore = (dir: string) => `rm -rf -- ${q(dir)}; echo removed`;
