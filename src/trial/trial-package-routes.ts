// REST: /api/v1/trial-packages (read: user, write: operator); an auto-run package needs a database
// template (trial-package-service.ts).
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { registerCrud } from '../core/http/crud.js';
import { patchOf, queryBoolean, refId, timestamp } from '../core/http/schemas.js';
import { trialPackageModel } from './trial-models.js';
import { createTrialPackageService } from './trial-package-service.js';
import { packageFieldsIn, packageFieldsOut } from '../subscriptions/index.js';
import { MAX_STANDBY_POOL_SIZE } from '../instances/index.js';

const trialPackage = z.object({
  id: z.number(),
  name: z.string(),
  url_string: z.string(),
  auto_run_subscription: z.boolean(),
  ...packageFieldsOut,
  database_template_id: z.number().nullable(),
  active: z.boolean(),
  standby_pool_size: z.number(),
  created_at: timestamp,
  updated_at: timestamp,
});

const trialPackageCreate = z
  .object({
    name: z.string().trim().min(1).max(200),
    url_string: z
      .string()
      .regex(/^[a-z0-9][a-z0-9-]{0,99}$/, 'lower-case letters, digits and dashes')
      .describe('The form of this package is at /saas/trial/<url_string>'),
    auto_run_subscription: z.boolean().optional(),
    ...packageFieldsIn,
    // A trial lasts at least a day.
    trial_duration_days: z.number().int().min(1).max(3650).optional(),
    database_template_id: refId.nullable().optional(),
    active: z.boolean().optional(),
    standby_pool_size: z
      .number()
      .int()
      .min(0)
      .max(MAX_STANDBY_POOL_SIZE)
      .optional()
      .describe('Ready databases kept for this package (copied from its template ahead of time), so a trial is ready at once; default 0'),
  })
  .strict()
  .meta({
    example: {
      name: 'Odoo CRM',
      url_string: 'crm',
      auto_run_subscription: true,
      packages: ['crm', 'sales'],
      user_limit: 5,
      trial_duration_days: 14,
      grace_period_days: 7,
      database_template_id: 1,
    },
  });

export function registerTrialPackageRoutes(app: FastifyInstance, ctx: AppContext) {
  registerCrud(app, {
    path: '/trial-packages',
    model: trialPackageModel,
    tag: 'trial-packages',
    service: createTrialPackageService(ctx),
    output: trialPackage,
    create: trialPackageCreate,
    update: patchOf(trialPackageCreate),
    filters: z.object({ active: queryBoolean.optional(), url_string: z.string().optional() }),
    read: 'user',
    write: 'operator',
  });
}
