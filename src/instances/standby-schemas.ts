import { z } from 'zod';
import { timestamp } from '../core/http/schemas.js';
import { StandbyState } from '../generated/prisma/enums.js';

export const standbyDatabaseOut = z.object({
  id: z.number(),
  trial_package_id: z.number().nullable().describe('null once the package is deleted (the standby is then removed)'),
  database_template_id: z.number().nullable(),
  postgresql_server_id: z.number(),
  root_server_id: z.number().nullable().describe('The Odoo host holding its filestore'),
  database_name: z
    .string()
    .describe('svc_standby_<installation>_<trial package id>_<n>: <installation> is 8 hex digits of the service’s own database identity'),
  state: z.enum(StandbyState).describe('creating, ready, failed (never handed out; removed and made again later), taken'),
  error: z.string().nullable(),
  created_at: timestamp,
  updated_at: timestamp,
});
