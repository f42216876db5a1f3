// The one place that reads process.env (DESIGN §2). A bad value stops start-up naming the variable.
import { z } from 'zod';

const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === '' ? undefined : v));

const url = (protocols: string[]) =>
  z.string().refine((v) => {
    try {
      return protocols.includes(new URL(v).protocol);
    } catch {
      return false;
    }
  }, `must be a URL (${protocols.join(' or ')})`);

// Comma-separated IPv4 addresses, each optionally with :port (node's dns setServers format).
const dnsServers = z
  .string()
  .transform((v) => v.split(',').map((s) => s.trim()).filter(Boolean))
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
  // Where push_commit fetches a repository from ({name} = owner/repo); HTTPS uses the account's token.
  GIT_CLONE_URL: z
    .string()
    .refine((v) => v.includes('{name}'), 'must contain {name}')
    .refine((v) => /^(https?|file):\/\/\S+$/.test(v), 'must be an https://, http:// or file:// URL')
    .default('https://github.com/{name}.git'),
  SVC_ROLE: z.enum(['all', 'api', 'worker']).default('all'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  // Comma-separated proxy addresses/CIDRs whose X-Forwarded-For is believed; unset = socket address.
  TRUST_PROXY: optionalString.transform((v) => (v === undefined ? false : v.split(',').map((s) => s.trim()).filter(Boolean))),
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
  // Beyond DESIGN §2: tuning knobs with safe defaults.
  // Redis key prefix of the job queues: services sharing one Redis keep their jobs apart.
  QUEUE_PREFIX: z.string().regex(/^[A-Za-z0-9_.:-]+$/, 'letters, digits and _ . : - only').default('svc'),
  WORKER_CONCURRENCY: z.coerce.number().int().min(1).max(1000).default(10),
  MONITOR_CONCURRENCY: z.coerce.number().int().min(1).max(5000).default(200),
  // Every outbound call (HTTP APIs, DNS lookups) gives up after this long.
  OUTBOUND_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(10_000),
  // Longest answer body read from a remote HTTP API; a longer one fails the call.
  OUTBOUND_MAX_RESPONSE_BYTES: z.coerce.number().int().min(1024).max(1024 ** 3).default(1024 ** 2),
  // Name servers of the DNS Resolver setting's `cloudflare` and `google` choices (host or host:port).
  DNS_CLOUDFLARE_SERVERS: dnsServers.default(['1.1.1.1', '1.0.0.1']),
  DNS_GOOGLE_SERVERS: dnsServers.default(['8.8.8.8', '8.8.4.4']),
});

export type Config = z.infer<typeof envSchema>;

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** Parses the environment; throws ConfigError whose message names every bad variable. */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const result = envSchema.safeParse(env);
  if (!result.success) {
    const lines = result.error.issues.map((issue) => `  ${issue.path.join('.')}: ${issue.message}`);
    throw new ConfigError(`Invalid configuration:\n${lines.join('\n')}`);
  }
  return result.data;
}
