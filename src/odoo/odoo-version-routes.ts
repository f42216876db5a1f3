// REST: /api/v1/odoo-versions (read: operator, write: administrator). A version says where an Odoo
// source tree comes from (checked against its SHA-256 on every set-up), what its Python needs from
// the OS packages, and the modules every Odoo process of it loads.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { registerCrud } from '../core/http/crud.js';
import { patchOf, timestamp } from '../core/http/schemas.js';
import { createRecordService } from '../core/records.js';
import { DEFAULT_OS_PACKAGES, DEFAULT_SERVER_WIDE_MODULES, moduleName, osPackage, sha256, sourceUrl, versionName } from './odoo-names.js';
import { odooVersionModel } from './odoo-version-models.js';

const odooVersionOut = z.object({
  id: z.number(),
  name: z.string(),
  source_url: z.string(),
  source_sha256: z.string(),
  os_packages: z.array(z.string()),
  server_wide_modules: z.array(z.string()),
  created_at: timestamp,
  updated_at: timestamp,
});

/** A list without repeats, in its order. */
const distinct = <T extends z.ZodType<string>>(item: T, max: number) =>
  z
    .array(item)
    .max(max)
    .transform((list) => [...new Set(list)]);

const odooVersionCreate = z
  .object({
    name: versionName.describe('Unique; names its directory on the hosts (<ODOO_BASE_PATH>/versions/<name>)'),
    source_url: sourceUrl.describe(
      'An https:// tarball of an Odoo source tree (downloaded by the service through its outbound rules) or a file:///path on the host',
    ),
    source_sha256: sha256.describe('SHA-256 of the tarball: setup_odoo fails when it differs'),
    os_packages: distinct(osPackage, 500)
      .default([...DEFAULT_OS_PACKAGES])
      .describe("Debian packages its Python needs (default: Odoo 18.0's list for Debian 12)"),
    server_wide_modules: distinct(moduleName, 50)
      .refine((list) => list.length > 0, 'at least one module')
      .default([...DEFAULT_SERVER_WIDE_MODULES])
      .describe('Loaded by every Odoo process (default base, web; 19.0 also wants rpc for /jsonrpc)'),
  })
  .strict()
  .meta({
    example: {
      name: '18.0',
      source_url: 'https://downloads.example.com/odoo-18.0.tar.gz',
      source_sha256: '3af9152c409b386daa66f663e1bebb144c2875194a64e13ae028c1dc98d0cf41',
    },
  });

export function registerOdooVersionRoutes(app: FastifyInstance, ctx: AppContext) {
  registerCrud(app, {
    path: '/odoo-versions',
    model: odooVersionModel,
    tag: 'odoo versions',
    service: createRecordService(ctx, odooVersionModel),
    output: odooVersionOut,
    create: odooVersionCreate,
    update: patchOf(odooVersionCreate, { source_sha256: '6f30182e65a33be4fd9ec363f0533dd90874cff4bcfc956f0becd8ec028e3906' }),
    filters: z.object({ name: z.string().trim().optional() }),
    read: 'operator',
    write: 'administrator',
  });
}
