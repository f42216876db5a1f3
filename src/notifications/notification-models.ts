import { defineModel } from '../core/models.js';

export const notificationServerModel = defineModel({
  name: 'svc.ntfy.server',
  delegate: 'notificationServer',
  table: 'notification_servers',
  resource: 'notification-servers',
  readGroup: 'user',
  search: ['name', 'url'],
  tracked: [
    'name',
    'provider',
    'url',
    'is_default',
    'auto_generate_tokens',
    'token_expiry_days',
    'auth_enabled',
    'auth_method',
    'username',
    'fcm_project_id',
  ],
  secrets: ['password', 'auth_token', 'fcm_server_key', 'fcm_service_account_json'],
  destinations: ['provider', 'url'],
});

/** The per-user tokens made on a self-hosted push server; listed under their server. */
export const notificationUserTokenModel = defineModel({
  name: 'svc.ntfy.user.token',
  delegate: 'notificationUserToken',
  table: 'notification_user_tokens',
  readGroup: 'user',
  secrets: ['token'],
});

declare module '../core/models.js' {
  interface ModelNames {
    'svc.ntfy.server': true;
    'svc.ntfy.user.token': true;
  }
}
