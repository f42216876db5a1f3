// Users and API tokens as the API shows and accepts them.
import { z } from 'zod';
import { GROUPS } from '../core/groups.js';
import { nullableTimestamp, patchOf, refId, timestamp, isoInstant } from '../core/http/schemas.js';

export const user = z.object({
  id: z.number(),
  email: z.string(),
  name: z.string(),
  group: z.enum(GROUPS),
  active: z.boolean(),
  created_at: timestamp,
  updated_at: timestamp,
});
export const userCreate = z
  .object({
    email: z.email().max(254).toLowerCase(),
    name: z.string().max(200).optional(),
    group: z.enum(GROUPS).default('user'),
    active: z.boolean().optional(),
  })
  .strict()
  .meta({ example: { email: 'ops@example.com', name: 'Ops', group: 'operator' } });
export const userUpdate = patchOf(userCreate, { name: 'Ops team' });

export const apiToken = z.object({
  id: z.number(),
  user_id: z.number(),
  name: z.string(),
  prefix: z.string(),
  last_used_at: nullableTimestamp,
  expires_at: nullableTimestamp,
  created_at: timestamp,
});
export const apiTokenCreated = apiToken.extend({ token: z.string().describe('Shown once; only its hash is stored') });
export const apiTokenCreate = z
  .object({
    user_id: refId.describe('Defaults to the caller'),
    name: z.string().max(200).default(''),
    expires_at: isoInstant().nullable().default(null),
  })
  .partial({ user_id: true })
  .strict()
  .meta({ example: { user_id: 1, name: 'ops laptop', expires_at: '2027-12-31T00:00:00Z' } });
