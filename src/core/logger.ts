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
];

// Any letter case and repeated slashes reach the same route, so they are redacted alike.
const WEBHOOK_PATH = /\/+svc\/+webhook\/+[^/?#\s]*/gi;

/** Replaces the secret part of inbound webhook URLs: `/svc/webhook/<token>` → `/svc/webhook/[redacted]`. */
export function redactUrl(url: string): string {
  return url.replace(WEBHOOK_PATH, '/svc/webhook/[redacted]');
}

/** A request URL as logged: webhook tokens redacted, query parameters named but without values. */
function loggedUrl(url: string): string {
  const at = url.indexOf('?');
  if (at < 0) return redactUrl(url);
  const names = url
    .slice(at + 1)
    .split('&')
    .filter(Boolean)
    .map((pair) => `${pair.split('=')[0]}=`);
  return `${redactUrl(url.slice(0, at))}?${names.join('&')}`;
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
        url: loggedUrl(req.url),
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
