// The programs the root server jobs run on the host (host/*.sh): values go in as arguments; secrets
// never do, they go on stdin.
import { hostProgram, shCommand } from '../core/host-program.js';

/** The standard Odoo layout under the base path (ODOO_BASE_PATH, default /opt/odoo). */
const ODOO_DIRECTORIES = ['addons', 'custom-addons', 'config', 'data', 'logs', 'backups'] as const;

const MAKE_DIRS = hostProgram(new URL('./host/make-dirs.sh', import.meta.url));
const CODE_SERVER = hostProgram(new URL('./host/code-server.sh', import.meta.url));

/** One directory after the other, stopping at the first that fails (one message, not one per directory). */
export function setupDirStructureScript(basePath: string): string {
  return shCommand(MAKE_DIRS, 'svc-make-dirs', ...ODOO_DIRECTORIES.map((d) => `${basePath}/${d}`));
}

/** Prints where code-server is installed; fails when it is not. */
export const FIND_CODE_SERVER = shCommand(CODE_SERVER, 'svc-code-server', 'find');

/** Writes code-server's config (0600) from stdin: the password never appears on a command line. */
export const WRITE_CODE_SERVER_CONFIG = shCommand(CODE_SERVER, 'svc-code-server', 'write-config');
/** What the action log shows for WRITE_CODE_SERVER_CONFIG (the file written follows it). */
export const WRITE_CODE_SERVER_CONFIG_LABEL = 'write (0600) ~/.config/code-server/config.yaml';

export function codeServerConfig(port: number, password: string): string {
  // A JSON string is a valid YAML double-quoted scalar, whatever the password holds.
  return `bind-addr: 0.0.0.0:${port}\nauth: password\npassword: ${JSON.stringify(password)}\ncert: false\n`;
}

/** (Re)starts code-server as a service and checks it is still running two seconds later. */
export const START_CODE_SERVER = shCommand(CODE_SERVER, 'svc-code-server', 'start');

/** Stops code-server, uninstalls it (package or standalone) and removes its config (it holds the password). */
export const REMOVE_CODE_SERVER = shCommand(CODE_SERVER, 'svc-code-server', 'remove');
