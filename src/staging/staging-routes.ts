// A subscription's staging copies (operators): create_staging (202), the list, refresh (202), DELETE (202).
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { action, operationId, registerActions } from '../core/http/actions.js';
import { idParams, jobAccepted, queryId, refId } from '../core/http/schemas.js';
import { StagingState } from '../generated/prisma/enums.js';
import { createStagingRefresh } from './staging-refresh.js';
import { createStagingService } from './staging-service.js';

const stagingInstance = z.object({
  id: z.number().int(),
  subscription_id: z.number().int(),
  database_name: z.string(),
  url: z.string().describe("The copy's own address under the staging domain (STAGING_URL)"),
  state: z.enum(StagingState),
  error: z.string().nullable().describe('Why it failed to be made, or why its last refresh failed'),
  stale_commit: z
    .string()
    .nullable()
    .describe(
      "The commit a rollout of its host deployed that the copy has not been updated to (its host's Odoo runs that code): refreshed within a minute, or by refresh; null when up to date",
    ),
  stale_rollout_id: z.number().int().nullable().describe('That rollout'),
  backup_id: z.number().int().nullable().describe('The backup it was restored from; null: copied from the live instance'),
  created_at: z.date(),
  expires_at: z.date().describe('When it is dropped (STAGING_DAYS after it was asked for)'),
});

export function registerStagingRoutes(parent: FastifyInstance, ctx: AppContext) {
  const app = parent.withTypeProvider<ZodTypeProvider>();
  const service = createStagingService(ctx);
  const refresh = createStagingRefresh(ctx);
  const tags = ['staging'];

  registerActions(parent, {
    path: '/subscriptions',
    tag: 'staging',
    group: 'operator',
    actions: {
      create_staging: action({
        summary: 'Make a staging copy of the instance',
        description:
          "In a job: an online copy of the running subscription's database (pg_dump | pg_restore: the customer's instance keeps answering), owned by the same role, neutralized by Odoo (odoo-bin neutralize: crons, outgoing mail, payment providers and webhooks off; the ribbon), with its own database.uuid, database.secret and web.base.url (STAGING_URL), the filestore hard-linked; dropped after STAGING_DAYS. 409 when the subscription is not running or has no Odoo host running.",
        body: z
          .object({
            notify_customer: z
              .boolean()
              .default(false)
              .describe('Send the ready mail to the customer (default: to the operator who asked, not the customer)'),
            backup_id: refId
              .optional()
              .describe(
                "Make the copy from this completed backup of the subscription's database (on its backup server, which must restore into another database: svc's own does) instead of from the live instance",
              ),
          })
          .strict()
          .meta({ example: { notify_customer: false } })
          .nullable()
          .optional(),
        response: 'job',
        run: ({ id, body, user }) => service.request(id, user.id, body?.notify_customer ?? false, body?.backup_id),
      }),
    },
  });

  app.get('/api/v1/subscriptions/:id/staging-instances', {
    config: { group: 'operator' },
    schema: {
      tags,
      operationId: operationId('/subscriptions', 'listStagingInstances'),
      summary: "A subscription's staging copies",
      description:
        'Newest first: database, url, state (creating, ready, refreshing, failed), stale_commit (a rollout of its host it has not been updated to), created_at and expires_at.',
      params: idParams,
      response: { 200: z.object({ items: z.array(stagingInstance) }) },
    },
    handler: async (req) => ({ items: await service.list(req.params.id) }),
  });

  app.post('/api/v1/subscriptions/:id/staging-instances/:staging_id/actions/refresh', {
    config: { group: 'operator' },
    schema: {
      tags,
      operationId: operationId('/subscriptions', 'refreshStagingInstance'),
      summary: "Bring a staging copy to its host's code",
      description:
        "In a job, as a rollout updates a tenant: the copy's maintenance page, a safety copy (database and filestore), -u all with the host's Odoo, Odoo's neutralization again and svc's check; stale_commit cleared. When the update fails, the copy is put back from its safety copy, keeps stale_commit, and error and the subscription's chatter say why (the job fails). Copies a rollout left stale are refreshed by the service within a minute; this runs it again. 409 unless the copy is ready.",
      params: z.object({ id: queryId, staging_id: queryId }),
      response: { 202: jobAccepted },
    },
    handler: async (req, reply) =>
      reply.status(202).send({ job_id: await refresh.request(req.params.id, req.params.staging_id, req.user!.id) }),
  });

  app.delete('/api/v1/subscriptions/:id/staging-instances/:staging_id', {
    config: { group: 'operator' },
    schema: {
      tags,
      operationId: operationId('/subscriptions', 'dropStagingInstance'),
      summary: 'Drop a staging copy',
      description: 'In a job: its database and filestore go. 409 while it is being made.',
      params: z.object({ id: queryId, staging_id: queryId }),
      response: { 202: jobAccepted },
    },
    handler: async (req, reply) =>
      reply.status(202).send({ job_id: await service.requestDrop(req.params.id, req.params.staging_id, req.user!.id) }),
  });
}
