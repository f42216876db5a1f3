// What create_staging runs on the Odoo host (over SSH), and what a copy must show once neutralized
// (after create_staging and after each refresh). The copy itself is instances' dumpAndRestore.
import { UserError } from '../core/errors.js';
import type { Query } from '../instances/index.js';
import { asOdoo, type OdooLayout } from '../odoo/index.js';

/**
 * Odoo's own neutralization of a database (`odoo-bin neutralize`, 18.0 and 19.0): every installed
 * module's data/neutralize.sql — crons off (but the autovacuum), outgoing mail servers off and a
 * dummy one that cannot send, webhooks and payment providers off, the neutralized ribbon, and
 * database.is_neutralized — run as odoo with the host's configuration (its addons path), connected as
 * the copy's own role: `neutralize` loads no server-wide module, so svc's tenant_db (which opens a
 * customer database as its role) is installed first by this launcher.
 */
export function neutralizeScript(l: OdooLayout, source: string, database: string): string {
  const tenantDb = `${l.svcAddons}/svc_instance/tenant_db.py`;
  const neutralize = ['odoo-bin', 'neutralize', '-c', l.config, '-d', database];
  return asOdoo(l, { source, database, kind: 'neutralize' }, ['-c', WITH_TENANT_ROLES_PY, tenantDb, ...neutralize]);
}

/** What a copy must show once neutralized: Odoo's flag, no cron but the autovacuum, no mail server but Odoo's dummy one. */
export async function neutralized(query: Query) {
  const { rows } = await query(
    `SELECT (SELECT value FROM public.ir_config_parameter WHERE key = 'database.is_neutralized') AS flag,
            (SELECT count(*) FROM public.ir_cron c WHERE c.active AND c.id NOT IN (
               SELECT res_id FROM public.ir_model_data WHERE model = 'ir.cron' AND module = 'base' AND name = 'autovacuum_job'))::int AS crons,
            (SELECT count(*) FROM public.ir_mail_server WHERE active AND smtp_host <> 'invalid')::int AS mail_servers`,
  );
  const r = rows[0] as { flag: string | null; crons: number; mail_servers: number };
  if (r.flag !== 'true' || r.crons > 0 || r.mail_servers > 0) {
    throw new UserError(
      `The copy is not neutralized: database.is_neutralized=${r.flag ?? 'unset'}, ${r.crons} active cron(s), ${r.mail_servers} active mail server(s)`,
    );
  }
}

/** Runs the odoo-bin of argv[2:] once svc's tenant_db (argv[1]) has patched how Odoo connects to a database. */
const WITH_TENANT_ROLES_PY = [
  'import importlib.util, os, runpy, sys',
  'sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[2])))',
  'spec = importlib.util.spec_from_file_location("svc_tenant_db", sys.argv[1])',
  'module = importlib.util.module_from_spec(spec)',
  'spec.loader.exec_module(module)',
  'module.install()',
  'sys.argv = sys.argv[2:]',
  'runpy.run_path(sys.argv[0], run_name="__main__")',
].join('\n');
