// Backup servers and the cloud accounts each lists (where it stores backups): records with a
// write-only API key, test_connection (the remote ping) and sync_cloud_accounts (create/update by
// uuid, delete what the server no longer lists, all in one transaction).
import type { AppContext } from '../context.js';
import { NotFoundError } from '../core/errors.js';
import type { Page } from '../core/lists.js';
import { createRecordService, listPage } from '../core/records.js';
import type { Precondition } from '../core/conditional-write.js';
import { postMessage, type Author } from '../core/chatter.js';
import { createBackupApi } from './backup-api.js';
import { backupServerModel } from './backup-models.js';

export interface SyncResult {
  created: number;
  updated: number;
  deleted: number;
  unchanged: number;
}

export function createBackupServerService(ctx: Pick<AppContext, 'db' | 'secretBox' | 'config'>) {
  const { db } = ctx;
  const api = createBackupApi(ctx);
  const records = createRecordService(ctx, backupServerModel);

  async function getServer(id: number) {
    const server = await db.backupServer.findUnique({ where: { id } });
    if (!server) throw new NotFoundError('Backup server');
    return server;
  }

  /** A backup server is answered with the ids of its cloud accounts (cloud_account_ids): added to each output row. */
  async function withAccountIds<T extends Record<string, unknown>>(rows: T[]) {
    const accounts = await db.backupCloudAccount.findMany({
      where: { backup_server_id: { in: rows.map((r) => r.id as number) } },
      select: { id: true, backup_server_id: true },
      orderBy: { id: 'asc' },
    });
    return rows.map((row) => ({
      ...row,
      cloud_account_ids: accounts.filter((a) => a.backup_server_id === row.id).map((a) => a.id),
    }));
  }

  const withAccountIdsOf = async (row: Record<string, unknown>) => (await withAccountIds([row]))[0]!;

  return {
    ...records,
    async list(query: Parameters<typeof records.list>[0]) {
      const page = await records.list(query);
      return { ...page, items: await withAccountIds(page.items) };
    },
    get: async (id: number) => withAccountIdsOf(await records.get(id)),
    create: async (data: Record<string, unknown>, author: Author | null) => withAccountIdsOf(await records.create(data, author)),
    update: async (id: number, data: Record<string, unknown>, author: Author | null, precondition?: Precondition) =>
      withAccountIdsOf(await records.update(id, data, author, precondition)),

    async listCloudAccounts(id: number, page: Page) {
      await getServer(id);
      return listPage(ctx, db.backupCloudAccount, { backup_server_id: id }, page, {
        table: 'backup_cloud_accounts',
        resource: 'backup-servers/cloud-accounts',
        sort: 'id',
      });
    },

    /** The remote ping; a refusal, a wrong key, a timeout or a non-JSON answer is a UserError. */
    async testConnection(id: number, userId: number | null): Promise<{ ok: true }> {
      const server = await getServer(id);
      await api.ping(server, { model_name: 'svc.saas.backup.server', rec_id: id, user_id: userId });
      return { ok: true };
    },

    async syncCloudAccounts(id: number, author: Author | null): Promise<SyncResult> {
      const server = await getServer(id);
      const remote = await api.cloudAccounts(server, { model_name: 'svc.saas.backup.server', rec_id: id, user_id: author?.id ?? null });
      const byUuid = new Map(remote.map((account) => [account.uuid, account])); // uuids are unique (checked by the API client)

      return db.$transaction(
        async (tx) => {
          // One sync per server at a time: a second one waits here and then sees the first's rows.
          const locked = await tx.$queryRaw<{ id: number }[]>`SELECT id FROM backup_servers WHERE id = ${id} FOR UPDATE`;
          if (locked.length === 0) throw new NotFoundError('Backup server');
          const local = await tx.backupCloudAccount.findMany({ where: { backup_server_id: id } });
          const result: SyncResult = { created: 0, updated: 0, deleted: 0, unchanged: 0 };

          for (const account of byUuid.values()) {
            const data = { remote_id: account.id, provider: account.provider, name: account.name ?? null };
            const existing = local.find((l) => l.uuid === account.uuid);
            if (!existing) {
              await tx.backupCloudAccount.create({ data: { ...data, uuid: account.uuid, backup_server_id: id } });
              result.created++;
            } else if (existing.remote_id !== data.remote_id || existing.provider !== data.provider || existing.name !== data.name) {
              await tx.backupCloudAccount.update({ where: { id: existing.id }, data });
              result.updated++;
            } else {
              result.unchanged++;
            }
          }
          const gone = local.filter((l) => !byUuid.has(l.uuid)).map((l) => l.id);
          if (gone.length > 0) result.deleted = (await tx.backupCloudAccount.deleteMany({ where: { id: { in: gone } } })).count;

          await postMessage(tx, {
            model_name: 'svc.saas.backup.server',
            rec_id: id,
            body: `Cloud accounts synced: ${result.created} created, ${result.updated} updated, ${result.deleted} removed, ${result.unchanged} unchanged.`,
            message_type: 'notification',
            author,
          });
          return result;
        },
        { timeout: 30_000 },
      );
    },
  };
}
