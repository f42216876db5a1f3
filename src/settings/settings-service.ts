// Settings singleton (spec §2.13, row id 1 created by the first migration).
import type { Db } from '../core/db.js';
import type { Prisma } from '../generated/prisma/client.js';
import { trackChanges, type Author } from '../chatter/chatter-service.js';

export const SETTINGS_MODEL = 'svc.settings';
const TRACKED = ['keep_root_server_log_period', 'dns_resolver', 'webhook_call_log_days'] as const;

export function createSettingsService(db: Db) {
  return {
    get() {
      return db.settings.findUniqueOrThrow({ where: { id: 1 } });
    },
    update(data: Prisma.SettingsUpdateInput, author: Author | null) {
      return db.$transaction(async (tx) => {
        const before = await tx.settings.findUniqueOrThrow({ where: { id: 1 } });
        const after = await tx.settings.update({ where: { id: 1 }, data });
        await trackChanges(tx, { model_name: SETTINGS_MODEL, rec_id: 1 }, TRACKED, before, after, author);
        return after;
      });
    },
  };
}
