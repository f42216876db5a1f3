import { defineModel } from '../core/models.js';

/** Administrators only: the token in the record is the webhook's secret URL. */
export const webhookModel = defineModel({
  name: 'svc.saas.webhook',
  delegate: 'webhook',
  table: 'webhooks',
  resource: 'webhooks',
  readGroup: 'administrator',
  search: ['model_name', 'trigger_action'],
  sortable: ['model_name'],
  tracked: ['model_name', 'rec_id', 'trigger_action', 'message_type', 'subtype_xmlid', 'active'],
  secrets: ['signing_secret'],
});

declare module '../core/models.js' {
  interface ModelNames {
    'svc.saas.webhook': true;
  }
}
