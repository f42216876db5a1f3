// REST: /api/v1/trial-packages (read: user, write: operator). DESIGN §6 fields.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { registerCrud } from '../core/http/crud.js';
import { queryBoolean, timestamp } from '../core/http/schemas.js';
import { createRecordService } from '../core/records.js';
import { modelLimits, packageNames } from '../subscriptions/subscription-routes.js';

export const TRIAL_PACKAGE_MODEL = 'svc.subscription.trial.package';

const trialPackage = z.object({
  id: z.number(),
  name: z.string(),
  url_string: z.string(),
  auto_run_subscription: z.boolean(),
  packages: z.array(z.string()),
  user_limit: z.number(),
  storage_limit_gb: z.number(),
  stage_limit: z.number(),
  trial_duration_days: z.number(),
  grace_period_days: z.number(),
  model_limits: z.record(z.string(), z.unknown()),
  database_template_id: z.number().nullable(),
  active: z.boolean(),
  created_at: timestamp,
  updated_at: timestamp,
});

const count = z.number().int().min(0).max(1_000_000);
const trialPackageCreate = z
  .object({
    name: z.string().trim().min(1).max(200),
    url_string: z
      .string()
      .regex(/^[a-z0-9][a-z0-9-]{0,99}$/, 'lower-case letters, digits and dashes')
      .describe('The form of this package is at /saas/trial/<url_string>'),
    auto_run_subscription: z.boolean().optional(),
    packages: packageNames.optional(),
    user_limit: count.optional(),
    storage_limit_gb: count.optional(),
    stage_limit: count.optional(),
    trial_duration_days: z.number().int().min(1).max(3650).optional(),
    grace_period_days: count.optional(),
    model_limits: modelLimits.optional(),
    database_template_id: z.number().int().positive().nullable().optional(),
    active: z.boolean().optional(),
  })
  .strict();

export function registerTrialPackageRoutes(app: FastifyInstance, ctx: AppContext) {
  registerCrud(app, {
    path: '/trial-packages',
    tag: 'trial-packages',
    service: createRecordService(ctx.db, ctx.box, {
      modelName: TRIAL_PACKAGE_MODEL,
      tracked: ['name', 'url_string', 'auto_run_subscription', 'database_template_id', 'active'],
    }),
    output: trialPackage,
    create: trialPackageCreate,
    update: trialPackageCreate.partial().strict(),
    filters: z.object({ active: queryBoolean.optional(), url_string: z.string().optional() }),
    read: 'user',
    write: 'operator',
  });
}
