// Settings singleton: readable by all, changed by administrators; domain lookups and
// key rotation as actions.
import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { action, operationId, registerActions } from '../core/http/actions.js';
import { ifMatchHeaders, ifMatchOf, withEtag } from '../core/http/etag.js';
import { authorOf } from '../core/http/auth.js';
import { nullableTimestamp, timestamp } from '../core/http/schemas.js';
import { DnsResolver } from '../generated/prisma/enums.js';
import { createSettingsService } from './settings-service.js';
import { createDomainLookup } from './domain-lookup.js';
import { settingsJobs } from './settings-job-specs.js';

const settings = z.object({
  keep_root_server_log_period: z.number().int().describe('Days monitor logs are kept'),
  dns_resolver: z.enum(DnsResolver),
  webhook_call_log_days: z.number().int().describe('Days the per-webhook call log is kept'),
  trial_reminder_days: z.number().int().describe('Days before trial_end_date the trial_ending mail goes out (0: none)'),
  drop_expired_trials: z
    .boolean()
    .describe("The lifecycle drops expired trials' databases (final backup first) once grace_end_date passed"),
  brand_name: z.string().describe('Your name as visitors see it: trial page titles and the sign-off of the mails'),
  privacy_url: z.string().nullable().describe('Your privacy notice, linked under the trial form (null: no link)'),
  usage_interval_minutes: z.number().int().describe('How often every tenant is measured (rounded up to 5-minute ticks)'),
  enforce_limits: z.boolean().describe('Suspend subscriptions over their limits for longer than limit_grace_days'),
  limit_grace_days: z.number().int().describe('Days a subscription may stay over its limits before it is suspended'),
  support_contact: z
    .string()
    .nullable()
    .describe(
      "Whom customers contact: written into every instance (svc.contact), named by a suspended instance's page and its limit messages",
    ),
  backup_schedule_enabled: z.boolean().describe('Every running subscription with a database is backed up once a day, in the window'),
  backup_window_start_hour: z.number().int().describe('Hour (UTC, 0..23) the daily backup window opens'),
  backup_window_hours: z.number().int().describe('How long the window stays open (1..24 hours); outside it nothing is queued'),
  backup_concurrency: z
    .number()
    .int()
    .describe('Backups (with restores and drops) running at once, overall; never more than one per Odoo host'),
  pool_room_alert_tenants: z
    .number()
    .int()
    .nullable()
    .describe("A pool whose free room (new tenants) falls under this is an alert (null: room for 24 hours of the last week's trials)"),
  no_backup_server_alert_at: nullableTimestamp.describe(
    'Read-only: since when running subscriptions have gone 26 h without a backup because there is no backup server at all (null: not the case)',
  ),
  updated_at: timestamp,
});

const settingsUpdate = z
  .object({
    keep_root_server_log_period: z.number().int().min(1).max(3650),
    dns_resolver: z.enum(DnsResolver),
    webhook_call_log_days: z.number().int().min(1).max(3650),
    trial_reminder_days: z.number().int().min(0).max(365),
    drop_expired_trials: z.boolean(),
    brand_name: z.string().trim().min(1).max(100),
    privacy_url: z
      .url({ protocol: /^https?$/, error: 'an http(s) URL' })
      .max(2000)
      .nullable(),
    usage_interval_minutes: z.number().int().min(5).max(1440),
    enforce_limits: z.boolean(),
    limit_grace_days: z.number().int().min(0).max(365),
    // One line of plain text: an address, a URL or a phone number.
    support_contact: z
      .string()
      .trim()
      .min(1)
      .max(200)
      .regex(/^\P{Cc}*$/u, 'one line of text, no control characters')
      .nullable(),
    backup_schedule_enabled: z.boolean(),
    backup_window_start_hour: z.number().int().min(0).max(23),
    backup_window_hours: z.number().int().min(1).max(24),
    backup_concurrency: z.number().int().min(1).max(50),
    pool_room_alert_tenants: z.number().int().min(0).max(1_000_000).nullable(),
  })
  .partial()
  .strict()
  .meta({ example: { keep_root_server_log_period: 7 } });

const lookupResult = z.object({
  domain: z.string().describe('ASCII form'),
  resolver: z.enum(DnsResolver),
  servers: z.array(z.string()).describe('Name servers asked; ["system"] for local'),
  addresses: z.array(z.string()),
});

export function registerSettingsRoutes(parent: FastifyInstance, ctx: AppContext) {
  const app = parent.withTypeProvider<ZodTypeProvider>();
  const service = createSettingsService(ctx);
  const domains = createDomainLookup(ctx);
  const tags = ['settings'];

  app.get('/api/v1/settings', {
    config: { group: 'user', etag: true },
    schema: { tags, operationId: operationId('/settings', 'get'), summary: 'Get the settings', response: { 200: settings } },
    handler: async (_req, reply) => withEtag(reply, settings, await service.get()),
  });

  app.patch('/api/v1/settings', {
    config: { group: 'administrator', etag: true },
    schema: {
      tags,
      operationId: operationId('/settings', 'update'),
      summary: 'Update the settings',
      headers: ifMatchHeaders,
      body: settingsUpdate,
      response: { 200: settings },
    },
    handler: async (req, reply) => {
      const precondition = ifMatchOf(req, settings, () => service.get());
      return withEtag(reply, settings, await service.update(req.body, authorOf(req.user), precondition));
    },
  });

  registerActions(parent, {
    path: '/settings',
    tag: 'settings',
    group: 'administrator',
    singleton: true,
    actions: {
      lookup_domain: action({
        summary: 'Look up a domain',
        description:
          'Resolves a domain (A and AAAA) with the DNS Resolver setting: cloudflare (1.1.1.1), google (8.8.8.8) or local (the system resolver). A domain that does not exist or a resolver that does not answer: 400 user_error.',
        // It sends traffic to the resolver: an operator's act.
        group: 'operator',
        body: z
          .object({ domain: z.string().min(1).max(300) })
          .strict()
          .meta({ example: { domain: 'example.com' } }),
        response: lookupResult,
        run: ({ body, user }) => domains.lookup(body.domain, { user_id: user.id }),
      }),
      rotate_encryption_key: action({
        summary: 'Rotate the encryption key',
        description:
          'Creates a new data key and re-encrypts every stored secret in the background. The job result is {key_version, reencrypted, retired_versions}.',
        response: 'job',
        run: ({ user }) => ctx.queues.enqueue(settingsJobs.rotate_encryption_key, { user_id: user.id }),
      }),
    },
  });
}
