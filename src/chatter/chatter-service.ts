// Reading a record's thread and its activities (spec: mail module). Posting messages and
// tracking are src/core/chatter.ts: every feature writes to the chatter.
import type { AppContext } from '../context.js';
import { postMessage, trackedValue, type Author, type NewMessage, type RecordRef } from '../core/chatter.js';
import { NotFoundError } from '../core/errors.js';
import type { ModelRegistry } from '../core/models.js';
import { jsonSafe } from '../core/records.js';

export function createChatterService(ctx: Pick<AppContext, 'db'>, models: ModelRegistry) {
  const { db } = ctx;

  /** The thread of an existing record; 404 otherwise. */
  async function thread(ref: RecordRef): Promise<RecordRef> {
    if (!(await models.recordExists(db, ref.model_name, ref.rec_id))) throw new NotFoundError('Record');
    return ref;
  }

  return {
    /** Newest first, with the tracking values of each message. */
    async listMessages(ref: RecordRef, page: { limit: number; offset: number }) {
      const where = await thread(ref);
      const [rows, total] = await Promise.all([
        db.message.findMany({
          where,
          orderBy: { id: 'desc' },
          take: page.limit,
          skip: page.offset,
          include: { tracking_values: { orderBy: { id: 'asc' } } },
        }),
        db.message.count({ where }),
      ]);
      const view = (m: (typeof rows)[number]) => ({
        ...jsonSafe(m),
        tracking_values: m.tracking_values.map((t) => ({
          field: t.field,
          old_value: trackedValue(t.old_value, t.value_type),
          new_value: trackedValue(t.new_value, t.value_type),
        })),
      });
      return { items: rows.map(view), total, ...page };
    },

    async postMessage(ref: RecordRef, msg: Omit<NewMessage, keyof RecordRef | 'author'>, author: Author | null) {
      const created = await postMessage(db, { ...(await thread(ref)), ...msg, author });
      return { ...jsonSafe(created), tracking_values: [] };
    },

    async listActivities(ref: RecordRef) {
      const rows = await db.activity.findMany({ where: await thread(ref), orderBy: { id: 'desc' } });
      return { items: rows.map(jsonSafe) };
    },

    async scheduleActivity(ref: RecordRef, input: { summary: string; note?: string; due_date?: string | null; user_id?: number | null }) {
      const { due_date, ...rest } = input;
      const created = await db.activity.create({
        data: { ...(await thread(ref)), ...rest, due_date: due_date ? new Date(due_date) : null },
      });
      return jsonSafe(created);
    },

    async markActivityDone(ref: RecordRef, activityId: number) {
      const { count } = await db.activity.updateMany({
        where: { id: activityId, ...(await thread(ref)) },
        data: { state: 'done', done_at: new Date() },
      });
      if (count === 0) throw new NotFoundError('Activity');
      return jsonSafe((await db.activity.findUnique({ where: { id: activityId } }))!);
    },
  };
}
