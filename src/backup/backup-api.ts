// The remote backup server's HTTP API (GET /api/ping, /api/cloud-accounts, /api/backups?db_name=;
// POST to its backup and restore paths), spoken through the one outbound client: API key in
// X-API-Key, answers checked against the contract before anyone uses them.
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { UserError } from '../core/errors.js';
import { joinUrl } from '../core/outbound-fields.js';
import { createOutboundHttp } from '../core/outbound-http.js';
import type { OutboundTarget } from '../core/outbound-log.js';
import { readJson } from '../core/outbound-read-json.js';
import type { OutboundResponse } from '../core/outbound-response.js';

export interface BackupServerRecord {
  url: string;
  api_key: string | null; // ciphertext; null after the url changed until the key is set again
  backup_db_path: string;
  restore_db_path: string;
}

const remoteCloudAccount = z.object({
  id: z.union([z.string(), z.number()]).transform(String),
  uuid: z.string().min(1),
  provider: z.string(),
  name: z.string().nullable().optional(),
});
export type RemoteCloudAccount = z.output<typeof remoteCloudAccount>;
const cloudAccountList = z.array(remoteCloudAccount).superRefine((accounts, check) => {
  const seen = new Set<string>();
  for (const { uuid } of accounts) {
    if (seen.has(uuid)) check.addIssue({ code: 'custom', message: `uuid ${uuid} is listed twice` });
    seen.add(uuid);
  }
});

const remoteBackup = z.object({
  id: z.union([z.string(), z.number()]),
  db_name: z.string(),
  state: z.string(),
  created_at: z.string().nullable().optional(),
  url: z.string().nullable().optional(),
  // Optional (svc's backup server gives them): the backup holds the instance's filestore, and how
  // many files of it. Only `filestore: true` lets a drop remove the filestore on the Odoo host.
  filestore: z.boolean().nullable().optional(),
  files: z.number().int().min(0).nullable().optional(),
  /** Why it failed, when the server says (svc's backup server does). */
  error: z.string().nullable().optional(),
});
export type RemoteBackup = z.output<typeof remoteBackup>;

const remoteRestore = z.object({
  id: z.union([z.string(), z.number()]),
  state: z.string(),
  error: z.string().nullable().optional(),
});

/** What a backup or restore request answers: any JSON object (or nothing), maybe with the backup's id and state. */
const remoteOperation = z.looseObject({
  id: z.union([z.string(), z.number()]).nullable().optional(),
  state: z.string().nullable().optional(),
});
export type RemoteOperation = z.output<typeof remoteOperation>;

type Reader<T> = (res: OutboundResponse) => T;

/** Like readJson, but an empty 2xx answer is an answer too (`{}`). */
function readOperation(what: string): Reader<RemoteOperation> {
  const json = readJson(remoteOperation, { refused: 'The backup server refused the API key', what });
  return (res) => (res.ok && res.body.byteLength === 0 ? {} : json(res));
}

export function createBackupApi(ctx: Pick<AppContext, 'db' | 'secretBox' | 'config'>) {
  const http = createOutboundHttp(ctx);
  async function call<T>(
    server: Pick<BackupServerRecord, 'url' | 'api_key'>,
    target: OutboundTarget,
    req: { method?: string; path: string; json?: unknown },
    read: Reader<T>,
  ) {
    const apiKey = await ctx.secretBox.reveal(server.api_key);
    if (!apiKey) throw new UserError('The backup server has no api_key (it is cleared when the url changes): set it again');
    return http.request(
      target,
      { method: req.method, url: joinUrl(server.url, req.path), headers: { 'X-API-Key': apiKey }, json: req.json },
      { secrets: [apiKey], read },
    );
  }

  const get = <T extends z.ZodType>(
    server: Pick<BackupServerRecord, 'url' | 'api_key'>,
    target: OutboundTarget,
    path: string,
    schema: T,
    what: string,
  ) => call(server, target, { path }, readJson(schema, { refused: 'The backup server refused the API key', what }));

  return {
    /** POST {backup_db_path} {"db_name"}: the server starts a backup; its answer may carry the backup's id and state. */
    requestBackup(server: BackupServerRecord, target: OutboundTarget, dbName: string): Promise<RemoteOperation> {
      return call(
        server,
        target,
        { method: 'POST', path: server.backup_db_path, json: { db_name: dbName } },
        readOperation('The backup request'),
      );
    },

    /**
     * POST {restore_db_path} {"db_name","backup_id"}: the server restores that backup into the database;
     * with `into` (target_db_name), into that other database instead — only a server that says it can
     * (restoresInto) is ever sent one.
     */
    restore(
      server: BackupServerRecord,
      target: OutboundTarget,
      dbName: string,
      backupId: string | number,
      into?: string,
    ): Promise<RemoteOperation> {
      const json = { db_name: dbName, backup_id: backupId, ...(into === undefined ? {} : { target_db_name: into }) };
      return call(server, target, { method: 'POST', path: server.restore_db_path, json }, readOperation('The restore request'));
    },

    /** Whether the server restores into another database than the backup's (svc's own answers its ping with restore_into: true). */
    async restoresInto(server: Pick<BackupServerRecord, 'url' | 'api_key'>, target: OutboundTarget): Promise<boolean> {
      const ping = await get(server, target, '/api/ping', z.unknown(), 'The ping answer');
      return typeof ping === 'object' && ping !== null && (ping as { restore_into?: unknown }).restore_into === true;
    },

    /**
     * GET /api/restores/{id}: how a restore the server runs in the background is getting on (svc's own
     * backup server answers its restore request with such an id).
     */
    restoreStatus(server: Pick<BackupServerRecord, 'url' | 'api_key'>, target: OutboundTarget, id: string | number) {
      return get(server, target, `/api/restores/${encodeURIComponent(String(id))}`, remoteRestore, 'The restore status');
    },

    /** GET /api/ping: 200 with a JSON body from a reachable server that accepts the key. */
    async ping(server: Pick<BackupServerRecord, 'url' | 'api_key'>, target: OutboundTarget): Promise<void> {
      await get(server, target, '/api/ping', z.unknown(), 'The ping answer');
    },

    async cloudAccounts(server: Pick<BackupServerRecord, 'url' | 'api_key'>, target: OutboundTarget): Promise<RemoteCloudAccount[]> {
      return get(server, target, '/api/cloud-accounts', cloudAccountList, 'The cloud account list');
    },

    /** The server's backups of one database, latest first. */
    async backups(server: Pick<BackupServerRecord, 'url' | 'api_key'>, target: OutboundTarget, dbName: string): Promise<RemoteBackup[]> {
      const path = `/api/backups?${new URLSearchParams({ db_name: dbName })}`;
      return get(server, target, path, z.array(remoteBackup), 'The backup list');
    },
  };
}
