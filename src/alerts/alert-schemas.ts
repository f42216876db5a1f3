// Alert rules and alerts as the API takes and answers them.
import { z } from 'zod';
import { int32, nullableTimestamp, patchOf, refId, timestamp } from '../core/http/schemas.js';
import { AlertMetric, AlertState } from '../generated/prisma/enums.js';

/** Metrics compared with a threshold; server_offline has none. */
export const THRESHOLD_METRICS: readonly AlertMetric[] = ['cpu_percent', 'ram_percent', 'disk_percent', 'load_1'];

export const alertRuleOut = z.object({
  id: z.number(),
  name: z.string(),
  metric: z.enum(AlertMetric),
  threshold: z.number().nullable(),
  duration_seconds: z.number(),
  root_server_ids: z.array(z.number()),
  notification_server_id: z.number().nullable(),
  topic: z.string(),
  email_to: z.array(z.string()),
  notify_resolved: z.boolean(),
  repeat_minutes: z.number(),
  active: z.boolean(),
  created_at: timestamp,
  updated_at: timestamp,
});

const fields = {
  name: z.string().trim().min(1).max(200),
  metric: z.enum(AlertMetric).describe('cpu_percent, ram_percent, disk_percent, load_1 or server_offline'),
  threshold: z
    .number()
    .min(-1e9)
    .max(1e9)
    .nullable()
    .default(null)
    .describe('The condition is value >= threshold; required except for server_offline'),
  duration_seconds: int32
    .min(0, 'must be 0 or more')
    .max(7 * 86_400, 'must be at most 604800 (7 days)')
    .default(0)
    .describe('Every sample of this window must meet the condition (server_offline: offline this long); 0 = the latest sample'),
  root_server_ids: z.array(refId).max(10_000).default([]).describe('The root servers watched; empty = every monitored server'),
  notification_server_id: refId.nullable().default(null).describe("Push through this notification server; null = the company's default"),
  topic: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,64}$/, 'letters, digits, _ and - (at most 64)')
    .default('svc-alerts'),
  email_to: z.array(z.email().max(320)).max(50).default([]).describe('Addresses that receive the notices by mail'),
  notify_resolved: z.boolean().default(true).describe('Send notices when an alert resolves too'),
  repeat_minutes: int32
    .min(0, 'must be 0 or more')
    .max(7 * 1440, 'must be at most 10080 (7 days)')
    .default(0)
    .describe('Tell a firing alert again this often (minutes); 0 = never'),
  active: z.boolean().default(true),
};

export const alertRuleCreate = z
  .object(fields)
  .strict()
  .meta({
    example: {
      name: 'CPU busy for 5 minutes',
      metric: 'cpu_percent',
      threshold: 85,
      duration_seconds: 300,
      root_server_ids: [],
      topic: 'ops-alerts',
      email_to: ['ops@example.com'],
    },
  });
export const alertRuleUpdate = patchOf(alertRuleCreate, { threshold: 95 });

export const alertOut = z.object({
  id: z.number(),
  rule_id: z.number(),
  root_server_id: z.number(),
  state: z.enum(AlertState),
  metric: z.enum(AlertMetric).describe("The rule's metric when the alert opened"),
  threshold: z.number().nullable().describe("The rule's threshold when the alert opened"),
  value: z.number().describe('The value that opened the alert (server_offline: failed polls in a row)'),
  resolved_value: z.number().nullable().describe('The value that resolved it; null when it was resolved by a deletion'),
  started_at: timestamp,
  resolved_at: nullableTimestamp,
  notified_at: nullableTimestamp.describe('When the last notice (fire or resolve) was delivered'),
  notify_error: z.string().nullable().describe('Why the last delivery failed (push or mail); null once delivered'),
  silenced: z.boolean().describe('Opened while its notices were held back (a maintenance window, or its server offline)'),
  silenced_reason: z.string().nullable().describe('What held its notices back when it opened'),
  last_notice_at: nullableTimestamp.describe('When the last fire or repeat notice was sent; null: never told'),
  repeats: z.number().describe('Repeat notices sent (repeat_minutes)'),
  resolved_reason: z
    .string()
    .nullable()
    .describe('Why it resolved when no sample did (monitoring stopped, rule no longer watching, rule deleted)'),
  created_at: timestamp,
});
