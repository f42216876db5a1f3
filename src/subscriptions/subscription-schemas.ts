// Subscriptions as the API shows and accepts them; the package fields are shared with
// trial packages, which supply them.
import { z } from 'zod';
import { INT32_MAX, nullableTimestamp, patchOf, refId, timestamp, isoInstant } from '../core/http/schemas.js';
import { BackupState, SubscriptionOperation, SubscriptionState, SuspendReason, UsageState } from '../generated/prisma/enums.js';
import { SYSTEM_DATABASES } from '../postgresql/index.js';
import { STANDBY_PREFIX } from '../instances/index.js';
import { moduleName } from '../odoo/index.js';

export const modelLimits = z
  .record(z.string().min(1).max(200), z.number().int().min(0).max(INT32_MAX))
  .describe('model name → maximum records');
/** Odoo modules by technical name (packages are apps: a template built for a package installs them). */
export const packageNames = z
  .array(moduleName)
  .max(200)
  .describe(
    'Odoo modules by technical name (e.g. crm): the deployed instance has them installed; each must be in the template (400 naming those it lacks)',
  );
const count = z.number().int().min(0).max(1_000_000);
/** Backups of one period the backup server keeps (0..366; at least one of the three above 0, subscription-retention.ts). */
const keep = (period: string) =>
  z
    .number()
    .int()
    .min(0)
    .max(366)
    .describe(`${period} backups the backup server keeps of the tenant (0..366; at least one of the three above 0)`);

/** What a trial package supplies to a subscription (packages, limits, trial and grace periods, backup retention), as answered. */
export const packageFieldsOut = {
  packages: z.array(z.string()),
  user_limit: z.number(),
  storage_limit_gb: z.number(),
  stage_limit: z.number(),
  trial_duration_days: z.number(),
  grace_period_days: z.number(),
  model_limits: z.record(z.string(), z.unknown()),
  backup_keep_daily: z.number(),
  backup_keep_weekly: z.number(),
  backup_keep_monthly: z.number(),
};

/** The same fields as accepted (all optional: the database has the defaults). */
export const packageFieldsIn = {
  packages: packageNames.optional(),
  user_limit: count.optional(),
  storage_limit_gb: count.optional(),
  stage_limit: count.optional(),
  trial_duration_days: count.optional(),
  grace_period_days: count.optional(),
  model_limits: modelLimits.optional(),
  backup_keep_daily: keep('Daily').optional(),
  backup_keep_weekly: keep('Weekly').optional(),
  backup_keep_monthly: keep('Monthly').optional(),
};

export const subscription = z.object({
  id: z.number(),
  name: z.string(),
  partner_id: z.number(),
  is_trial: z.boolean(),
  state: z.enum(SubscriptionState),
  ...packageFieldsOut,
  trial_end_date: nullableTimestamp,
  grace_end_date: nullableTimestamp,
  database_template_id: z.number().nullable(),
  database_name: z.string().nullable(),
  postgresql_server_id: z
    .number()
    .nullable()
    .describe("Where its database lives (set by the deployment, changed by a move); null before a deployment: its template's"),
  root_server_id: z.number().nullable().describe('The Odoo host serving its instance (set by the deployment, changed by a move)'),
  backup_server_id: z.number().nullable(),
  backup_state: z.enum(BackupState),
  url: z.string().nullable().describe("The customer's instance (SUBSCRIPTION_URL); null without a database"),
  usage: z
    .object({
      db_size_bytes: z.number().nullable(),
      filestore_bytes: z.number().nullable().describe('null: no Odoo host to measure, or see missing'),
      active_users: z.number().nullable(),
      record_counts: z.record(z.string(), z.number()),
      measured_at: z.string(),
      missing: z.record(z.string(), z.string()).describe('measure → why the last round could not take it'),
    })
    .nullable()
    .describe('What the last usage round measured (null before the first)'),
  usage_state: z.enum(UsageState).describe('ok, warning (≥ 80 % of a limit) or exceeded (≥ 100 %)'),
  suspended_at: nullableTimestamp,
  suspend_reason: z.enum(SuspendReason).nullable(),
  trial_ready_sent_at: nullableTimestamp.describe('When the trial_ready mail went out'),
  ready_sent_at: nullableTimestamp.describe('When the ready mail of a paid subscription (its login and a password) went out'),
  trial_reminder_sent_at: nullableTimestamp.describe('When the trial_ending mail went out (cleared when trial_end_date changes)'),
  trial_expired_sent_at: nullableTimestamp.describe('When the trial_expired mail of the current expiry went out'),
  database_dropped_at: nullableTimestamp,
  drop_attempted_at: nullableTimestamp.describe('Last drop_database attempt (automatic drops are retried at most every 6 hours)'),
  operation: z.enum(SubscriptionOperation).nullable().describe('The deploy, backup, restore, drop_database or move running on it, if any'),
  operation_job_id: z.string().nullable(),
  created_at: timestamp,
  updated_at: timestamp,
});
export type SubscriptionOut = z.infer<typeof subscription>;

export const subscriptionCreate = z
  .object({
    name: z.string().trim().min(1).max(200),
    partner_id: refId,
    is_trial: z.boolean().optional(),
    ...packageFieldsIn,
    trial_end_date: isoInstant().nullable().optional(),
    grace_end_date: isoInstant().nullable().optional(),
    database_template_id: refId.nullable().optional(),
    database_name: z
      .string()
      .regex(/^[a-z_][a-z0-9_]{0,62}$/, 'lower-case letters, digits and _, starting with a letter or _, at most 63')
      .refine((name) => !SYSTEM_DATABASES.includes(name), "PostgreSQL's own databases are never a customer's")
      .refine((name) => !name.startsWith(STANDBY_PREFIX), `${STANDBY_PREFIX}… names are the standby pool's`)
      .nullable()
      .optional()
      .describe('Generated at deployment when empty'),
    backup_server_id: refId.nullable().optional(),
  })
  .strict()
  .meta({
    example: {
      name: 'Acme production',
      partner_id: 1,
      is_trial: false,
      packages: ['crm', 'sales'],
      user_limit: 20,
      database_template_id: 1,
    },
  });
export const subscriptionUpdate = patchOf(subscriptionCreate);
