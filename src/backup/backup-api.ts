// The remote backup server's HTTP API (DESIGN §7), spoken through the one outbound client:
// API key in X-API-Key, answers checked against the contract before anyone uses them.
import { z } from 'zod';
import type { SecretBox } from '../core/crypto.js';
import { readJson, type OutboundHttp, type OutboundTarget } from '../core/outbound-http.js';

export interface BackupServerRecord {
  url: string;
  api_key: string; // ciphertext
}

export const remoteCloudAccount = z.object({
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

export const remoteBackup = z.object({
  id: z.union([z.string(), z.number()]),
  db_name: z.string(),
  state: z.string(),
  created_at: z.string().nullable().optional(),
  url: z.string().nullable().optional(),
});
export type RemoteBackup = z.output<typeof remoteBackup>;

export function createBackupApi(http: OutboundHttp, box: SecretBox) {
  async function get<T extends z.ZodType>(server: BackupServerRecord, target: OutboundTarget, path: string, schema: T, what: string) {
    const apiKey = await box.decrypt(server.api_key);
    return http.request(
      target,
      { url: `${server.url.replace(/\/+$/, '')}${path}`, headers: { 'X-API-Key': apiKey } },
      { secrets: [apiKey], read: readJson(schema, { refused: 'The backup server refused the API key', what }) },
    );
  }

  return {
    /** GET /api/ping: 200 with a JSON body from a reachable server that accepts the key. */
    async ping(server: BackupServerRecord, target: OutboundTarget): Promise<void> {
      await get(server, target, '/api/ping', z.unknown(), 'The ping answer');
    },

    async cloudAccounts(server: BackupServerRecord, target: OutboundTarget): Promise<RemoteCloudAccount[]> {
      return get(server, target, '/api/cloud-accounts', cloudAccountList, 'The cloud account list');
    },

    /** The server's backups of one database, latest first. */
    async backups(server: BackupServerRecord, target: OutboundTarget, dbName: string): Promise<RemoteBackup[]> {
      const path = `/api/backups?${new URLSearchParams({ db_name: dbName })}`;
      return get(server, target, path, z.array(remoteBackup), 'The backup list');
    },
  };
}
