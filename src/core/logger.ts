// pino options shared by the API and the workers. Secrets and webhook tokens never reach a log line.
import type { LoggerOptions } from 'pino';

/** Field names whose values are secrets anywhere in a logged object. */
export const SECRET_FIELD_NAMES = [
  'password',
  'key',
  'code_server_password',
  'api_key',
  'access_token',
  'auth_token',
  'fcm_server_key',
  'fcm_service_account_json',
  'signing_secret',
  'token',
  'code',
];

const WEBHOOK_PATH = /\/svc\/webhook\/[^/?#\s]*/g;

/** Replaces the secret part of inbound webhook URLs: `/svc/webhook/<token>` → `/svc/webhook/[redacted]`. */
export function redactUrl(url: string): string {
  return url.replace(WEBHOOK_PATH, '/svc/webhook/[redacted]');
}

export function loggerOptions(level: string): LoggerOptions {
  return {
    level,
    redact: {
      paths: [
        'req.headers.authorization',
        'req.headers["x-api-key"]',
        'req.headers["x-hub-signature-256"]',
        ...SECRET_FIELD_NAMES.flatMap((f) => [f, `*.${f}`, `body.${f}`, `payload.${f}`]),
      ],
      censor: '[redacted]',
    },
    serializers: {
      req: (req: { method: string; url: string; ip?: string }) => ({
        method: req.method,
        url: redactUrl(req.url),
        ip: req.ip,
      }),
      err: (err: Error & { code?: string }) => ({
        type: err.name,
        message: redactUrl(err.message ?? ''),
        code: err.code,
        stack: err.stack ? redactUrl(err.stack) : undefined,
      }),
    },
  };
}
