// REST: /api/v1/partners (read: user, write: operator).
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { registerCrud } from '../core/http/crud.js';
import { patchOf, timestamp } from '../core/http/schemas.js';
import { createPartnerService } from './partner-service.js';
import { partnerModel } from './partner-models.js';

const partner = z.object({
  id: z.number(),
  name: z.string(),
  company_name: z.string().nullable(),
  email: z.string().describe('Stored lower-cased; unique'),
  mobile: z.string().nullable(),
  created_at: timestamp,
  updated_at: timestamp,
});

const partnerCreate = z
  .object({
    name: z.string().trim().min(1).max(200),
    company_name: z.string().trim().max(200).nullable().optional(),
    email: z.email().max(254),
    mobile: z.string().trim().max(50).nullable().optional(),
  })
  .strict()
  .meta({ example: { name: 'Jane Doe', company_name: 'Acme GmbH', email: 'jane@acme.example', mobile: '+49 170 1234567' } });

export function registerPartnerRoutes(app: FastifyInstance, ctx: AppContext) {
  registerCrud(app, {
    path: '/partners',
    model: partnerModel,
    tag: 'partners',
    service: createPartnerService(ctx),
    output: partner,
    create: partnerCreate,
    update: patchOf(partnerCreate),
    filters: z.object({ email: z.string().trim().toLowerCase().optional() }),
    read: 'user',
    write: 'operator',
  });
}
