// The Request an outbound call sends, built so that its failures never repeat a credential written
// into the URL or a header.
import { OutboundError } from './outbound-error.js';
import { redactUrl } from './outbound-redaction.js';

/** A request described as data. */
export interface OutboundRequest {
  method?: string;
  url: string;
  headers?: Record<string, string>;
  /** Sent as JSON (content-type set). */
  json?: unknown;
  /** Sent as application/x-www-form-urlencoded. */
  form?: Record<string, string>;
}

/**
 * new Headers(); a value HTTP cannot carry (beyond Latin-1, a line break) fails naming its header,
 * never quoting the value (it is usually a credential).
 */
export function headersOf(init: Headers | Record<string, string | readonly string[]> | undefined, label: string): Headers {
  const headers = new Headers();
  for (const [name, value] of init instanceof Headers ? init : Object.entries(init ?? {})) {
    try {
      headers.append(name, [value].flat().join(', '));
    } catch {
      throw new OutboundError(
        'bad_header',
        `${label}: the ${name.toLowerCase()} header would carry characters an HTTP header cannot carry; set that value again`,
      );
    }
  }
  return headers;
}

/** new Request(), with messages that never repeat credentials written into the URL or a header. */
export function buildRequest(input: string | URL | Request, init: RequestInit = {}): Request {
  const url = input instanceof Request ? input.url : String(input);
  // Octokit, the one caller with its own init, gives its headers as an object.
  const headers = headersOf(init.headers as Record<string, string> | undefined, `${init.method ?? 'GET'} ${redactUrl(url)}`);
  try {
    return new Request(input, { ...init, headers });
  } catch (err) {
    const why = /credentials/i.test((err as Error).message) ? 'credentials in the URL are not supported' : 'not a valid URL';
    throw new OutboundError('bad_url', `${redactUrl(url)}: ${why}`);
  }
}

/** The Request of `req`: its body encoded as JSON or a form, JSON accepted unless it says otherwise. */
export function requestOf(req: OutboundRequest): Request {
  const headers = headersOf(req.headers, `${req.method ?? 'GET'} ${redactUrl(req.url)}`);
  let body: string | undefined;
  if (req.json !== undefined) {
    body = JSON.stringify(req.json);
    headers.set('content-type', 'application/json');
  } else if (req.form) {
    body = new URLSearchParams(req.form).toString();
    headers.set('content-type', 'application/x-www-form-urlencoded');
  }
  if (!headers.has('accept')) headers.set('accept', 'application/json');
  return buildRequest(req.url, { method: req.method ?? 'GET', headers, body });
}
