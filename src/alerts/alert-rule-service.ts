// Alert rules (operators write, users read): records with tracked fields, checked as the rule will
// be stored (the stored values merged with the change): a threshold for every metric but
// server_offline (which keeps none), root servers and a notification server that exist; each
// failure a 400 naming its field. Every write tells the workers to reload the rules. Deleting a
// rule resolves its firing alerts without notices.
import type { AppContext } from '../context.js';
import type { Db } from '../core/db.js';
import { ValidationError } from '../core/errors.js';
import { createRecordService } from '../core/records.js';
import type { Precondition } from '../core/conditional-write.js';
import type { AlertMetric } from '../generated/prisma/enums.js';
import { assertRootServersExist } from '../servers/index.js';
import { alertRuleModel } from './alert-models.js';
import { THRESHOLD_METRICS } from './alert-schemas.js';
import { rulesVersionKey } from './alert-state.js';

type Data = Record<string, unknown>;

export function createAlertRuleService(ctx: Pick<AppContext, 'db' | 'secretBox' | 'redis' | 'queues'>) {
  const { db } = ctx;
  /** Tells every worker to reload the rules on its next poll (after the write committed). */
  const changed = () => ctx.redis.incr(rulesVersionKey(ctx.queues.prefix));
  // Checked as the rule will be stored, an update on the row as locked by it (a concurrent PATCH cannot slip past).
  const records = createRecordService(ctx, alertRuleModel, {
    prepareCreate: (tx, data) => checked(tx, null, data),
    prepareUpdate: (tx, before, data) => checked(tx, before, data),
    afterWrite: changed,
  });

  /** Checks the rule as it will be stored; answers the change to write (ids deduplicated). */
  async function checked(client: Pick<Db, 'rootServer' | 'notificationServer'>, before: Data | null, data: Data): Promise<Data> {
    const out = { ...data };
    const pick = (k: string) => (k in data && data[k] !== undefined ? data[k] : before?.[k]);
    const metric = pick('metric') as AlertMetric;
    const threshold = pick('threshold') as number | null | undefined;
    if (THRESHOLD_METRICS.includes(metric) && (threshold === null || threshold === undefined)) {
      throw new ValidationError(`threshold is required for the metric ${metric}`, 'threshold');
    }
    // server_offline compares nothing: a threshold given with it is not kept.
    if (metric === 'server_offline' && threshold !== null && threshold !== undefined) out.threshold = null;

    if (Array.isArray(data.root_server_ids)) {
      const ids = [...new Set(data.root_server_ids as number[])];
      out.root_server_ids = ids;
      await assertRootServersExist(client, ids);
    }
    if (typeof data.notification_server_id === 'number') {
      const exists = await client.notificationServer.count({ where: { id: data.notification_server_id } });
      if (!exists) throw new ValidationError(`Unknown notification server id: ${data.notification_server_id}`, 'notification_server_id');
    }
    if (Array.isArray(data.email_to)) out.email_to = [...new Set(data.email_to as string[])];
    return out;
  }

  return {
    ...records,

    /** Deletes the rule; its firing alerts are resolved, without notices. */
    async remove(id: number, precondition?: Precondition) {
      await records.conditionally(id, precondition, (lock) =>
        db.$transaction(async (tx) => {
          await lock(tx);
          await tx.alert.updateMany({
            where: { rule_id: id, state: 'firing' },
            data: { state: 'resolved', resolved_at: new Date(), resolved_reason: 'rule deleted' },
          });
          await tx.alertRule.delete({ where: { id } });
        }),
      );
      await changed();
    },
  };
}
