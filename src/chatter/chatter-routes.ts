// GET/POST /api/v1/<resource>/{id}/messages and .../activities for every record family.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { ActivityState } from '../generated/prisma/enums.js';
import { groupAllows } from '../core/groups.js';
import { operationId } from '../core/http/actions.js';
import { authorOf } from '../core/http/auth.js';
import {
  idParams,
  listOf,
  listQuery,
  nullableTimestamp,
  queryId,
  refId,
  timeRangeQuery,
  timestamp,
  isoInstant,
} from '../core/http/schemas.js';
import { labelOf } from '../core/models.js';
import { MessageType, SUBTYPES } from '../core/chatter.js';
import type { Registry } from '../feature.js';
import { createChatterService } from './chatter-service.js';

const message = z.object({
  id: z.number(),
  model_name: z.string(),
  rec_id: z.number(),
  message_type: z.enum(MessageType),
  subtype_xmlid: z.string(),
  body: z.string(),
  author_id: z.number().nullable(),
  author_name: z.string().nullable(),
  created_at: timestamp,
  tracking_values: z
    .array(z.object({ field: z.string(), old_value: z.unknown(), new_value: z.unknown() }))
    .describe('Changes of tracked fields; values keep their type (booleans, numbers, text; dates as ISO 8601)'),
});

const messageInput = z
  .object({
    body: z.string().min(1).max(100_000),
    message_type: z.enum(MessageType).default('comment'),
    subtype_xmlid: z.enum(SUBTYPES).default('mail.mt_note'),
  })
  .strict()
  .meta({
    example: { body: 'Called the customer: the migration is planned for Monday.', message_type: 'comment', subtype_xmlid: 'mail.mt_note' },
  });

const activityInput = z
  .object({
    summary: z.string().min(1).max(500),
    note: z.string().max(10_000).optional(),
    due_date: isoInstant().nullable().optional(),
    user_id: refId.nullable().optional(),
  })
  .strict()
  .meta({ example: { summary: 'Check the backup', note: 'After the migration', due_date: '2027-01-15T09:00:00Z' } });

const activity = z.object({
  id: z.number(),
  summary: z.string(),
  note: z.string(),
  due_date: nullableTimestamp,
  user_id: z.number().nullable(),
  state: z.enum(ActivityState),
  created_at: timestamp,
  done_at: nullableTimestamp,
});

export function registerChatterRoutes(parent: FastifyInstance, ctx: AppContext, registry: Registry) {
  const app = parent.withTypeProvider<ZodTypeProvider>();
  const service = createChatterService(ctx, registry.models);
  const tags = ['chatter'];

  for (const model of registry.models.all) {
    if (!model.resource) continue;
    const base = `/api/v1/${model.resource}/:id`;
    const doc = (name: string, summary: string) => ({ tags, operationId: operationId(`/${model.resource}`, name), summary });
    const ref = (id: number) => ({ model_name: model.name, rec_id: id });
    const noun = labelOf(model);
    // Posting needs one group above reading, except where reading already needs administrator.
    const writeGroup = groupAllows('operator', model.readGroup) ? 'operator' : 'administrator';

    app.get(`${base}/messages`, {
      config: { group: model.readGroup },
      schema: {
        ...doc('listMessages', `List the messages of a ${noun}`),
        params: idParams,
        querystring: listQuery.extend(timeRangeQuery('created_at')),
        response: { 200: listOf(message) },
      },
      handler: (req) => service.listMessages(ref(req.params.id), req.query),
    });

    app.post(`${base}/messages`, {
      config: { group: writeGroup },
      schema: { ...doc('postMessage', `Post a message on a ${noun}`), params: idParams, body: messageInput, response: { 201: message } },
      handler: async (req, reply) => reply.status(201).send(await service.postMessage(ref(req.params.id), req.body, authorOf(req.user))),
    });

    app.get(`${base}/activities`, {
      config: { group: model.readGroup },
      schema: {
        ...doc('listActivities', `List the activities of a ${noun}`),
        params: idParams,
        response: { 200: z.object({ items: z.array(activity) }) },
      },
      handler: (req) => service.listActivities(ref(req.params.id)),
    });

    app.post(`${base}/activities`, {
      config: { group: writeGroup },
      schema: {
        ...doc('scheduleActivity', `Schedule an activity on a ${noun}`),
        params: idParams,
        body: activityInput,
        response: { 201: activity },
      },
      handler: async (req, reply) => reply.status(201).send(await service.scheduleActivity(ref(req.params.id), req.body)),
    });

    app.post(`${base}/activities/:activity_id/actions/done`, {
      config: { group: writeGroup },
      schema: {
        ...doc('markActivityDone', `Mark an activity of a ${noun} done`),
        params: idParams.extend({ activity_id: queryId }),
        response: { 200: activity },
      },
      handler: (req) => service.markActivityDone(ref(req.params.id), req.params.activity_id),
    });
  }
}
