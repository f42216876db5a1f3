// What a rollout runs on the Odoo host (as root through the session's sudo): the programs of
// host/, given their arguments one by one (core/host-program.ts), and Odoo run once (odoo's
// asOdoo). Module names read from the host's own addons directories are checked here.
import { UserError } from '../core/errors.js';
import { hostProgram, pythonCommand, shCommand } from '../core/host-program.js';
import { asOdoo, isModuleName, odooBin, type OdooLayout } from '../odoo/index.js';

/** Module names read from the host's directories, checked by the one rule of a module name (odoo-names.ts). */
export function checkModuleNames(names: readonly string[]): string[] {
  for (const n of names) if (!isModuleName(n)) throw new UserError(`${JSON.stringify(n.slice(0, 140))} is not a module name`);
  return [...names];
}

const CHECKSUMS = hostProgram(new URL('./host/module_checksums.py', import.meta.url));
const ADDONS_PATH = hostProgram(new URL('./host/addons-path.sh', import.meta.url));
const WAIT_UPDATE = hostProgram(new URL('./host/wait-update.sh', import.meta.url));

/** The addons_path line of the service's configuration (only that line: the file holds the database password). */
export const readAddonsPath = (l: OdooLayout) => shCommand(ADDONS_PATH, 'addons-path', l.config);

/** The checksums of every module on these addons directories (host/module_checksums.py). */
export const checksumsScript = (dirs: readonly string[]) => pythonCommand(CHECKSUMS, JSON.stringify(dirs));

export function readChecksums(stdout: string): { sums: Record<string, string>; dirs: Record<string, string> } {
  const line = (prefix: string) =>
    stdout
      .split('\n')
      .find((l) => l.startsWith(prefix))
      ?.slice(prefix.length) ?? '{}';
  return { sums: JSON.parse(line('SVC-CHECKSUMS ')), dirs: JSON.parse(line('SVC-DIRS ')) };
}

/** The lock one tenant's update holds on the host: a resumed rollout waits for an update still running. */
const updateLock = (l: OdooLayout, database: string) => `${l.base}/run/rollout-${database}.lock`;

/**
 * `-u <modules>` on one database with the host's Odoo, run once as odoo (asOdoo), under the
 * tenant's lock. Odoo's output is kept whole in a file under the logs directory; its complaints,
 * the module it was at (SVC-LAST-MODULE) and its end are printed. Exit code: Odoo's.
 */
export function updateScript(l: OdooLayout, source: string, database: string, modules: readonly string[]): string {
  return asOdoo(
    l,
    { source, database, kind: 'update', lock: updateLock(l, database) },
    odooBin(l, database, ['-u', checkModuleNames(modules).join(',')]),
  );
}

/** Waits until no update of the database runs (a resumed rollout, after a crash of the service). */
export const waitForUpdate = (l: OdooLayout, database: string) => shCommand(WAIT_UPDATE, 'wait-update', updateLock(l, database));
