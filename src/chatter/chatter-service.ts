// Reading a record's thread and its activities (Odoo's mail module). Posting messages and
// tracking are src/core/chatter.ts: every feature writes to the chatter.
import type { AppContext } from '../context.js';
import { postMessage, trackedValue, type Author, type NewMessage, type RecordRef } from '../core/chatter.js';
import { NotFoundError } from '../core/errors.js';
import type { ModelRegistry } from '../core/models.js';
import type { Page } from '../core/lists.js';
import { jsonSafe, listPage, timeRange } from '../core/records.js';

export function createChatterService(ctx: Pick<AppContext, 'db' | 'secretBox'>, models: ModelRegistry) {
  const { db } = ctx;

  /** The thread of an existing record; 404 otherwise. */
  async function thread(ref: RecordRef): Promise<RecordRef> {
    if (!(await models.recordExists(db, ref.model_name, ref.rec_id))) throw new NotFoundError('Record');
    return ref;
  }

  return {
    /**
     * Newest first (by id), with the tracking values of each message; `from`/`to` bound created_at
     * as [from, to), and the thread is then ordered by created_at (one index range, however old).
     */
    async listMessages(ref: RecordRef, query: Page & { from?: string; to?: string }) {
      const { from, to, ...page } = query;
      const created_at = timeRange(from, to);
      const where = { ...(await thread(ref)), created_at };
      const withTracking = {
        findMany: (args: { where: object; orderBy: object[]; take: number; skip?: number }) =>
          db.message.findMany({ ...args, include: { tracking_values: { orderBy: { id: 'asc' } } } }),
        count: (args: { where: object; orderBy: object[]; take: number }) => db.message.count(args),
      };
      const resource = `${models.find(ref.model_name)?.resource}/messages`;
      return listPage(ctx, withTracking, where, page, {
        table: 'messages',
        resource,
        sort: created_at ? '-created_at' : '-id',
        view: (m) => ({
          ...jsonSafe(m),
          tracking_values: m.tracking_values.map((t) => ({
            field: t.field,
            old_value: trackedValue(t.old_value, t.value_type),
            new_value: trackedValue(t.new_value, t.value_type),
          })),
        }),
      });
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
