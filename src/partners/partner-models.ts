import { defineModel } from '../core/models.js';

export const partnerModel = defineModel({
  name: 'res.partner',
  delegate: 'partner',
  table: 'partners',
  resource: 'partners',
  readGroup: 'user',
  search: ['name', 'company_name', 'email'],
});

declare module '../core/models.js' {
  interface ModelNames {
    'res.partner': true;
  }
}
