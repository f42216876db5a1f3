// Reading the action log; writing it is src/core/action-log.ts (every feature writes rows).
import type { AppContext } from '../context.js';
import { NotFoundError } from '../core/errors.js';
import { jsonSafe, listPage } from '../core/records.js';
import type { ActionStatus, ActionType } from '../generated/prisma/enums.js';

export interface ActionLogQuery {
  limit: number;
  offset: number;
  model_name?: string;
  rec_id?: number;
  action_type?: ActionType;
  status?: ActionStatus;
  job_id?: string;
  from?: string;
  to?: string;
}

export function createActionLogService(ctx: Pick<AppContext, 'db'>) {
  return {
    /** Newest first; `from`/`to` bound created_at as [from, to). */
    list(query: ActionLogQuery) {
      const { limit, offset, from, to, ...where } = query;
      const created_at = from || to ? { ...(from ? { gte: new Date(from) } : {}), ...(to ? { lt: new Date(to) } : {}) } : undefined;
      return listPage(ctx.db.actionLog, { ...where, created_at }, { limit, offset }, { orderBy: { id: 'desc' } });
    },
    async get(id: number) {
      const row = await ctx.db.actionLog.findUnique({ where: { id } });
      if (!row) throw new NotFoundError('Action log');
      return jsonSafe(row);
    },
  };
}
