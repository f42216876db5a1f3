// Webhook records (svc.saas.webhook; administrators only): the token is 64 random hex
// characters made at creation and never changed (rotation = delete and create); the target model,
// record and trigger_action are checked against the method registry when saved; the optional
// signing secret is write-only and encrypted. call_count and last_called_at are derived from the
// call log (see webhook-call-service.ts for why the endpoint never updates the webhook row).
import type { AppContext } from '../context.js';
import type { Db, DbTx } from '../core/db.js';
import { AppError, UserError, ValidationError } from '../core/errors.js';
import type { ModelName, ModelRegistry } from '../core/models.js';
import type { Page } from '../core/lists.js';
import { createRecordService, listPage, timeRange } from '../core/records.js';
import type { Precondition } from '../core/conditional-write.js';
import type { Author } from '../core/chatter.js';
import { writeActionLog } from '../core/action-log.js';
import { newWebhookToken, webhookUrl } from './webhook-token.js';
import { describeWebhookMethods, findWebhookMethod, runWebhookMethod } from '../core/webhook-methods.js';
import type { Registry } from '../feature.js';
import { webhookModel } from './webhook-models.js';

type Data = Record<string, unknown>;

/** A ValidationError when the target record does not exist (or its model is unknown). */
export async function assertRecordExists(models: ModelRegistry, tx: DbTx | Db, modelName: string, recId: number) {
  if (!models.find(modelName)) throw new ValidationError(`Unknown model ${modelName}`);
  if (!(await models.recordExists(tx, modelName, recId))) throw new ValidationError(`${modelName} ${recId} does not exist`);
}

export function createWebhookService(
  ctx: Pick<AppContext, 'db' | 'secretBox' | 'config'>,
  registry: Pick<Registry, 'models' | 'webhookMethods'>,
  /** Writes this process's buffered call-log lines, so its reads include them. */
  flushCallLog: () => Promise<void> = async () => {},
) {
  const { db } = ctx;
  const { models, webhookMethods: methods } = registry;
  const records = createRecordService(ctx, webhookModel);

  async function validateTarget(target: { model_name: string; rec_id: number; trigger_action: string | null }) {
    if (!models.find(target.model_name)) {
      throw new ValidationError(`Unknown model ${target.model_name}`, 'model_name', { models: models.names() });
    }
    await assertRecordExists(models, db, target.model_name, target.rec_id);
    if (target.trigger_action && !findWebhookMethod(methods, target.model_name, target.trigger_action)) {
      throw new ValidationError(`${target.model_name} has no method ${target.trigger_action} that a webhook may call`, 'trigger_action', {
        callable: describeWebhookMethods(methods)[target.model_name] ?? [],
      });
    }
  }

  /** Adds url, and call_count / last_called_at: folded-in totals of pruned calls + the call log. */
  async function withStats(rows: Data[]) {
    await flushCallLog();
    const ids = rows.map((r) => r.id as number);
    const stats = ids.length
      ? await db.$queryRaw<{ webhook_id: number; calls: number; last: Date }[]>`
          SELECT webhook_id, count(*)::int AS calls, max(called_at) AS last
          FROM webhook_calls WHERE webhook_id = ANY(${ids}::int[]) GROUP BY webhook_id`
      : [];
    const byId = new Map(stats.map((s) => [s.webhook_id, s]));
    return rows.map((row) => {
      const s = byId.get(row.id as number);
      const stored = row.last_called_at ? new Date(row.last_called_at as string) : null;
      const last = s && (!stored || s.last > stored) ? s.last : stored;
      return {
        ...row,
        url: webhookUrl(ctx.config.BASE_URL, row.token as string),
        call_count: (row.call_count as number) + (s?.calls ?? 0),
        last_called_at: last ? last.toISOString() : null,
      };
    });
  }

  const one = async (row: Data) => (await withStats([row]))[0]!;

  return {
    async list(query: { limit: number; offset: number } & Data) {
      const page = await records.list(query);
      return { ...page, items: await withStats(page.items) };
    },

    get: async (id: number) => one(await records.get(id)),

    async create(data: Data, author: Author | null) {
      await validateTarget({
        model_name: data.model_name as string,
        rec_id: data.rec_id as number,
        trigger_action: (data.trigger_action as string | null) ?? null,
      });
      return one(await records.create({ ...data, token: newWebhookToken() }, author));
    },

    async update(id: number, data: Data, author: Author | null, precondition?: Precondition) {
      const current = await records.getRow(id);
      if ('model_name' in data || 'rec_id' in data || 'trigger_action' in data) {
        await validateTarget({
          model_name: (data.model_name ?? current.model_name) as string,
          rec_id: (data.rec_id ?? current.rec_id) as number,
          trigger_action: ('trigger_action' in data ? data.trigger_action : current.trigger_action) as string | null,
        });
      }
      return one(await records.update(id, data, author, precondition));
    },

    remove: (id: number, precondition?: Precondition) => records.remove(id, precondition),

    /** The call log, newest first; `from`/`to` bound called_at as [from, to). */
    async calls(id: number, query: Page & { status?: number; from?: string; to?: string }) {
      const { status, from, to, ...page } = query;
      await records.getRow(id);
      await flushCallLog();
      const where = { webhook_id: id, status, called_at: timeRange(from, to) };
      return listPage(ctx, db.webhookCall, where, page, { table: 'webhook_calls', resource: 'webhooks/calls', sort: '-called_at' });
    },

    /** action_trigger: runs the configured method from the API, in a transaction; written to the action log. */
    async trigger(id: number, userId: number) {
      const hook = await records.getRow(id);
      const action = hook.trigger_action as string | null;
      if (!action) throw new UserError('This webhook has no trigger_action');
      const method = findWebhookMethod(methods, hook.model_name as string, action);
      if (!method) throw new UserError(`${String(hook.model_name)} has no method ${action} that a webhook may call`);
      const ref = { model_name: hook.model_name as ModelName, rec_id: hook.rec_id as number };
      const input = `${ref.model_name}(${ref.rec_id}).${action}() -- webhook ${id}`;
      try {
        await runWebhookMethod(
          db,
          { method, recId: ref.rec_id, payload: undefined },
          {
            before: (tx) => assertRecordExists(models, tx, ref.model_name, ref.rec_id),
            after: (tx) => writeActionLog(tx, { ...ref, action_type: 'webhook', input_text: input, output_text: 'done', user_id: userId }),
          },
        );
      } catch (err) {
        const message = (err as Error).message;
        await writeActionLog(db, {
          ...ref,
          action_type: 'webhook',
          status: 'failure',
          input_text: input,
          output_text: message,
          user_id: userId,
        });
        if (err instanceof AppError) throw err;
        throw new UserError(`${action} failed: ${message}`);
      }
      return one(await records.get(id));
    },
  };
}
