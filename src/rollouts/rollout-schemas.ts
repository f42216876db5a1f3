// Rollouts as the API shows them (zod: the output whitelist) and the settings' input rules.
import { z } from 'zod';
import { nullableTimestamp, queryId, refId, timestamp } from '../core/http/schemas.js';
import { RolloutOrder, RolloutState, RolloutTenantState } from '../generated/prisma/enums.js';

export const rolloutTenant = z.object({
  subscription_id: z.number(),
  database_name: z.string(),
  position: z.number().describe('Its place in the order'),
  state: z
    .enum(RolloutTenantState)
    .describe('updated, unchanged, failed (restored), superseded (left to a newer rollout), or still in progress'),
  modules: z.array(z.string()).describe('The installed modules whose checksum changed: what -u updated'),
  error: z.string().nullable().describe("Why it failed: the module and Odoo's message"),
  started_at: nullableTimestamp,
  finished_at: nullableTimestamp,
  duration_ms: z.number().nullable(),
});

export const rolloutCounts = z.object({
  updated: z.number(),
  unchanged: z.number(),
  failed: z.number(),
  pending: z.number().describe('Not finished yet (waiting, or being copied, updated or restored)'),
  superseded: z.number(),
});

export const rollout = z.object({
  id: z.number(),
  root_server_id: z.number(),
  git_commit_id: z.number().nullable(),
  commit_id: z.string().nullable().describe('The sha of the commit deployed'),
  deploy_path: z.string().nullable(),
  state: z.enum(RolloutState),
  error: z.string().nullable().describe('Why it ended without updating anything (not on the addons path, restart failed)'),
  counts: rolloutCounts,
  tenants: z.array(rolloutTenant),
  created_at: timestamp,
  started_at: nullableTimestamp,
  finished_at: nullableTimestamp,
});

export const rolloutFilters = z.object({ root_server_id: queryId.optional(), git_commit_id: queryId.optional() });

export const retryTenant = z
  .object({ subscription_id: refId })
  .strict()
  .meta({ example: { subscription_id: 7 } });

export const rolloutSettingsOut = z.object({
  tenants_per_host: z.number().describe('Tenants of one host updated at once (default 1)'),
  order: z.enum(RolloutOrder).describe('trials_first (default), paid_first or oldest_first; then the oldest first'),
  updated_at: timestamp,
});

export const rolloutSettingsUpdate = z
  .object({ tenants_per_host: z.number().int().min(1).max(32), order: z.enum(RolloutOrder) })
  .partial()
  .strict()
  .meta({ example: { tenants_per_host: 2 } });
