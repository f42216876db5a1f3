// Every stored secret column (DESIGN §3): encrypted at rest, write-only in the API,
// re-encrypted by key rotation. Add a column here when a feature adds a secret.
export const SECRET_COLUMNS = {
  root_servers: ['password', 'key', 'code_server_password'],
  postgresql_servers: ['password'],
  backup_servers: ['api_key'],
  notification_servers: ['password', 'auth_token', 'fcm_server_key', 'fcm_service_account_json'],
  notification_user_tokens: ['token'],
  git_accounts: ['access_token'],
  webhooks: ['signing_secret'],
} as const satisfies Record<string, readonly string[]>;

export type SecretTable = keyof typeof SECRET_COLUMNS;
