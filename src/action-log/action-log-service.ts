// Reading the action log; writing it is src/core/action-log.ts (every feature writes rows).
import type { AppContext } from '../context.js';
import { NotFoundError } from '../core/errors.js';
import { groupAllows, type UserGroup } from '../core/groups.js';
import type { ModelRegistry } from '../core/models.js';
import { jsonSafe, type ListParams, listPage, searchWhere, timeRange } from '../core/records.js';
import type { ActionStatus, ActionType } from '../generated/prisma/enums.js';

/** What `?q=` searches (trigram indexes make it an index scan). */
export const ACTION_LOG_SEARCH = ['input_text', 'output_text'] as const;
export const ACTION_LOG_SORT = ['id', 'created_at'] as const;

export interface ActionLogQuery extends ListParams {
  model_name?: string;
  rec_id?: number;
  action_type?: ActionType;
  status?: ActionStatus;
  job_id?: string;
}

export function createActionLogService(ctx: Pick<AppContext, 'db' | 'secretBox'>, models: ModelRegistry) {
  /** The models whose action-log rows the group may not read (actionLogGroup, e.g. the standby pool's: operators). */
  const hiddenFrom = (group: UserGroup): string[] =>
    models.all.filter((m) => !groupAllows(group, m.actionLogGroup ?? 'user')).map((m) => m.name);

  return {
    /**
     * Newest first (by id); `from`/`to` bound created_at as [from, to), and without a sort the rows
     * are then ordered by created_at, which one index range serves however old the window is.
     */
    list(query: ActionLogQuery, group: UserGroup) {
      const { limit, offset, cursor, sort, q, from, to, model_name, ...filters } = query;
      const created_at = timeRange(from, to);
      const search = searchWhere(ACTION_LOG_SEARCH, q);
      const hidden = hiddenFrom(group);
      const model =
        model_name !== undefined && hidden.includes(model_name)
          ? { in: [] }
          : (model_name ?? (hidden.length ? { notIn: hidden } : undefined));
      const where = { ...filters, model_name: model, created_at, ...search };
      return listPage(
        ctx,
        ctx.db.actionLog,
        where,
        { limit, offset, cursor },
        { table: 'action_logs', resource: 'action-logs', sort: sort ?? (created_at ? '-created_at' : '-id'), search: 'OR' in search },
      );
    },
    async get(id: number, group: UserGroup) {
      const row = await ctx.db.actionLog.findUnique({ where: { id } });
      if (!row || hiddenFrom(group).includes(row.model_name)) throw new NotFoundError('Action log');
      return jsonSafe(row);
    },
  };
}
