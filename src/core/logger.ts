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

/** Percent-decodes until nothing changes (`%252F` → `%2F` → `/`), byte by byte: a malformed sequence stays. */
function percentDecoded(text: string): string {
  let out = text;
  for (let before = ''; out !== before; ) {
    before = out;
    out = out.replace(/%([0-9a-f]{2})/gi, (_, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));
  }
  return out;
}

/** Resolves `.` and `..` segments, as a normalising proxy or router may. */
function withoutDotSegments(path: string): string {
  const out: string[] = [];
  for (const segment of path.split('/')) {
    if (segment === '..') {
      if (out.length > 1) out.pop();
    } else if (segment !== '.') {
      out.push(segment);
    }
  }
  return out.join('/');
}

const WEBHOOK_PATH = /(^|\/)svc\/webhook(?=$|[/?#])/i;

/**
 * Redacts inbound webhook tokens in text (a request URL, an error message): each run without
 * spaces that reaches `/svc/webhook` once percent-decoded (slashes and letters included, however
 * often), with backslashes as slashes, repeated slashes collapsed and, or else, dot segments
 * resolved, is cut after it: `/svc/webhook/[redacted]`. Other text stays as it was.
 */
export function redactUrl(text: string): string {
  return text.replace(/\S+/g, (run) => {
    // `(?<!:)`: a URL's `scheme://` stays readable.
    const path = percentDecoded(run)
      .replaceAll('\\', '/')
      .replace(/(?<!:)\/{2,}/g, '/');
    for (const form of [path, withoutDotSegments(path)]) {
      const m = WEBHOOK_PATH.exec(form);
      if (m) return `${form.slice(0, m.index)}/svc/webhook/[redacted]`;
    }
    return run;
  });
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
