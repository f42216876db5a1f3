// Packages are apps (DESIGN §23, issue 48): a trial package's (and a subscription's) `packages` are
// Odoo modules by technical name. A template records the modules installed in its database (build
// and update read them); a host records the modules its Odoo's addons path holds (setup_odoo and
// each build list them, host/list-modules.sh). A package is refused at save (400 naming them) when
// it names a module its template's host does not have, or one its built template lacks: a template
// never gains modules behind the operator's back (docs/decisions.md). Unknown lists (a template svc
// did not build, a host not set up since) refuse nothing; a deployment still refuses a template
// known to lack the subscription's modules, so no instance is handed out without them.
import type { AppContext } from '../context.js';
import type { DbTx } from '../core/db.js';
import { UserError, ValidationError } from '../core/errors.js';
import { hostProgram, shCommand } from '../core/host-program.js';
import { SVC_ADDON } from '../instances/index.js';
import type { RemoteSession } from '../servers/index.js';
import type { OdooLayout } from './odoo-layout.js';

/** What every template svc builds has, whatever its packages name (svc's addon enforces the package). */
export const ALWAYS_INSTALLED = ['base', 'web', SVC_ADDON] as const;

const LIST_MODULES = hostProgram(new URL('./host/list-modules.sh', import.meta.url));
const STEP_TIMEOUT_MS = 2 * 60_000;

const sorted = (names: Iterable<string>) => [...new Set(names)].sort();

/**
 * The modules on the addons path of the host's Odoo (the service of `layout`), recorded on the host:
 * what a later package save is checked against.
 */
export async function listHostModules(
  ctx: Pick<AppContext, 'db'>,
  session: RemoteSession,
  serverId: number,
  layout: OdooLayout,
): Promise<string[]> {
  const res = await session.check(
    shCommand(LIST_MODULES, 'list-modules', layout.config),
    `Listing the modules of Odoo on root server ${serverId} failed`,
    {
      timeoutMs: STEP_TIMEOUT_MS,
      label: `list the modules on the addons path of ${layout.config} (src/odoo/host/list-modules.sh)`,
    },
  );
  const modules = sorted(
    res.stdout
      .split('\n')
      .filter((line) => line.startsWith('module='))
      .map((line) => line.slice(7).trim()),
  );
  await ctx.db.rootServer.update({ where: { id: serverId }, data: { odoo_modules: modules } });
  return modules;
}

/** The union of the `packages` of the trial packages that use the template. */
export async function packageModulesOf(db: Pick<DbTx, 'trialPackage'>, templateId: number): Promise<string[]> {
  const packages = await db.trialPackage.findMany({ where: { database_template_id: templateId }, select: { packages: true } });
  return sorted(packages.flatMap((p) => p.packages));
}

/** What `build` installs: the modules asked for, the packages' modules, and what svc always installs. */
export async function buildModules(db: Pick<DbTx, 'trialPackage'>, templateId: number, asked: readonly string[] = []) {
  return sorted([...ALWAYS_INSTALLED, ...asked, ...(await packageModulesOf(db, templateId))]);
}

/**
 * The names of `wanted` a host's Odoo does not have; none when its list is not known. What svc
 * always installs is not asked of the list: every Odoo has base and web, and setup_odoo ships svc's addon.
 */
export const notOnHost = (available: readonly string[], wanted: readonly string[]) =>
  available.length === 0
    ? []
    : sorted(wanted.filter((m) => !available.includes(m) && !(ALWAYS_INSTALLED as readonly string[]).includes(m)));

/** The names of `wanted` a template lacks; none when its modules are not known. */
export const notInTemplate = (template: { modules: readonly string[] }, wanted: readonly string[]) =>
  template.modules.length === 0 ? [] : sorted(wanted.filter((m) => !template.modules.includes(m)));

/**
 * A package's (or a subscription's) modules against the template it deploys from: 400 naming each
 * module the template's host does not have, else each the built template lacks.
 */
export async function assertPackageModules(
  db: Pick<DbTx, 'databaseTemplate'>,
  record: { packages: readonly string[]; database_template_id: number | null },
) {
  if (record.packages.length === 0 || record.database_template_id === null) return;
  const template = await db.databaseTemplate.findUnique({
    where: { id: record.database_template_id },
    select: { id: true, template_db_name: true, modules: true, root_server: { select: { id: true, odoo_modules: true } } },
  });
  if (!template) return; // the foreign key answers
  const host = template.root_server;
  const absent = host ? notOnHost(host.odoo_modules, record.packages) : [];
  if (absent.length > 0) {
    const message = `Odoo on root server ${host!.id} has no module ${absent.join(', ')} (not on its addons path as listed at its last setup_odoo or template build)`;
    throw new ValidationError(`packages: ${message}`, [{ field: 'body.packages', message }]);
  }
  const lacking = notInTemplate(template, record.packages);
  if (lacking.length > 0) {
    const message = `Template ${template.id} (${template.template_db_name}) was built without ${lacking.join(', ')}: run its update with {"modules": ${JSON.stringify(lacking)}} first`;
    throw new ValidationError(`packages: ${message}`, [{ field: 'body.packages', message }]);
  }
}

/** A deployment never hands out an instance its template is known to lack the subscription's modules for. */
export function assertTemplateHasPackages(
  template: { id: number; template_db_name: string; modules: readonly string[] },
  packages: readonly string[],
) {
  const lacking = notInTemplate(template, packages);
  if (lacking.length > 0) {
    throw new UserError(
      `Template ${template.id} (${template.template_db_name}) lacks module ${lacking.join(', ')} of the subscription's packages: update the template with them, then deploy again`,
    );
  }
}
