import { defineModel } from '../core/models.js';

export const odooVersionModel = defineModel({
  name: 'svc.odoo.version',
  delegate: 'odooVersion',
  table: 'odoo_versions',
  resource: 'odoo-versions',
  readGroup: 'operator',
  search: ['name'],
  tracked: ['name', 'source_url', 'source_sha256', 'os_packages', 'server_wide_modules'],
});

declare module '../core/models.js' {
  interface ModelNames {
    'svc.odoo.version': true;
  }
}
