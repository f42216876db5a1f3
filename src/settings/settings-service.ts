// Settings singleton (row id 1 created by the first migration): a record like any
// other (its changes tracked in its chatter), always id 1.
import type { AppContext } from '../context.js';
import type { Author } from '../core/chatter.js';
import { createRecordService, type JsonSafe } from '../core/records.js';
import type { Precondition } from '../core/conditional-write.js';
import type { Settings } from '../generated/prisma/client.js';
import { settingsModel } from './settings-models.js';

export function createSettingsService(ctx: Pick<AppContext, 'db' | 'secretBox'>) {
  const records = createRecordService(ctx, settingsModel);
  return {
    get: () => records.get(1) as Promise<JsonSafe<Settings>>,
    /** `precondition` (If-Match) holds for the row as the update locks it. */
    update: (data: Record<string, unknown>, author: Author | null, precondition?: Precondition) =>
      records.update(1, data, author, precondition) as Promise<JsonSafe<Settings>>,
  };
}
