// The one place that reads process.env and .env. A bad value stops start-up naming the
// variable.
import { existsSync, readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import path from 'node:path';
import { parseEnv } from 'node:util';
import { z } from 'zod';

const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === '' ? undefined : v));

/** A whole number in [min, max]; empty (`PORT=` in .env) is unset, never 0. */
const intVar = (min: number, max: number, fallback: number) =>
  z.preprocess((v) => (v === '' ? undefined : v), z.coerce.number().int().min(min).max(max).default(fallback));

const url = (protocols: string[]) => z.string().refine((v) => isUrl(v, protocols), `must be a URL (${protocols.join(' or ')})`);

function isUrl(v: string, protocols: string[]): boolean {
  try {
    return protocols.includes(new URL(v).protocol);
  } catch {
    return false;
  }
}

/** An http(s) base URL, without trailing slashes. */
const baseUrl = (fallback: string) =>
  url(['http:', 'https:'])
    .default(fallback)
    .transform((v) => v.replace(/\/+$/, ''));

const commaList = (v: string) =>
  v
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);

// Comma-separated IPv4 addresses, each optionally with :port (node's dns setServers format).
const dnsServers = z
  .string()
  .transform(commaList)
  .pipe(z.array(z.string().regex(/^\d{1,3}(\.\d{1,3}){3}(:\d{1,5})?$/, 'IPv4 addresses, optionally with :port')).min(1));

// Comma-separated host:port pairs (a host name, an IPv4 address or a bracketed IPv6 address).
const hostPorts = z.string().transform((v, check) => {
  const out: { host: string; port: number }[] = [];
  for (const item of commaList(v)) {
    const m = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(item);
    if (!m || Number(m[2]) < 1 || Number(m[2]) > 65535) {
      check.addIssue({ code: 'custom', message: `not host:port: ${item}` });
      continue;
    }
    out.push({ host: m[1]!.replace(/^\[|\]$/g, ''), port: Number(m[2]) });
  }
  if (out.length === 0) check.addIssue({ code: 'custom', message: 'names no host:port' });
  return out;
});

// Comma-separated networks (CIDR, or a single address) that outbound HTTP may reach although they
// are loopback, link-local or unspecified; normalized to address/prefix.
const netList = z.string().transform((v, check) => {
  const nets = commaList(v);
  const bad = nets.filter((net) => !cidr(net));
  if (bad.length > 0) check.addIssue({ code: 'custom', message: `not a CIDR (address/prefix) or an IP address: ${bad.join(', ')}` });
  return nets.map((net) => cidr(net) ?? net);
});

/** "10.0.0.0/8" or "10.1.2.3" (→ /32, /128) as address/prefix; null when it is neither. */
function cidr(v: string): string | null {
  const [address = '', prefix, ...rest] = v.split('/');
  const family = isIP(address);
  if (family === 0 || rest.length > 0) return null;
  const max = family === 4 ? 32 : 128;
  if (prefix === undefined) return `${address}/${max}`;
  if (!/^\d{1,3}$/.test(prefix) || Number(prefix) > max) return null;
  return `${address}/${Number(prefix)}`;
}

const envSchema = z.object({
  DATABASE_URL: url(['postgresql:', 'postgres:']).default('postgresql://postgres@127.0.0.1:5432/svc'),
  REDIS_URL: url(['redis:', 'rediss:']).default('redis://127.0.0.1:6379'),
  // Redis through Sentinel (docs/high-availability.md): when set, every Redis connection asks
  // these sentinels for the primary named REDIS_SENTINEL_NAME and follows its failovers; REDIS_URL
  // is then not used. REDIS_PASSWORD is the data nodes' password (in either set-up; it wins over
  // one in REDIS_URL), REDIS_SENTINEL_PASSWORD the sentinels' own.
  REDIS_SENTINELS: optionalString.pipe(hostPorts.optional()),
  REDIS_SENTINEL_NAME: z
    .string()
    .regex(/^[A-Za-z0-9._-]+$/, 'letters, digits and . _ - only')
    .default('mymaster'),
  REDIS_SENTINEL_PASSWORD: optionalString,
  REDIS_PASSWORD: optionalString,
  PORT: intVar(0, 65535, 3000),
  HOST: z.string().min(1).default('0.0.0.0'),
  BASE_URL: baseUrl('http://localhost:3000'),
  SMTP_URL: optionalString.pipe(url(['smtp:', 'smtps:']).optional()),
  MAIL_FROM: z.string().min(1).default('svc <no-reply@localhost>'),
  // Without SMTP_URL, each mail is written here as an .eml file (made 0700 when missing).
  MAIL_DIR: z.string().min(1).default('./data/mail'),
  SVC_MASTER_KEY_FILE: z.string().min(1).default('./data/master.key'),
  GIT_API_URL: baseUrl('https://api.github.com'),
  SVC_ROLE: z.enum(['all', 'api', 'worker']).default('all'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  // Comma-separated proxy addresses/CIDRs whose X-Forwarded-For is believed; unset = socket address.
  TRUST_PROXY: optionalString.transform((v) => (v === undefined ? false : commaList(v))),
  FCM_API_URL: baseUrl('https://fcm.googleapis.com'),
  CODE_SERVER_INSTALL_CMD: z.string().min(1).default('curl -fsSL https://code-server.dev/install.sh | sh'),
  // Base directory of the Odoo layout that setup_dir_structure creates on root servers.
  ODOO_BASE_PATH: z
    .string()
    .regex(/^\/[A-Za-z0-9._/-]*$/, 'an absolute path (letters, digits and . _ - / only)')
    .default('/opt/odoo')
    .transform((v) => (v.length > 1 ? v.replace(/\/+$/, '') : v)),
  // Address of a customer's instance: {database_name} is replaced by the subscription's. setup_proxy
  // serves its host pattern on each Odoo host (Caddy on port 80, or 443 with on-demand TLS for https).
  SUBSCRIPTION_URL: z
    .string()
    .default('http://{database_name}.localhost')
    .refine((v) => v.includes('{database_name}'), 'must contain {database_name}')
    .refine(
      (v) => isUrl(v.replaceAll('{database_name}', 'db'), ['http:', 'https:']),
      'must be an http:// or https:// URL once {database_name} is replaced',
    ),
  // Address of a staging copy (src/staging): {database_name} is the copy's; the operator's
  // staging domain, never a customer's.
  STAGING_URL: z
    .string()
    .default('http://{database_name}.staging.localhost')
    .refine((v) => v.includes('{database_name}'), 'must contain {database_name}')
    .refine(
      (v) => isUrl(v.replaceAll('{database_name}', 'db'), ['http:', 'https:']),
      'must be an http:// or https:// URL once {database_name} is replaced',
    ),
  // Days a staging copy lives before it is dropped.
  STAGING_DAYS: intVar(1, 365, 7),
  // Days the old copy of a moved instance is kept (a move_back until then).
  MOVE_KEEP_DAYS: intVar(0, 365, 3),
  // Where the local programs svc runs (pg_dump, pg_restore) are found: the process's own PATH. They
  // get it and what they need, never the service's environment (its keys and URLs).
  PATH: z.string().default('/usr/local/bin:/usr/bin:/bin'),
  // Tuning knobs with safe defaults.
  // Redis key prefix of the job queues: services sharing one Redis keep their jobs apart.
  QUEUE_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_.:-]+$/, 'letters, digits and _ . : - only')
    .default('svc'),
  WORKER_CONCURRENCY: intVar(1, 1000, 10),
  // A worker process (SVC_ROLE=worker) serves GET /metrics on this port (on HOST); 0 = not at all.
  // API processes serve it on PORT.
  METRICS_PORT: intVar(0, 65535, 9464),
  // Monitoring: SSH connections a worker opens at once (warm-up, take-over of a dead worker's servers).
  MONITOR_CONCURRENCY: intVar(1, 5000, 200),
  // Crash detection of jobs (BullMQ lockDuration and stalledInterval): a running job's lock lasts
  // this long and is renewed at half of it; every interval, jobs whose lock expired are taken as
  // stalled (their worker died). Lower finds a dead worker sooner; too low, and a busy worker's
  // jobs are taken as stalled too.
  JOB_LOCK_MS: intVar(1000, 600_000, 30_000),
  JOB_STALLED_INTERVAL_MS: intVar(500, 600_000, 30_000),
  // How often each worker process checks whether Redis lost its data (it keeps nothing on disk),
  // to put the schedules back from PostgreSQL; at most a minute.
  REDIS_LOSS_CHECK_MS: intVar(100, 60_000, 15_000),
  // Every outbound call (HTTP APIs, DNS lookups) gives up after this long.
  OUTBOUND_TIMEOUT_MS: intVar(100, 600_000, 10_000),
  // Longest answer body read from a remote HTTP API; a longer one fails the call.
  OUTBOUND_MAX_RESPONSE_BYTES: intVar(1024, 1024 ** 3, 1024 ** 2),
  // Outbound HTTP never connects to loopback, link-local or unspecified addresses, except in these
  // networks (e.g. 127.0.0.1/32 for a backup server on the same machine). Private networks need no entry.
  OUTBOUND_ALLOW_NETS: netList.default([]),
  // How long a backup job waits for the backup server to report the backup done or failed, and
  // how soon it first asks (the interval then doubles, up to 30 s).
  BACKUP_WAIT_MS: intVar(100, 86_400_000, 3_600_000),
  BACKUP_POLL_MS: intVar(10, 60_000, 2_000),
  // svc's own backup server (npm run backup-server): the backup server record it is (its API key is
  // that record's), where it listens, and where it keeps its local restic repository, its work
  // folders and restic's cache.
  BACKUP_SERVER_ID: z.preprocess((v) => (v === '' ? undefined : v), z.coerce.number().int().min(1).optional()),
  BACKUP_SERVER_PORT: intVar(1, 65535, 3100),
  BACKUP_SERVER_HOST: z.string().default('127.0.0.1'),
  BACKUP_DIR: z.string().min(1).default('./data/backup-server'),
  // Backups (and restores) the backup server runs at once; never more than one per Odoo host.
  BACKUP_CONCURRENCY: intVar(1, 100, 2),
  // How long a backup's download link (GET /api/backups' url) stays good.
  BACKUP_LINK_TTL_SECONDS: intVar(60, 7 * 86_400, 3600),
  // How often the backup server verifies (a tenant's backup restored, served and signed in to;
  // restic check of each repository), in days; 0: only when asked (POST /api/verify).
  BACKUP_VERIFY_DAYS: intVar(0, 366, 7),
  // Largest commit tree push_commit deploys, as downloaded and as unpacked (a gzip bomb stops here).
  GIT_DEPLOY_MAX_BYTES: intVar(1024, 64 * 1024 ** 3, 1024 ** 3),
  // Name servers of the DNS Resolver setting's `cloudflare` and `google` choices (host or host:port).
  DNS_CLOUDFLARE_SERVERS: dnsServers.default(['1.1.1.1', '1.0.0.1']),
  DNS_GOOGLE_SERVERS: dnsServers.default(['8.8.8.8', '8.8.4.4']),
  // Customer domains: Caddy on the Odoo host gets their certificates from this ACME directory
  // (written into its config: no whitespace, quotes or braces).
  ACME_CA_URL: url(['https:', 'http:'])
    .refine((v) => !/[\s"'`{}\\]/.test(v), 'must not contain whitespace, quotes, braces or backslashes')
    .default('https://acme-v02.api.letsencrypt.org/directory'),
  // The ACME account's contact (expiry and policy mails from the CA).
  ACME_EMAIL: optionalString.pipe(z.email().optional()),
  // The tenants' own https addresses: unset = a certificate per tenant by Caddy's on-demand TLS
  // (svc's ask endpoint decides); else Caddy's DNS provider line (`cloudflare {env.CF_API_TOKEN}`)
  // for one wildcard certificate through the DNS-01 challenge (a Caddy with that module).
  TENANT_TLS_DNS: optionalString.pipe(
    z
      .string()
      .regex(/^[a-z0-9_]+( [A-Za-z0-9_.:{}-]+)*$/, 'a DNS provider and its arguments: letters, digits, spaces and _ . - : { } only')
      .optional(),
  ),
  // A PEM file on this machine, copied to the Odoo host for Caddy's acme_ca_root: the root of a
  // private ACME server's own HTTPS certificate (Pebble in tests).
  ACME_CA_ROOT_PEM: optionalString,
  // Where Odoo listens on its host: Caddy proxies the customer domains to 127.0.0.1 on this port.
  ODOO_HTTP_PORT: intVar(1, 65535, 8069),
  // setup_odoo and restart_odoo wait this long for Odoo's /web/health to answer 200 on its host.
  ODOO_HEALTH_TIMEOUT_MS: intVar(1000, 3_600_000, 120_000),
  // The longest one piece of work inside a customer's database may take: at the end its session is
  // ended from outside (a tenant's lock or setting cannot hold the service longer).
  TENANT_DEADLINE_SECONDS: intVar(1, 3600, 60),
});

export type Config = z.infer<typeof envSchema>;

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/**
 * The process's environment with the `.env` file of `dir` under it: a variable already set in the
 * environment wins over the file. No file, no change.
 */
export function environment(dir = process.cwd(), env: NodeJS.ProcessEnv = process.env): Record<string, string | undefined> {
  const file = path.join(dir, '.env');
  if (!existsSync(file)) return env;
  try {
    return { ...parseEnv(readFileSync(file, 'utf8')), ...env };
  } catch (err) {
    throw new ConfigError(`Cannot read ${file}: ${(err as Error).message}`);
  }
}

/** Parses the environment (with .env); throws ConfigError whose message names every bad variable. */
export function loadConfig(env: Record<string, string | undefined> = environment()): Config {
  const result = envSchema.safeParse(env);
  if (!result.success) {
    const lines = result.error.issues.map((issue) => `  ${issue.path.join('.')}: ${issue.message}`);
    throw new ConfigError(`Invalid configuration:\n${lines.join('\n')}`);
  }
  return result.data;
}
