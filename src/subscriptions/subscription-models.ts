import { defineModel } from '../core/models.js';

export const subscriptionModel = defineModel({
  name: 'svc.subscription',
  delegate: 'subscription',
  table: 'subscriptions',
  resource: 'subscriptions',
  readGroup: 'user',
  search: ['name', 'database_name'],
  sortable: ['name', 'state', 'trial_end_date'],
  tracked: [
    'name',
    'partner_id',
    'is_trial',
    'state',
    'suspend_reason',
    'database_name',
    'database_template_id',
    'backup_server_id',
    'trial_end_date',
    'grace_end_date',
    'database_dropped_at',
  ],
  secrets: ['database_role_password'],
});

declare module '../core/models.js' {
  interface ModelNames {
    'svc.subscription': true;
  }
}
