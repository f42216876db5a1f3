// Maintenance windows (operators write, users read): records with tracked fields, checked on the
// window as it will be stored (the stored values merged with the change), each failure a 400
// naming its field. Every write bumps the version the alert evaluation watches, so a window takes
// effect on the next poll of every worker.
import type { AppContext } from '../context.js';
import type { Db } from '../core/db.js';
import { ValidationError } from '../core/errors.js';
import { createRecordService } from '../core/records.js';
import { assertRootServersExist } from '../servers/index.js';
import { maintenanceWindowModel } from './maintenance-models.js';
import { MAX_WINDOW_DAYS } from './maintenance-schemas.js';
import { maintenanceVersionKey } from './maintenance-state.js';

type Data = Record<string, unknown>;

const DAY_MS = 86_400_000;
const instant = (v: unknown) => (v instanceof Date ? v : new Date(String(v)));

export function createMaintenanceService(ctx: Pick<AppContext, 'db' | 'secretBox' | 'redis' | 'queues'>) {
  const records = createRecordService(ctx, maintenanceWindowModel, {
    sort: '-starts_at',
    prepareCreate: (tx, data) => checked(tx, null, data),
    prepareUpdate: (tx, before, data) => checked(tx, before, data),
    afterWrite: () => ctx.redis.incr(maintenanceVersionKey(ctx.queues.prefix)),
  });

  async function checked(client: Pick<Db, 'rootServer'>, before: Data | null, data: Data): Promise<Data> {
    const out = { ...data };
    const pick = (k: string) => (data[k] !== undefined ? data[k] : before?.[k]);
    const starts = instant(pick('starts_at'));
    const ends = instant(pick('ends_at'));
    if (ends <= starts) throw new ValidationError('ends_at must be after starts_at', 'ends_at');
    if (ends.getTime() - starts.getTime() > MAX_WINDOW_DAYS * DAY_MS) {
      throw new ValidationError(`A maintenance window lasts at most ${MAX_WINDOW_DAYS} days`, 'ends_at');
    }
    if (data.starts_at !== undefined) out.starts_at = starts;
    if (data.ends_at !== undefined) out.ends_at = ends;
    if (Array.isArray(data.root_server_ids)) {
      const ids = [...new Set(data.root_server_ids as number[])];
      out.root_server_ids = ids;
      await assertRootServersExist(client, ids);
    }
    return out;
  }

  // Deleting a window ends it at once.
  return records;
}
