import { defineModel } from '../core/models.js';

export const alertRuleModel = defineModel({
  name: 'svc.alert.rule',
  delegate: 'alertRule',
  table: 'alert_rules',
  resource: 'alert-rules',
  readGroup: 'user',
  search: ['name'],
  tracked: [
    'name',
    'metric',
    'threshold',
    'duration_seconds',
    'root_server_ids',
    'notification_server_id',
    'topic',
    'email_to',
    'notify_resolved',
    'repeat_minutes',
    'active',
  ],
});

/** Alerts are written by the evaluation only; their chatter and action log say how they were delivered. */
export const alertModel = defineModel({
  name: 'svc.alert',
  delegate: 'alert',
  table: 'alerts',
  resource: 'alerts',
  readGroup: 'user',
  sortable: ['started_at'],
  timeField: 'started_at',
});

declare module '../core/models.js' {
  interface ModelNames {
    'svc.alert.rule': true;
    'svc.alert': true;
  }
}
