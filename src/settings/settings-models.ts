import { defineModel } from '../core/models.js';

/** The settings singleton (row 1): its changes are tracked, and domain lookups are logged on it. */
export const settingsModel = defineModel({
  name: 'svc.settings',
  delegate: 'settings',
  table: 'settings',
  readGroup: 'user',
  tracked: [
    'keep_root_server_log_period',
    'dns_resolver',
    'webhook_call_log_days',
    'trial_reminder_days',
    'drop_expired_trials',
    'brand_name',
    'privacy_url',
    'usage_interval_minutes',
    'enforce_limits',
    'limit_grace_days',
    'support_contact',
    'backup_schedule_enabled',
    'backup_window_start_hour',
    'backup_window_hours',
    'backup_concurrency',
    'pool_room_alert_tenants',
  ],
});

declare module '../core/models.js' {
  interface ModelNames {
    'svc.settings': true;
  }
}
