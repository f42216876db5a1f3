// Backup servers (operators write, everyone reads), their synced cloud accounts, the
// test_connection and sync_cloud_accounts operations, and a subscription's compute_backup_state.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { action, operationId, registerActions } from '../core/http/actions.js';
import { registerCrud } from '../core/http/crud.js';
import { idParams, listOf, listQuery, patchOf, timestamp } from '../core/http/schemas.js';
import { headerSecret, httpBaseUrl } from '../core/outbound-fields.js';
import { BackupState } from '../generated/prisma/enums.js';
import { createBackupServerService } from './backup-service.js';
import { createBackupStateService } from './backup-state.js';
import { backupServerModel } from './backup-models.js';

const apiPath = z
  .string()
  .trim()
  .max(500)
  .regex(/^\/\S*$/, 'must be a path starting with /');

const backupServer = z.object({
  id: z.number(),
  name: z.string().nullable(),
  url: z.string(),
  download_url: z.string(),
  api_key_set: z.boolean(),
  drop_db_path: z.string(),
  backup_db_path: z.string(),
  restore_db_path: z.string(),
  enable_local_backup: z.boolean(),
  enable_cloud_backup: z.boolean(),
  cloud_account_ids: z.array(z.number()),
  verified_at: timestamp.nullable().describe("svc's own backup server: when its last verify ended (read-only)"),
  verify_state: z
    .enum(['running', 'ok', 'failed'])
    .nullable()
    .describe("svc's own backup server's last verify: running, ok or failed (read-only; null: never)"),
  verify_note: z.string().nullable().describe('What the last verify checked, or why it failed (read-only)'),
  created_at: timestamp,
  updated_at: timestamp,
});

const backupServerFields = {
  name: z.string().max(200).nullable(),
  url: httpBaseUrl.describe('Base URL of the remote backup API (no query, fragment or credentials)'),
  download_url: httpBaseUrl.describe('Public download URL for backup files (no query, fragment or credentials)'),
  api_key: headerSecret(z.string().min(1).max(1000)).describe('Write-only; sent as X-API-Key (printable ASCII)'),
  drop_db_path: apiPath,
  backup_db_path: apiPath,
  restore_db_path: apiPath,
  enable_local_backup: z.boolean(),
  enable_cloud_backup: z.boolean(),
};
const backupServerCreate = z
  .object(backupServerFields)
  .partial({
    name: true,
    drop_db_path: true,
    backup_db_path: true,
    restore_db_path: true,
    enable_local_backup: true,
    enable_cloud_backup: true,
  })
  .strict()
  .meta({
    example: {
      name: 'backup-1',
      url: 'https://backup.example.com',
      download_url: 'https://downloads.example.com',
      api_key: 'bk_live_3c1f0e',
    },
  });
const backupServerUpdate = patchOf(z.object(backupServerFields), { enable_cloud_backup: true });

const cloudAccount = z.object({
  id: z.number(),
  uuid: z.string(),
  remote_id: z.string(),
  provider: z.string(),
  name: z.string().nullable(),
  backup_server_id: z.number(),
  created_at: timestamp,
  updated_at: timestamp,
});

const syncResult = z.object({ created: z.number(), updated: z.number(), deleted: z.number(), unchanged: z.number() });

const backupStateResult = z.object({
  subscription_id: z.number(),
  backup_server_id: z.number().nullable(),
  backup_state: z.enum(BackupState),
  latest_backup: z
    .object({
      id: z.union([z.string(), z.number()]),
      db_name: z.string(),
      state: z.string(),
      created_at: z.string().nullable().optional(),
      url: z.string().nullable().optional(),
      filestore: z.boolean().nullable().optional().describe("The backup holds the instance's filestore (when the server says)"),
      files: z.number().nullable().optional().describe('Files of the filestore in it (when the server says)'),
    })
    .nullable(),
  last_backup_at: z.string().nullable().describe('When the last completed backup was made, as svc knows it'),
});

export function registerBackupRoutes(parent: FastifyInstance, ctx: AppContext) {
  const servers = createBackupServerService(ctx);
  const states = createBackupStateService(ctx);
  const tag = 'backup-servers';
  registerCrud(parent, {
    path: '/backup-servers',
    model: backupServerModel,
    tag,
    service: servers,
    output: backupServer,
    create: backupServerCreate,
    update: backupServerUpdate,
    read: 'user',
    write: 'operator',
  });

  parent.withTypeProvider<ZodTypeProvider>().get('/api/v1/backup-servers/:id/cloud-accounts', {
    config: { group: 'user' },
    schema: {
      tags: [tag],
      operationId: operationId('/backup-servers', 'listCloudAccounts'),
      summary: 'List the cloud accounts of a backup server',
      description: 'Cloud accounts as last synced from the backup server (read-only; see sync_cloud_accounts).',
      params: idParams,
      querystring: listQuery,
      response: { 200: listOf(cloudAccount) },
    },
    handler: (req) => servers.listCloudAccounts(req.params.id, req.query),
  });

  registerActions(parent, {
    path: '/backup-servers',
    tag,
    group: 'operator',
    actions: {
      test_connection: action({
        summary: 'Test a backup server connection',
        description:
          'GET {url}/api/ping with the API key. Refused connection, rejected key, timeout, another status or a non-JSON answer: 400 user_error carrying the reason.',
        response: z.object({ ok: z.literal(true) }),
        run: ({ id, user }) => servers.testConnection(id, user.id),
      }),
      sync_cloud_accounts: action({
        summary: 'Sync the cloud accounts of a backup server',
        description:
          'Fetches GET {url}/api/cloud-accounts and, in one transaction, creates and updates local accounts by uuid and deletes those the server no longer lists.',
        response: syncResult,
        run: ({ id, author }) => servers.syncCloudAccounts(id, author),
      }),
    },
  });

  registerActions(parent, {
    path: '/subscriptions',
    tag: 'subscriptions',
    group: 'operator',
    actions: {
      compute_backup_state: action({
        summary: 'Compute the backup state of a subscription',
        description:
          "Asks the subscription's backup server (its backup_server_id, or the only one) for the latest backup of its database and stores backup_state: done/ok → ok, pending/running → running, failed/error → failed, none → none. The latest completed backup listed moves last_backup_at forward to its created_at (never later than now), which resolves a firing backup alert when it is within 26 h.",
        response: backupStateResult,
        run: ({ id, author }) => states.computeBackupState(id, { author }),
      }),
    },
  });
}
