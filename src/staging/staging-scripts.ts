// What create_staging runs on the Odoo host (over SSH) and beside the service (pg_dump | pg_restore),
// and what a copy must show once neutralized (after create_staging and after each refresh).
import { spawn } from 'node:child_process';
import { UserError } from '../core/errors.js';
import type { Query } from '../instances/index.js';
import { asOdoo, type OdooLayout } from '../odoo/index.js';
import { sessionOptions } from '../postgresql/index.js';

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

export interface PgConnection {
  host: string;
  port: number;
  user: string;
  password: string | null;
}

/**
 * A consistent online copy: pg_dump takes one snapshot of the live database (the customer's Odoo
 * keeps reading and writing; nothing is locked but against DDL) and pg_restore writes it into
 * `target` as `to.user` (the tenant's own role: every object of the copy is its own, no ACL of the
 * source). `from` and `to` may be two servers. Answers pg_restore's end of output; rejects with both
 * programs' errors.
 */
export function dumpAndRestore(
  from: PgConnection,
  to: PgConnection,
  source: string,
  target: string,
  timeoutMs: number,
  path: string,
): Promise<string> {
  // Only what the two programs need: not the service's environment (its master key, its URLs). PGOPTIONS:
  // svc's own settings over whatever the database or the role sets (a `statement_timeout` or a `role`).
  const env = (pg: PgConnection) => ({
    PATH: path,
    PGPASSWORD: pg.password ?? '',
    PGCONNECT_TIMEOUT: '10',
    PGOPTIONS: sessionOptions(pg.host, pg.port),
  });
  const conn = (pg: PgConnection) => ['-h', pg.host, '-p', String(pg.port), '-U', pg.user];
  return new Promise((resolve, reject) => {
    const dump = spawn('pg_dump', [...conn(from), '-Fc', '-Z', '0', '-d', source], { env: env(from), stdio: ['ignore', 'pipe', 'pipe'] });
    const restore = spawn('pg_restore', [...conn(to), '--no-owner', '--no-acl', '--exit-on-error', '-d', target], {
      env: env(to),
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let dumpErr = '';
    let restoreOut = '';
    dump.stderr.on('data', (c: Buffer) => (dumpErr += c.toString()));
    restore.stderr.on('data', (c: Buffer) => (restoreOut += c.toString()));
    restore.stdout.on('data', (c: Buffer) => (restoreOut += c.toString()));
    dump.stdout.pipe(restore.stdin);
    restore.stdin.on('error', () => {}); // pg_restore gone: its own exit says why
    const timer = setTimeout(() => {
      dump.kill('SIGKILL');
      restore.kill('SIGKILL');
    }, timeoutMs);
    const codes: { dump?: number | null; restore?: number | null } = {};
    const settle = () => {
      if (!('dump' in codes) || !('restore' in codes)) return;
      clearTimeout(timer);
      if (codes.dump === 0 && codes.restore === 0) resolve(restoreOut.trim().slice(-500));
      else {
        const said = [dumpErr.trim() && `pg_dump: ${dumpErr.trim()}`, restoreOut.trim() && `pg_restore: ${restoreOut.trim()}`]
          .filter(Boolean)
          .join('\n');
        reject(
          new Error(`copying ${source} to ${target} failed (pg_dump ${codes.dump}, pg_restore ${codes.restore}): ${said.slice(-1500)}`),
        );
      }
    };
    dump.on('error', reject);
    restore.on('error', reject);
    dump.on('close', (code) => {
      codes.dump = code;
      settle();
    });
    restore.on('close', (code) => {
      codes.restore = code;
      // pg_restore gave up: nothing reads pg_dump's output any more, and it would wait on the pipe for ever.
      if (code !== 0 && !('dump' in codes)) dump.kill('SIGTERM');
      settle();
    });
  });
}
