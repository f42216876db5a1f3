// Settings singleton (spec §2.13, row id 1 created by the first migration).
import type { AppContext } from '../context.js';
import type { Prisma } from '../generated/prisma/client.js';
import { trackChanges, type Author } from '../core/chatter.js';
import { settingsModel } from './settings-models.js';

export function createSettingsService(ctx: Pick<AppContext, 'db'>) {
  const { db } = ctx;
  return {
    get() {
      return db.settings.findUniqueOrThrow({ where: { id: 1 } });
    },
    update(data: Prisma.SettingsUpdateInput, author: Author | null) {
      return db.$transaction(async (tx) => {
        const before = await tx.settings.findUniqueOrThrow({ where: { id: 1 } });
        const after = await tx.settings.update({ where: { id: 1 }, data });
        await trackChanges(tx, { model_name: settingsModel.name, rec_id: 1 }, settingsModel.tracked, before, after, author);
        return after;
      });
    },
  };
}
