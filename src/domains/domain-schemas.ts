// Customer domains as the API shows and accepts them. The host name is checked by the service
// (normalizeHostname: it needs BASE_URL's host), so a refusal names `hostname`.
import { z } from 'zod';
import { nullableTimestamp, queryId, refId, timestamp } from '../core/http/schemas.js';
import { DomainState } from '../generated/prisma/enums.js';

export const domainOut = z.object({
  id: z.number(),
  subscription_id: z.number(),
  hostname: z.string().describe('Lower-case IDNA ASCII'),
  is_primary: z.boolean().describe("The tenant's web.base.url (https://<hostname>) once active"),
  state: z.enum(DomainState),
  dns_target: z.string().nullable().describe('What the customer sets: A/AAAA records to the Odoo host’s address'),
  verified_at: nullableTimestamp,
  certificate_not_after: nullableTimestamp,
  certificate_issuer: z.string().nullable(),
  last_error: z.string().nullable(),
  root_server_id: z.number().nullable().describe('The Odoo host its site file is on (null: none written)'),
  site_file: z.string().nullable(),
  created_at: timestamp,
  updated_at: timestamp,
});

export const domainCreate = z
  .object({
    subscription_id: refId,
    hostname: z.string().max(1000).describe('An apex or a subdomain (IDN accepted); no wildcard, no IP address'),
    is_primary: z.boolean().default(false),
  })
  .strict()
  .meta({ example: { subscription_id: 1, hostname: 'erp.example.com', is_primary: true } });

export const domainUpdate = z
  .object({ is_primary: z.boolean() })
  .strict()
  .meta({ example: { is_primary: true } });

export const domainFilters = z.object({
  subscription_id: queryId.optional(),
  state: z.enum(DomainState).optional(),
});
