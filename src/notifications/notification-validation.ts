// What a notification server needs to be usable (a base URL for ntfy, an FCM credential for cloud
// push, the admin login for token generation, the credentials its auth method uses), checked on
// the record as it will be stored (the stored values merged with the change), each failure a 400
// naming its field.
import { ValidationError } from '../core/errors.js';
import { urlProblem } from '../core/outbound-fields.js';
import type { NotificationAuthMethod, NotificationProvider } from '../generated/prisma/enums.js';
import { parseServiceAccount } from './service-account.js';

export interface NotificationServerState {
  provider: NotificationProvider;
  url: string | null;
  auto_generate_tokens: boolean;
  token_expiry_days: number;
  auth_enabled: boolean;
  auth_method: NotificationAuthMethod | null;
  username: string | null;
  fcm_project_id: string | null;
  /** Whether each secret is (or will be) set. */
  has: { password: boolean; auth_token: boolean; fcm_server_key: boolean; fcm_service_account_json: boolean };
  /** The service-account JSON when this change sets it (the stored one was checked when it was set). */
  new_service_account_json?: string;
}

function invalid(field: string, message: string): never {
  throw new ValidationError(message, [{ field, message }]);
}

const filled = (v: string | null | undefined) => typeof v === 'string' && v.trim() !== '';

export function validateNotificationServer(s: NotificationServerState): void {
  if (!Number.isInteger(s.token_expiry_days) || s.token_expiry_days < 1 || s.token_expiry_days > 3650) {
    invalid('token_expiry_days', 'token_expiry_days must be between 1 and 3650');
  }
  if (s.provider === 'selfhosted_push') {
    if (!filled(s.url)) invalid('url', 'url is required for the self-hosted push provider');
    if (!/^https?:\/\//i.test(s.url!) || !URL.canParse(s.url!)) invalid('url', 'url must start with http:// or https://');
    const problem = urlProblem(s.url!, { base: true });
    if (problem) invalid('url', `url ${problem}`);
  }
  // Basic auth joins them as username:password: a colon in the username would move the boundary.
  if (s.username?.includes(':')) invalid('username', 'username must not contain ":" (Basic auth cannot send it)');
  if (s.provider === 'cloud_push' && !s.has.fcm_server_key && !filled(s.fcm_project_id) && !s.has.fcm_service_account_json) {
    invalid('fcm_project_id', 'The cloud push provider needs fcm_server_key, fcm_project_id or fcm_service_account_json');
  }
  if (s.new_service_account_json !== undefined) {
    try {
      parseServiceAccount(s.new_service_account_json);
    } catch (err) {
      invalid('fcm_service_account_json', `fcm_service_account_json ${(err as Error).message}`);
    }
  }
  if (s.auto_generate_tokens) {
    if (!filled(s.username)) invalid('username', 'auto_generate_tokens needs the admin username');
    if (!s.has.password) invalid('password', 'auto_generate_tokens needs the admin password');
  }
  if (s.auth_enabled) {
    if (!s.auth_method) invalid('auth_method', 'auth_method (password or token) is required when auth_enabled is on');
    if (s.auth_method === 'password') {
      if (!filled(s.username)) invalid('username', 'auth_method password needs a username');
      if (!s.has.password) invalid('password', 'auth_method password needs a password');
    }
    if (s.auth_method === 'token' && !s.has.auth_token) invalid('auth_token', 'auth_method token needs an auth_token');
  }
}
