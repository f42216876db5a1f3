// Retention of the webhook call log: a daily job deletes calls older than
// settings.webhook_call_log_days, in batches, each batch folding the calls it deletes into the
// webhook's stored call_count / last_called_at in the same transaction (nothing is counted twice
// or lost when it is interrupted). The trigger_action calls' delivery records go after the same
// days: a delivery sent again later than that runs again.
import type { AppContext } from '../context.js';
import { featureJobs } from '../feature.js';
import { webhookJobs } from './webhook-job-specs.js';

const BATCH = 10_000;
const SCHEDULER_ID = 'prune_webhook_calls';

async function pruneWebhookCalls(db: AppContext['db']): Promise<{ days: number; deleted: number; deliveries_deleted: number }> {
  const { webhook_call_log_days: days } = await db.settings.findUniqueOrThrow({ where: { id: 1 } });
  let deleted = 0;
  for (;;) {
    const [row] = await db.$queryRaw<{ deleted: number }[]>`
      WITH gone AS (
        DELETE FROM webhook_calls WHERE id IN (
          SELECT id FROM webhook_calls WHERE called_at < now() - make_interval(days => ${days}) ORDER BY id LIMIT ${BATCH}
        ) RETURNING webhook_id, called_at
      ), folded AS (
        UPDATE webhooks w SET call_count = w.call_count + g.calls,
                              last_called_at = greatest(w.last_called_at, g.last)
        FROM (SELECT webhook_id, count(*)::int AS calls, max(called_at) AS last FROM gone GROUP BY webhook_id) g
        WHERE w.id = g.webhook_id
        RETURNING w.id
      )
      SELECT (SELECT count(*) FROM gone)::int AS deleted`;
    deleted += row!.deleted;
    if (row!.deleted < BATCH) return { days, deleted, deliveries_deleted: await pruneDeliveries(db, days) };
  }
}

async function pruneDeliveries(db: AppContext['db'], days: number): Promise<number> {
  let deleted = 0;
  for (;;) {
    const n = await db.$executeRaw`
      DELETE FROM webhook_deliveries WHERE id IN (
        SELECT id FROM webhook_deliveries WHERE created_at < now() - make_interval(days => ${days}) ORDER BY id LIMIT ${BATCH}
      )`;
    deleted += n;
    if (n < BATCH) return deleted;
  }
}

export const webhookJobHandlers = featureJobs(webhookJobs, (ctx) => ({ prune_webhook_calls: () => pruneWebhookCalls(ctx.db) }), {});

/** Daily at 03:00 UTC; upserted at every worker start, so one schedule exists across all workers. */
export async function scheduleWebhookJobs(ctx: Pick<AppContext, 'queues'>) {
  await ctx.queues.schedule(SCHEDULER_ID, { pattern: '0 3 * * *', tz: 'UTC' }, webhookJobs.prune_webhook_calls, {});
}
