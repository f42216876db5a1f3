// Settings singleton (spec §2.13): readable by all, changed by administrators; key rotation.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { authorOf } from '../core/http/crud.js';
import { jobAccepted, timestamp } from '../core/http/schemas.js';
import { jsonSafe } from '../core/records.js';
import { createSettingsService } from './settings-service.js';
import { createDomainLookup } from './domain-lookup.js';

const DNS_RESOLVERS = ['cloudflare', 'google', 'local'] as const;

const settings = z.object({
  keep_root_server_log_period: z.number().int().describe('Days monitor logs are kept'),
  dns_resolver: z.enum(DNS_RESOLVERS),
  webhook_call_log_days: z.number().int().describe('Days the per-webhook call log is kept'),
  updated_at: timestamp,
});

const settingsUpdate = z
  .object({
    keep_root_server_log_period: z.number().int().min(1).max(3650),
    dns_resolver: z.enum(DNS_RESOLVERS),
    webhook_call_log_days: z.number().int().min(1).max(3650),
  })
  .partial()
  .strict();

export function registerSettingsRoutes(parent: FastifyInstance, ctx: AppContext) {
  const app = parent.withTypeProvider<ZodTypeProvider>();
  const service = createSettingsService(ctx.db);
  const domains = createDomainLookup(ctx);
  const tags = ['settings'];

  app.get('/api/v1/settings', {
    config: { group: 'user' },
    schema: { tags, response: { 200: settings } },
    handler: async () => jsonSafe(await service.get()),
  });

  app.patch('/api/v1/settings', {
    config: { group: 'administrator' },
    schema: { tags, body: settingsUpdate, response: { 200: settings } },
    handler: async (req) => jsonSafe(await service.update(req.body, authorOf(req.user))),
  });

  app.post('/api/v1/settings/actions/lookup_domain', {
    config: { group: 'operator' },
    schema: {
      tags,
      description:
        'Resolves a domain (A and AAAA) with the DNS Resolver setting: cloudflare (1.1.1.1), google (8.8.8.8) or local (the system resolver). A domain that does not exist or a resolver that does not answer: 400 user_error.',
      body: z.object({ domain: z.string().min(1).max(300) }).strict(),
      response: {
        200: z.object({
          domain: z.string().describe('ASCII form'),
          resolver: z.enum(DNS_RESOLVERS),
          servers: z.array(z.string()).describe('Name servers asked; ["system"] for local'),
          addresses: z.array(z.string()),
        }),
      },
    },
    handler: (req) => domains.lookup(req.body.domain, { user_id: req.user!.id }),
  });

  app.post('/api/v1/settings/actions/rotate_encryption_key', {
    config: { group: 'administrator' },
    schema: {
      tags,
      description:
        'Creates a new data key and re-encrypts every stored secret in the background. The job result is {key_version, reencrypted, retired_versions}.',
      response: { 202: jobAccepted },
    },
    handler: async (req, reply) => {
      const jobId = await ctx.queues.enqueue('rotate_encryption_key', { user_id: req.user!.id });
      return reply.status(202).send({ job_id: jobId });
    },
  });
}
