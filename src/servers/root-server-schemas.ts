// Root server request and response shapes. Secrets (password, key,
// code_server_password) are write-only: responses carry `<field>_set`.
import { z } from 'zod';
import { nullableTimestamp, secretFlags, timestamp } from '../core/http/schemas.js';
import { CodeServerState, OdooState, RootServerState, ServerState } from '../generated/prisma/enums.js';
import { rootServerModel } from './root-server-models.js';
import { latestMetricsOut, MONITOR_INTERVALS } from './root-server-metrics.js';

const host = z
  .string()
  .trim()
  .min(1)
  .max(253)
  .regex(/^[A-Za-z0-9._:-]+$/, 'must be a host name or an IP address');
const username = z
  .string()
  .trim()
  .min(1)
  .max(64)
  .regex(/^[A-Za-z_][A-Za-z0-9_.-]*$/, 'must be a user name');
const port = z.number().int().min(1).max(65535);
// A sudo password is fed to `sudo -S` as one line: it cannot contain a line break.
const password = z
  .string()
  .max(1024)
  .refine((v) => !/[\r\n]/.test(v), 'must not contain line breaks')
  .nullable()
  .describe('Write-only. Also the sudo password when sudo_user is set and sudo_user_no_password is not. "" or null clears it');
const key = z
  .string()
  .max(32_768)
  .nullable()
  .describe('Write-only private key, OpenSSH or PEM format (RSA, Ed25519, ECDSA), without passphrase. "" or null clears it');
export const hostKeyFingerprint = z
  .string()
  .regex(/^[a-z0-9@.-]+ SHA256:[A-Za-z0-9+/]{43}$/, 'must read "<algorithm> SHA256:<base64>", e.g. "ssh-ed25519 SHA256:..."');

const editable = {
  name: z.string().trim().max(200).nullable(),
  ip: host,
  username,
  password,
  key,
  port,
  sudo_user: z.boolean(),
  sudo_user_no_password: z.boolean(),
  monitor_update_interval: z.enum(MONITOR_INTERVALS),
  code_server_port: port,
  code_server_password: password.describe('Write-only password of the web code editor'),
  code_server_domain: z
    .string()
    .trim()
    .max(253)
    .nullable()
    .describe('Domain or URL of the code editor; unset: http://<ip>:<code_server_port>'),
  cmd: z.string().max(10_000).nullable().describe('Command run by run_cmd'),
  // Placement (docs/fleet.md): each null derives the figure from the host's memory and disk.
  capacity_tenants: z
    .number()
    .int()
    .min(0)
    .max(1_000_000)
    .nullable()
    .describe('Tenants placement puts here at most (null: from the memory, 64 MB a tenant)'),
  capacity_memory_bytes: z
    .number()
    .int()
    .min(0)
    .max(2 ** 50)
    .nullable()
    .describe("Memory for tenants (null: 80 % of the host's memory as setup_odoo or monitoring read it)"),
  capacity_disk_bytes: z
    .number()
    .int()
    .min(0)
    .max(2 ** 53 - 1)
    .nullable()
    .describe("Disk for tenants, 10 % of it kept free (null: the newest monitoring sample's disk)"),
};

export const rootServerCreate = z
  .object({
    ...editable,
    uuid: z.uuid().optional().describe('Generated when omitted; unique'),
  })
  .partial()
  .required({ ip: true })
  .strict()
  .meta({
    example: {
      name: 'web-1',
      ip: '203.0.113.10',
      username: 'odoo',
      password: 'ssh-password',
      sudo_user: true,
      monitor_update_interval: '1m',
    },
  });

export const rootServerUpdate = z
  .object({
    ...editable,
    host_key: hostKeyFingerprint
      .nullable()
      .describe('The SSH host key to expect; null trusts the key presented at the next connection (see README)'),
  })
  .partial()
  .strict()
  .meta({ example: { name: 'web-1 (Frankfurt)', monitor_update_interval: '30s' } });

export const rootServerOut = z
  .object({
    id: z.number().int(),
    name: z.string().nullable(),
    ip: z.string(),
    username: z.string(),
    port: z.number().int(),
    state: z.enum(RootServerState),
    sudo_user: z.boolean(),
    sudo_user_no_password: z.boolean(),
    uuid: z.string(),
    host_key: z.string().nullable().describe('Host key recorded at the first connection (trust on first use)'),
    monitoring_enabled: z.boolean(),
    monitor_update_interval: z.enum(MONITOR_INTERVALS),
    server_state: z.enum(ServerState),
    monitor_failures: z.number().int().describe('Failed polls in a row'),
    last_monitor_at: nullableTimestamp,
    code_server_port: z.number().int(),
    code_server_domain: z.string().nullable(),
    code_server_state: z.enum(CodeServerState),
    dir_init_done: z.boolean(),
    cmd: z.string().nullable(),
    cmd_output: z.string().nullable().describe('Output of the last run_cmd (stdout, then [stderr]); its progress while it runs'),
    cmd_exit_code: z
      .number()
      .int()
      .nullable()
      .describe('Exit code of the last run_cmd; null while it runs, if it was not run, timed out or was killed'),
    odoo_state: z.enum(OdooState).describe('Odoo on this host (setup_odoo, restart_odoo, stop_odoo)'),
    odoo_version_id: z.number().int().nullable().describe('The Odoo version it runs'),
    odoo_http_port: z.number().int().nullable().describe('Where Odoo listens on the host (127.0.0.1 only)'),
    odoo_error: z.string().nullable().describe("Why Odoo is failed: the end of Odoo's log, or the failed step"),
    odoo_modules: z
      .array(z.string())
      .describe("The modules on its Odoo's addons path, listed at setup_odoo and at each template build (empty: not listed yet)"),
    odoo_postgresql_server_id: z.number().int().nullable().describe("The PostgreSQL server of the host's own role"),
    odoo_db_user: z.string().nullable().describe("The host's own PostgreSQL role (LOGIN CREATEDB, never a superuser)"),
    cordoned_at: nullableTimestamp.describe('Since when placement gives it no new tenant (actions cordon / uncordon)'),
    cordon_reason: z.string().nullable(),
    capacity_tenants: z.number().int().nullable().describe('Set by an operator (null: derived; actions/room shows the figures)'),
    capacity_memory_bytes: z.number().nullable(),
    capacity_disk_bytes: z.number().nullable(),
    memory_bytes: z.number().nullable().describe('The memory setup_odoo read on the host'),
    created_at: timestamp,
    updated_at: timestamp,
    latest_metrics: latestMetricsOut.nullable().describe('The newest monitor log row'),
  })
  .extend(secretFlags(rootServerModel.secrets).shape);

export type RootServerOut = z.infer<typeof rootServerOut>;

export const rootServerFilters = z.object({
  state: z.enum(RootServerState).optional(),
  server_state: z.enum(ServerState).optional(),
  ip: z.string().optional(),
});

export const runCmdBody = z
  .object({ cmd: z.string().trim().min(1).max(10_000).optional().describe('Stored into cmd first; without it the stored cmd runs') })
  .strict()
  .meta({ example: { cmd: 'systemctl status odoo' } })
  .nullable()
  .optional();
