// Monitoring shapes: a monitor-log row and per-bucket averages.
import { z } from 'zod';
import { timestamp } from '../core/http/schemas.js';
import { metricFields } from '../servers/index.js';

export const monitorLogOut = z.object({ root_server_id: z.number().int(), created_at: timestamp, ...metricFields });

export const monitorBucketOut = z.object({
  root_server_id: z.number().int(),
  bucket_start: timestamp,
  samples: z.number().int().describe('Polls averaged into this bucket'),
  ...metricFields,
});
