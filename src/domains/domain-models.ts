import { defineModel } from '../core/models.js';

export const domainModel = defineModel({
  name: 'svc.domain',
  delegate: 'domain',
  table: 'domains',
  resource: 'domains',
  readGroup: 'user',
  search: ['hostname'],
  sortable: ['hostname', 'state', 'certificate_not_after'],
  tracked: ['subscription_id', 'hostname', 'is_primary', 'state', 'certificate_not_after', 'certificate_issuer'],
});

declare module '../core/models.js' {
  interface ModelNames {
    'svc.domain': true;
  }
}
