// GET/POST /api/v1/<resource>/{id}/messages and .../activities for every record family.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { groupAllows } from '../auth/groups.js';
import { authorOf } from '../core/http/crud.js';
import { idParams, listOf, listQuery, nullableTimestamp, timestamp } from '../core/http/schemas.js';
import { MODELS, recordExists, type ModelName } from '../core/models.js';
import { jsonSafe } from '../core/records.js';
import { NotFoundError } from '../core/errors.js';
import { listMessages, MESSAGE_TYPES, postMessage, scheduleActivity, SUBTYPES } from './chatter-service.js';

const message = z.object({
  id: z.number(),
  model_name: z.string(),
  rec_id: z.number(),
  message_type: z.enum(MESSAGE_TYPES),
  subtype_xmlid: z.string(),
  body: z.string(),
  author_id: z.number().nullable(),
  author_name: z.string().nullable(),
  created_at: timestamp,
  tracking_values: z.array(z.object({ field: z.string(), old_value: z.string().nullable(), new_value: z.string().nullable() })),
});

const activity = z.object({
  id: z.number(),
  summary: z.string(),
  note: z.string(),
  due_date: nullableTimestamp,
  user_id: z.number().nullable(),
  state: z.enum(['planned', 'done']),
  created_at: timestamp,
  done_at: nullableTimestamp,
});

export function registerChatterRoutes(parent: FastifyInstance, ctx: AppContext) {
  const app = parent.withTypeProvider<ZodTypeProvider>();

  for (const [modelName, info] of Object.entries(MODELS) as [ModelName, (typeof MODELS)[ModelName]][]) {
    const tags = ['chatter'];
    const base = `/api/v1/${info.resource}/:id`;
    // Posting needs one group above reading, except where reading already needs administrator.
    const writeGroup = groupAllows('operator', info.readGroup) ? 'operator' : 'administrator';

    const ensureRecord = async (id: number) => {
      if (!(await recordExists(ctx.db, modelName, id))) throw new NotFoundError('Record');
      return { model_name: modelName, rec_id: id };
    };

    app.get(`${base}/messages`, {
      config: { group: info.readGroup },
      schema: { tags, params: idParams, querystring: listQuery, response: { 200: listOf(message) } },
      handler: async (req) => {
        const ref = await ensureRecord(req.params.id);
        const [rows, total] = await listMessages(ctx.db, ref, req.query);
        return { items: rows.map((m) => ({ ...jsonSafe(m), tracking_values: m.tracking_values })), total, ...req.query };
      },
    });

    app.post(`${base}/messages`, {
      config: { group: writeGroup },
      schema: {
        tags,
        params: idParams,
        body: z.object({
          body: z.string().min(1).max(100_000),
          message_type: z.enum(MESSAGE_TYPES).default('comment'),
          subtype_xmlid: z.enum(SUBTYPES).default('mail.mt_note'),
        }),
        response: { 201: message },
      },
      handler: async (req, reply) => {
        const ref = await ensureRecord(req.params.id);
        const created = await postMessage(ctx.db, { ...ref, ...req.body, author: authorOf(req.user) });
        return reply.status(201).send({ ...jsonSafe(created), tracking_values: [] });
      },
    });

    app.get(`${base}/activities`, {
      config: { group: info.readGroup },
      schema: { tags, params: idParams, response: { 200: z.object({ items: z.array(activity) }) } },
      handler: async (req) => {
        const ref = await ensureRecord(req.params.id);
        const rows = await ctx.db.activity.findMany({ where: ref, orderBy: { id: 'desc' } });
        return { items: rows.map(jsonSafe) };
      },
    });

    app.post(`${base}/activities`, {
      config: { group: writeGroup },
      schema: {
        tags,
        params: idParams,
        body: z.object({
          summary: z.string().min(1).max(500),
          note: z.string().max(10_000).optional(),
          due_date: z.iso.datetime().nullable().optional(),
          user_id: z.number().int().positive().nullable().optional(),
        }),
        response: { 201: activity },
      },
      handler: async (req, reply) => {
        const ref = await ensureRecord(req.params.id);
        const { due_date, ...rest } = req.body;
        const created = await scheduleActivity(ctx.db, ref, { ...rest, due_date: due_date ? new Date(due_date) : null });
        return reply.status(201).send(jsonSafe(created));
      },
    });

    app.post(`${base}/activities/:activity_id/actions/done`, {
      config: { group: writeGroup },
      schema: { tags, params: idParams.extend({ activity_id: z.coerce.number().int().positive() }), response: { 200: activity } },
      handler: async (req) => {
        const ref = await ensureRecord(req.params.id);
        const { count } = await ctx.db.activity.updateMany({
          where: { id: req.params.activity_id, ...ref },
          data: { state: 'done', done_at: new Date() },
        });
        if (count === 0) throw new NotFoundError('Activity');
        return jsonSafe((await ctx.db.activity.findUnique({ where: { id: req.params.activity_id } }))!);
      },
    });
  }
}
