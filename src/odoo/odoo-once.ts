// The one way svc runs odoo-bin once on a host as the odoo user (host/odoo-once.sh): a template's
// build, update and first-page assets (odoo-bin shell), a tenant's update in a rollout, a staging
// copy's neutralization. Odoo's output is kept whole in a file under the logs directory, named by
// the service, the database and the run's kind; what it said that matters is printed.
import { hostProgram, shCommand } from '../core/host-program.js';
import type { OdooLayout } from './odoo-layout.js';

const ODOO_ONCE = hostProgram(new URL('./host/odoo-once.sh', import.meta.url));

export interface OdooRun {
  /** The version's source tree (odoo-bin is run from there). */
  source: string;
  database: string;
  /** The run's kind: the log is <base>/logs/<service>-<database>.<kind>.log. */
  kind: string;
  /** A file locked while Odoo runs (another run with the same lock waits for it, at most an hour). */
  lock?: string | undefined;
  /**
   * `answer`: Odoo's standard output is the program's answer (odoo-bin shell, its program on
   * standard input); its log goes to the file only, printed on stderr when it fails. Default `log`.
   */
  output?: 'log' | 'answer';
}

/** The log file of a run (root's and odoo's group only, as every log there). */
export const odooRunLog = (l: OdooLayout, run: Pick<OdooRun, 'database' | 'kind'>) =>
  `${l.base}/logs/${l.service}-${run.database}.${run.kind}.log`;

/**
 * The command running /usr/bin/python3 with `python` (odoo-bin and its options, or a launcher of it)
 * as odoo, in the source tree, with the data directory as HOME. Exit code: Odoo's; 3 with the reason
 * on stderr when it could not start (no such tree, the lock held for an hour).
 */
export function asOdoo(l: OdooLayout, run: OdooRun, python: readonly string[]): string {
  return shCommand(ODOO_ONCE, 'odoo-once', run.source, l.dataDir, odooRunLog(l, run), run.lock ?? '', run.output ?? 'log', ...python);
}

/**
 * odoo-bin's arguments for one run on one database with the host's configuration: no HTTP, no
 * workers, no cron (the running service keeps its port), and it stops once done (`shell` reads its
 * program on standard input and stops at its end).
 */
export function odooBin(l: OdooLayout, database: string, args: readonly string[], command?: 'shell'): string[] {
  const common = ['-c', l.config, '-d', database, ...args, '--no-http', '--workers=0', '--max-cron-threads=0'];
  return command === 'shell' ? ['odoo-bin', 'shell', ...common] : ['odoo-bin', ...common, '--stop-after-init'];
}
