// What of a call may be stored or quoted: the action log and error messages never hold secrets.
// Sensitive headers are written as [redacted], secret fields of JSON and form bodies and of URL
// queries are redacted by name, credentials in a URL are dropped, and of an answer (which may be
// anyone's page) only a short excerpt is kept. Values the caller names as secrets are masked
// separately, by the action log (maskSecrets).
import { SECRET_FIELD_NAMES } from './logger.js';

/** What the action log keeps of a request body we sent, and of an answer. */
const LOGGED_REQUEST_CHARS = 4096;
export const LOGGED_ANSWER_CHARS = 300;
const SECRET_HEADER = /authorization|api-key|apikey|token|secret|password|cookie/i;
const SECRET_FIELDS = new Set([...SECRET_FIELD_NAMES, 'assertion', 'private_key', 'client_secret', 'refresh_token', 'id_token', 'secret']);

export const isSecretHeader = (name: string) => SECRET_HEADER.test(name);
/** A JSON, form or query field named like a secret. */
export const isSecretField = (name: string) => SECRET_FIELDS.has(name.toLowerCase());

/** A short one-line quote of `text` for messages. */
export function excerpt(text: string, max = 200): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max)}…` : flat || '(empty)';
}

function redactValue(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(redactValue);
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, isSecretField(k) ? '[redacted]' : redactValue(v)]));
  }
  return value;
}

/** A body as it may be stored: secret fields of JSON or form bodies redacted, at most `max` characters. */
export function redactBody(text: string, contentType = '', max = LOGGED_REQUEST_CHARS): string {
  let out = text;
  if (/json/i.test(contentType) || /^\s*[[{]/.test(text)) {
    try {
      out = JSON.stringify(redactValue(JSON.parse(text)));
    } catch {
      // not JSON after all: stored as text (explicit secrets are still masked)
    }
  } else if (/x-www-form-urlencoded/i.test(contentType)) {
    const params = new URLSearchParams(text);
    for (const key of [...params.keys()]) if (isSecretField(key)) params.set(key, '[redacted]');
    out = params.toString();
  }
  return out.length > max ? `${out.slice(0, max)}… [${out.length - max} more characters]` : out;
}

/** The URL as it may be stored: query parameters with secret names redacted. */
export function redactUrl(raw: string): string {
  try {
    const url = new URL(raw);
    for (const key of [...url.searchParams.keys()]) if (isSecretField(key)) url.searchParams.set(key, '[redacted]');
    if (url.username || url.password) {
      url.username = 'redacted';
      url.password = '';
    }
    return url.toString();
  } catch {
    return raw;
  }
}

/** A redirect target as it may be stored: its query may hold a credential of its own, so none of it is. */
export function describeLocation(url: URL): string {
  return `${url.origin}${url.pathname}${url.search ? '?[redacted]' : ''}`;
}

/** A request as the action log keeps it: method and URL, headers, body. */
export function describeRequest(method: string, url: string, headers: Headers, body: string): string {
  const lines = [`${method} ${redactUrl(url)}`];
  for (const [name, value] of headers) lines.push(`${name}: ${isSecretHeader(name) ? '[redacted]' : value}`);
  if (body) lines.push('', redactBody(body, headers.get('content-type') ?? ''));
  return lines.join('\n');
}
