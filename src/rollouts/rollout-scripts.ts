// The shell and Python a rollout runs on the Odoo host (POSIX sh, as root through the session's
// sudo). Only validated values appear here, each shell-quoted: database names of the subscriptions
// (Odoo's database name rule), module names read from the host's own addons directories and
// checked here, paths of the host's layout.
import { UserError } from '../core/errors.js';
import { shellQuote as q } from '../core/ssh.js';
import { asOdoo, isModuleName, odooBin, type OdooLayout, PYTHON } from '../odoo/index.js';

/** Module names read from the host's directories, checked by the one rule of a module name (odoo-names.ts). */
export function checkModuleNames(names: readonly string[]): string[] {
  for (const n of names) if (!isModuleName(n)) throw new UserError(`${JSON.stringify(n.slice(0, 140))} is not a module name`);
  return [...names];
}

/**
 * One checksum per module on the addons path (the first directory holding a module wins, as in
 * Odoo), as OCA's module_auto_update and click-odoo-update count them: every file of the module
 * by its relative path and content, without its static/, i18n/, i18n_extra/ and tests/ folders,
 * compiled Python and translation templates. A symlink counts by its target's text (not followed).
 * Prints `SVC-CHECKSUMS {"module": "sha256", ...}` and `SVC-DIRS {"module": "its directory"}`.
 */
export const CHECKSUMS_PY = `
import hashlib, json, os, sys
dirs = json.loads(sys.argv[1])
SKIP_TOP = {"static", "i18n", "i18n_extra", "tests"}
SKIP_EXT = (".pyc", ".pyo", ".pot")
sums, where = {}, {}
for d in dirs:
    try:
        names = sorted(os.listdir(d))
    except OSError:
        continue
    for name in names:
        mod = os.path.join(d, name)
        if name in sums or not os.path.isdir(mod):
            continue
        if not any(os.path.isfile(os.path.join(mod, m)) for m in ("__manifest__.py", "__openerp__.py")):
            continue
        h = hashlib.sha256()
        for root, subdirs, files in os.walk(mod):
            rel = os.path.relpath(root, mod)
            subdirs[:] = sorted(s for s in subdirs if s != "__pycache__" and not (rel == "." and s in SKIP_TOP))
            for f in sorted(files):
                if f.endswith(SKIP_EXT):
                    continue
                path = os.path.join(root, f)
                h.update(os.path.normpath(os.path.join(rel, f)).encode() + b"\\0")
                if os.path.islink(path):
                    h.update(b"link:" + os.readlink(path).encode())
                else:
                    with open(path, "rb") as fh:
                        for chunk in iter(lambda: fh.read(1 << 20), b""):
                            h.update(chunk)
                h.update(b"\\0")
        sums[name] = h.hexdigest()
        where[name] = d
print("SVC-CHECKSUMS " + json.dumps(sums, sort_keys=True))
print("SVC-DIRS " + json.dumps(where, sort_keys=True))
`;

/** The addons_path line of the service's configuration (only that line: the file holds the database password). */
export const readAddonsPath = (l: OdooLayout) => `sed -n 's/^addons_path *= *//p' ${q(l.config)}`;

/** The checksums of every module on these addons directories (CHECKSUMS_PY). */
export const checksumsScript = (dirs: readonly string[]) => `${PYTHON} -c ${q(CHECKSUMS_PY)} ${q(JSON.stringify(dirs))}`;

export function readChecksums(stdout: string): { sums: Record<string, string>; dirs: Record<string, string> } {
  const line = (prefix: string) =>
    stdout
      .split('\n')
      .find((l) => l.startsWith(prefix))
      ?.slice(prefix.length) ?? '{}';
  return { sums: JSON.parse(line('SVC-CHECKSUMS ')), dirs: JSON.parse(line('SVC-DIRS ')) };
}

/**
 * Where the maintenance flags of a host live: one file per tenant database being updated, read by
 * svc's addon (odoo-addons/svc_instance/maintenance.py) under Odoo's data_dir.
 */
export const maintenanceDir = (l: OdooLayout) => `${l.dataDir}/svc-maintenance`;

/** The tenant answers a maintenance page while its flag exists (docs/rollouts.md). */
export function setMaintenance(l: OdooLayout, database: string, on: boolean): string {
  const flag = q(`${maintenanceDir(l)}/${database}`);
  if (!on) return `rm -f ${flag}; echo "maintenance off: ${database}"`;
  return [
    `mkdir -p ${q(maintenanceDir(l))} && chmod 755 ${q(maintenanceDir(l))}`,
    `date -u +%Y-%m-%dT%H:%M:%SZ > ${flag} && chmod 644 ${flag}`,
    `echo "maintenance on: ${database}"`,
  ].join('\n');
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
export const waitForUpdate = (l: OdooLayout, database: string) =>
  `mkdir -p ${q(`${l.base}/run`)} && exec 8>${q(updateLock(l, database))}; flock -w 3600 8 || { echo 'an update of this database still runs after an hour' >&2; exit 3; }; echo free`;
