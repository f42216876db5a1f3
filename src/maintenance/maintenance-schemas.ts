// Maintenance windows as the API takes and answers them.
import { z } from 'zod';
import { isoInstant, patchOf, refId, timestamp } from '../core/http/schemas.js';

/** A window may last at most this long (a longer one is a decommission, not maintenance). */
export const MAX_WINDOW_DAYS = 30;

export const maintenanceWindowOut = z.object({
  id: z.number(),
  root_server_ids: z.array(z.number()),
  starts_at: timestamp,
  ends_at: timestamp,
  reason: z.string(),
  created_at: timestamp,
  updated_at: timestamp,
});

export const maintenanceWindowCreate = z
  .object({
    root_server_ids: z.array(refId).min(1, 'at least one root server').max(10_000).describe('The root servers under maintenance'),
    starts_at: isoInstant({ offset: true }).describe('Start (inclusive), ISO 8601'),
    ends_at: isoInstant({ offset: true }).describe(`End (exclusive), ISO 8601; after starts_at, at most ${MAX_WINDOW_DAYS} days later`),
    reason: z.string().trim().max(500).default('').describe('What the work is (shown in the alerts it silences)'),
  })
  .strict()
  .meta({
    example: {
      root_server_ids: [1],
      starts_at: '2026-12-01T02:00:00Z',
      ends_at: '2026-12-01T04:00:00Z',
      reason: 'kernel upgrade',
    },
  });

export const maintenanceWindowUpdate = patchOf(maintenanceWindowCreate, { ends_at: '2026-12-01T05:00:00Z' });
