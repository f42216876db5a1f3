// The one place that reads process.env and .env (DESIGN §2). A bad value stops start-up naming the
// variable.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parseEnv } from 'node:util';
import { z } from 'zod';

const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === '' ? undefined : v));

const url = (protocols: string[]) =>
  z.string().refine(
    (v) => {
      try {
        return protocols.includes(new URL(v).protocol);
      } catch {
        return false;
      }
    },
    `must be a URL (${protocols.join(' or ')})`,
  );

// Comma-separated IPv4 addresses, each optionally with :port (node's dns setServers format).
const dnsServers = z
  .string()
  .transform((v) =>
    v
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  )
  .pipe(z.array(z.string().regex(/^\d{1,3}(\.\d{1,3}){3}(:\d{1,5})?$/, 'IPv4 addresses, optionally with :port')).min(1));

const envSchema = z.object({
  DATABASE_URL: url(['postgresql:', 'postgres:']).default('postgresql://postgres@127.0.0.1:5432/svc'),
  REDIS_URL: url(['redis:', 'rediss:']).default('redis://127.0.0.1:6379'),
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  HOST: z.string().min(1).default('0.0.0.0'),
  BASE_URL: url(['http:', 'https:'])
    .default('http://localhost:3000')
    .transform((v) => v.replace(/\/+$/, '')),
  SMTP_URL: optionalString.pipe(url(['smtp:', 'smtps:']).optional()),
  MAIL_FROM: z.string().min(1).default('svc <no-reply@localhost>'),
  SVC_MASTER_KEY_FILE: z.string().min(1).default('./data/master.key'),
  GIT_API_URL: url(['http:', 'https:'])
    .default('https://api.github.com')
    .transform((v) => v.replace(/\/+$/, '')),
  SVC_ROLE: z.enum(['all', 'api', 'worker']).default('all'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  // Comma-separated proxy addresses/CIDRs whose X-Forwarded-For is believed; unset = socket address.
  TRUST_PROXY: optionalString.transform((v) =>
    v === undefined
      ? false
      : v
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean),
  ),
  FCM_API_URL: url(['http:', 'https:'])
    .default('https://fcm.googleapis.com')
    .transform((v) => v.replace(/\/+$/, '')),
  CODE_SERVER_INSTALL_CMD: z.string().min(1).default('curl -fsSL https://code-server.dev/install.sh | sh'),
  // Base directory of the Odoo layout that setup_dir_structure creates on root servers (DESIGN §7).
  ODOO_BASE_PATH: z
    .string()
    .regex(/^\/[A-Za-z0-9._/-]*$/, 'an absolute path (letters, digits and . _ - / only)')
    .default('/opt/odoo')
    .transform((v) => (v.length > 1 ? v.replace(/\/+$/, '') : v)),
  // Address of a customer's instance (DESIGN §9): {database_name} is replaced by the subscription's.
  SUBSCRIPTION_URL: z
    .string()
    .default('http://{database_name}.localhost:8069')
    .refine((v) => v.includes('{database_name}'), 'must contain {database_name}')
    .refine((v) => {
      try {
        return ['http:', 'https:'].includes(new URL(v.replaceAll('{database_name}', 'db')).protocol);
      } catch {
        return false;
      }
    }, 'must be an http:// or https:// URL once {database_name} is replaced'),
  // Beyond DESIGN §2: tuning knobs with safe defaults.
  // Redis key prefix of the job queues: services sharing one Redis keep their jobs apart.
  QUEUE_PREFIX: z
    .string()
    .regex(/^[A-Za-z0-9_.:-]+$/, 'letters, digits and _ . : - only')
    .default('svc'),
  WORKER_CONCURRENCY: z.coerce.number().int().min(1).max(1000).default(10),
  // Monitoring: SSH connections a worker opens at once (warm-up, take-over of a dead worker's servers).
  MONITOR_CONCURRENCY: z.coerce.number().int().min(1).max(5000).default(200),
  // Crash detection of jobs (BullMQ lockDuration and stalledInterval): a running job's lock lasts
  // this long and is renewed at half of it; every interval, jobs whose lock expired are taken as
  // stalled (their worker died). Lower finds a dead worker sooner; too low, and a busy worker's
  // jobs are taken as stalled too.
  JOB_LOCK_MS: z.coerce.number().int().min(1000).max(600_000).default(30_000),
  JOB_STALLED_INTERVAL_MS: z.coerce.number().int().min(500).max(600_000).default(30_000),
  // Every outbound call (HTTP APIs, DNS lookups) gives up after this long.
  OUTBOUND_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(10_000),
  // Longest answer body read from a remote HTTP API; a longer one fails the call.
  OUTBOUND_MAX_RESPONSE_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .max(1024 ** 3)
    .default(1024 ** 2),
  // How long a backup job waits for the backup server to report the backup done or failed, and
  // how soon it first asks (the interval then doubles, up to 30 s).
  BACKUP_WAIT_MS: z.coerce.number().int().min(100).max(86_400_000).default(3_600_000),
  BACKUP_POLL_MS: z.coerce.number().int().min(10).max(60_000).default(2_000),
  // Largest commit tree push_commit deploys, as downloaded and as unpacked (a gzip bomb stops here).
  GIT_DEPLOY_MAX_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .max(64 * 1024 ** 3)
    .default(1024 ** 3),
  // Name servers of the DNS Resolver setting's `cloudflare` and `google` choices (host or host:port).
  DNS_CLOUDFLARE_SERVERS: dnsServers.default(['1.1.1.1', '1.0.0.1']),
  DNS_GOOGLE_SERVERS: dnsServers.default(['8.8.8.8', '8.8.4.4']),
});

export type Config = z.infer<typeof envSchema>;

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/**
 * The process's environment with the `.env` file of `dir` under it: a variable already set in the
 * environment wins over the file (DESIGN §2). No file, no change.
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
