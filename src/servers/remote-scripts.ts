// Shell run on root servers by the root server jobs. POSIX sh (dash, busybox), no bashisms. Values
// are quoted with shellQuote; secrets never appear here: they go on stdin.
import { shellQuote } from '../core/ssh.js';

/** The standard Odoo layout under the base path (ODOO_BASE_PATH, default /opt/odoo). */
const ODOO_DIRECTORIES = ['addons', 'custom-addons', 'config', 'data', 'logs', 'backups'] as const;

/** One directory after the other, stopping at the first that fails (one message, not one per directory). */
export function setupDirStructureScript(basePath: string): string {
  const dirs = ODOO_DIRECTORIES.map((d) => shellQuote(`${basePath}/${d}`)).join(' ');
  return (
    `set -e; for d in ${dirs}; do mkdir -p -- "$d"; ` +
    `if [ -d "$d" ] && [ -w "$d" ]; then echo "$d"; else echo "$d is not a writable directory" >&2; exit 1; fi; done`
  );
}

const STATE_DIR = '"$HOME/.local/state/svc-code-server"';
const CONFIG_DIR = '"$HOME/.config/code-server"';
/** The code-server binary: on PATH (deb/rpm install) or the standalone install in ~/.local/bin. */
const FIND_BINARY =
  'CS=$(command -v code-server || true); if [ -z "$CS" ] && [ -x "$HOME/.local/bin/code-server" ]; then CS="$HOME/.local/bin/code-server"; fi';
/** systemd when it runs and we are root (the install script's `systemctl enable --now code-server@$USER`); else a background process. */
const USE_SYSTEMD = '[ "$(id -u)" = 0 ] && [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1';

/** Prints where code-server is installed; fails when it is not. */
export const FIND_CODE_SERVER = `${FIND_BINARY}; [ -n "$CS" ] || { echo 'code-server is not installed' >&2; exit 1; }; echo "$CS"`;

/** Writes code-server's config (0600) from stdin: the password never appears on a command line. */
export const WRITE_CODE_SERVER_CONFIG = `umask 077; mkdir -p ${CONFIG_DIR} && cat > ${CONFIG_DIR}/config.yaml`;

export function codeServerConfig(port: number, password: string): string {
  // A JSON string is a valid YAML double-quoted scalar, whatever the password holds.
  return `bind-addr: 0.0.0.0:${port}\nauth: password\npassword: ${JSON.stringify(password)}\ncert: false\n`;
}

/** (Re)starts code-server as a service and checks it is still running two seconds later. */
export const START_CODE_SERVER = [
  'set -e',
  FIND_CODE_SERVER,
  `if ${USE_SYSTEMD}; then`,
  '  systemctl enable "code-server@$(id -un)" && systemctl restart "code-server@$(id -un)"',
  '  sleep 2; systemctl is-active "code-server@$(id -un)"',
  'else',
  `  mkdir -p ${STATE_DIR}`,
  `  [ -f ${STATE_DIR}/pid ] && kill "$(cat ${STATE_DIR}/pid)" 2>/dev/null || true`,
  `  nohup "$CS" --config ${CONFIG_DIR}/config.yaml > ${STATE_DIR}/log 2>&1 < /dev/null &`,
  `  echo $! > ${STATE_DIR}/pid`,
  `  sleep 2; kill -0 "$(cat ${STATE_DIR}/pid)" || { echo 'code-server exited:' >&2; tail -n 20 ${STATE_DIR}/log >&2; exit 1; }`,
  `  echo "running as pid $(cat ${STATE_DIR}/pid)"`,
  'fi',
].join('\n');

/** Stops code-server, uninstalls it (package or standalone) and removes its config (it holds the password). */
export const REMOVE_CODE_SERVER = [
  `if ${USE_SYSTEMD}; then systemctl disable --now "code-server@$(id -un)" 2>/dev/null || true; fi`,
  `if [ -f ${STATE_DIR}/pid ]; then kill "$(cat ${STATE_DIR}/pid)" 2>/dev/null || true; rm -f ${STATE_DIR}/pid; fi`,
  'if command -v dpkg >/dev/null 2>&1 && dpkg -s code-server >/dev/null 2>&1; then DEBIAN_FRONTEND=noninteractive apt-get remove -y code-server; fi',
  'if command -v rpm >/dev/null 2>&1 && rpm -q code-server >/dev/null 2>&1; then rpm -e code-server; fi',
  'rm -rf "$HOME"/.local/lib/code-server-* "$HOME/.local/bin/code-server"',
  `rm -f ${CONFIG_DIR}/config.yaml`,
  `${FIND_BINARY}; if [ -n "$CS" ]; then echo "code-server is still installed at $CS" >&2; exit 1; fi`,
  'echo removed',
].join('\n');
