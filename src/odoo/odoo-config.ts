// Odoo's configuration file on a host, and the sizing of its workers from the host's cores and
// memory (Odoo's deployment guide: 2 workers per core plus one, about 1 GB for a heavy worker and
// 150 MB for a light one, one heavy in five). Every value is validated before it gets here; the
// secrets are written as they are only into the file (root:odoo 0640), and the action log shows the
// file with MASK in their place.
import { dbMaxconn } from './odoo-connections.js';
import { geventPortOf, type OdooLayout } from './odoo-layout.js';

export interface HostFacts {
  cores: number;
  memoryBytes: number;
  systemd: boolean;
}

export interface Sizing {
  workers: number;
  limit_memory_soft: number;
  limit_memory_hard: number;
}

const MB = 1024 * 1024;
/** What one worker costs on average (a heavy one in five at 1 GB, the others 150 MB). */
const AVERAGE_WORKER_BYTES = 325 * MB;

/** Workers from the cores and the memory (80 % of it for Odoo), and memory limits per worker. */
export function sizeWorkers(facts: Pick<HostFacts, 'cores' | 'memoryBytes'>, asked?: number, cronThreads = 0): Sizing {
  const byCores = 2 * Math.max(1, facts.cores) + 1;
  const byMemory = Math.floor((facts.memoryBytes * 0.8) / AVERAGE_WORKER_BYTES);
  const workers = asked ?? Math.max(1, Math.min(byCores, byMemory));
  // Each process may grow to its share of 80 % of the memory, between 512 MB and Odoo's 2 GB default.
  const share = (facts.memoryBytes * 0.8) / Math.max(1, workers + cronThreads);
  const soft = Math.round(Math.min(2048 * MB, Math.max(512 * MB, share)));
  return { workers, limit_memory_soft: soft, limit_memory_hard: Math.round(soft * 1.25) };
}

export interface OdooConfigInput {
  layout: OdooLayout;
  /** The version's source tree on the host, and its Odoo series (18, 19...). */
  source: string;
  series: number;
  /** Addons directories of the source tree that exist (odoo/addons, addons). */
  addonsDirs: readonly string[];
  httpPort: number;
  db: { host: string; port: number; user: string; password: string };
  /** passlib pbkdf2-sha512 hash of the master password. */
  adminPasswdHash: string;
  dbfilter: string;
  sizing: Sizing;
  maxCronThreads: number;
  serverWideModules: readonly string[];
  /** What svc's own calls to this Odoo carry (X-Svc-Host-Secret): svc_instance reads it from [svc] host_secret. */
  hostSecret?: string;
}

/** svc's addon, loaded by every process (its request routing) from the host's svc-addons directory. */
export const SVC_SERVER_WIDE_MODULE = 'svc_instance';

export function odooConfig(c: OdooConfigInput): string {
  const pools = dbMaxconn({ workers: c.sizing.workers, maxCronThreads: c.maxCronThreads });
  const lines = [
    '; Written by svc (setup_odoo): changes are replaced at the next set-up.',
    '[options]',
    `db_host = ${c.db.host}`,
    `db_port = ${c.db.port}`,
    `db_user = ${c.db.user}`,
    `db_password = ${c.db.password}`,
    `dbfilter = ${c.dbfilter}`,
    'list_db = False',
    `admin_passwd = ${c.adminPasswdHash}`,
    `data_dir = ${c.layout.dataDir}`,
    `addons_path = ${[...c.addonsDirs, c.layout.svcAddons].join(',')}`,
    `server_wide_modules = ${[...c.serverWideModules.filter((m) => m !== SVC_SERVER_WIDE_MODULE), SVC_SERVER_WIDE_MODULE].join(',')}`,
    'http_interface = 127.0.0.1',
    `http_port = ${c.httpPort}`,
    `gevent_port = ${geventPortOf(c.httpPort)}`,
    'proxy_mode = True',
    // 19.0 reads a boolean (and warns about `all`); 18.0 a list of modules or `all`.
    `without_demo = ${c.series >= 19 ? 'True' : 'all'}`,
    `workers = ${c.sizing.workers}`,
    `max_cron_threads = ${c.maxCronThreads}`,
    // Each process's pool (odoo-connections.ts): what every host of a PostgreSQL server is counted by.
    `db_maxconn = ${pools.db_maxconn}`,
    ...(pools.db_maxconn_gevent === null ? [] : [`db_maxconn_gevent = ${pools.db_maxconn_gevent}`]),
    `limit_memory_soft = ${c.sizing.limit_memory_soft}`,
    `limit_memory_hard = ${c.sizing.limit_memory_hard}`,
    'limit_time_cpu = 600',
    'limit_time_real = 1200',
    'log_level = info',
  ];
  // A section of svc's own: Odoo reads only [options] (19.0 warns about options it does not know).
  if (c.hostSecret) lines.push('', '[svc]', `host_secret = ${c.hostSecret}`);
  return `${lines.join('\n')}\n`;
}
