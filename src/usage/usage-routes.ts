// GET /api/v1/subscriptions/{id}/usage (users): the daily usage history; and
// POST /api/v1/settings/actions/collect_usage (operators, 202): a usage round now.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { action, operationId, registerSettingsActions } from '../core/http/actions.js';
import { NotFoundError, ValidationError } from '../core/errors.js';
import { idParams } from '../core/http/schemas.js';
import { usageJobs } from './usage-job-specs.js';

const DAY_MS = 86_400_000;
const day = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}$/, 'a date, YYYY-MM-DD')
  // Date.parse takes 2026-02-31 for 3 March: a real date is one that reads back the same.
  .refine((d) => {
    const ms = Date.parse(`${d}T00:00:00Z`);
    return !Number.isNaN(ms) && new Date(ms).toISOString().slice(0, 10) === d;
  }, 'a real date');

const usagePoint = z.object({
  date: z.string().describe('YYYY-MM-DD (UTC)'),
  db_size_bytes: z.number().nullable(),
  filestore_bytes: z.number().nullable(),
  active_users: z.number().nullable(),
  record_counts: z.record(z.string(), z.number()),
});

export function registerUsageRoutes(parent: FastifyInstance, ctx: AppContext) {
  const app = parent.withTypeProvider<ZodTypeProvider>();

  app.get('/api/v1/subscriptions/:id/usage', {
    config: { group: 'user' },
    schema: {
      tags: ['subscriptions'],
      operationId: operationId('/subscriptions', 'usage'),
      summary: 'Daily usage of a subscription',
      description:
        'One point per day (UTC) with the highest values measured that day, oldest first; kept 400 days. Default: the last 30 days.',
      params: idParams,
      querystring: z.object({ from: day.optional(), to: day.optional() }).strict(),
      response: { 200: z.object({ items: z.array(usagePoint) }) },
    },
    handler: async (req) => {
      const sub = await ctx.db.subscription.findUnique({ where: { id: req.params.id }, select: { id: true } });
      if (!sub) throw new NotFoundError('Subscription');
      const to = req.query.to ? new Date(`${req.query.to}T00:00:00Z`) : new Date(new Date().toISOString().slice(0, 10));
      const from = req.query.from ? new Date(`${req.query.from}T00:00:00Z`) : new Date(to.getTime() - 29 * DAY_MS);
      if (from > to) throw new ValidationError('from is after to', [{ field: 'querystring.from', message: 'after to' }]);
      const rows = await ctx.db.subscriptionUsageDay.findMany({
        where: { subscription_id: sub.id, date: { gte: from, lte: to } },
        orderBy: { date: 'asc' },
      });
      return {
        items: rows.map((r) => ({
          date: r.date.toISOString().slice(0, 10),
          db_size_bytes: r.db_size_bytes === null ? null : Number(r.db_size_bytes),
          filestore_bytes: r.filestore_bytes === null ? null : Number(r.filestore_bytes),
          active_users: r.active_users,
          record_counts: r.record_counts as Record<string, number>,
        })),
      };
    },
  });

  registerSettingsActions(parent, 'operator', {
    collect_usage: action({
      summary: 'Measure usage now',
      description:
        "Queues a usage round (it also runs every usage_interval_minutes): database sizes, active users, limited records and filestores of every subscription, their usage_state, the customers' notices and, with enforce_limits, suspensions. Result: {measured, missing, notified, suspended, held_back, other_schemas} (other_schemas: subscription id → schemas its database has besides Odoo's public, each new one also a chatter alert).",
      response: 'job',
      run: ({ user }) => ctx.queues.enqueue(usageJobs.collect_usage, { now: true, user_id: user.id }),
    }),
  });
}
