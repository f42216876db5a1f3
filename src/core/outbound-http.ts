// The one outbound HTTP client of the service (backup API, ntfy, FCM, later the git host through
// Octokit's custom fetch). Every call has a timeout, a bounded response body, and one action-log
// row of type api_call naming the record it was made for. The row never holds secrets: sensitive
// headers are written as [redacted], secret fields of JSON and form bodies (request and response)
// are redacted by name, and the caller's `secrets` values are masked wherever they appear; of an
// answer, only a short excerpt is kept. Connections go through the address guard (outbound-guard.ts).
// download() streams a large answer (a git tarball) instead of reading it, with the same bounds.
import { Readable } from 'node:stream';
import type { z } from 'zod';
import type { Db } from './db.js';
import type { Config } from './config.js';
import { UserError } from './errors.js';
import { SECRET_FIELD_NAMES } from './logger.js';
import { maskSecrets, writeActionLog } from './action-log.js';
import type { ModelName } from './models.js';
import { BlockedAddressError, createAddressGuard } from './outbound-guard.js';
import { createTransport } from './outbound-transport.js';

/** The record a call is made for, as the action log names it. */
export interface OutboundTarget {
  model_name: ModelName;
  rec_id: number;
  user_id?: number | null;
  job_id?: string | null;
}

export interface OutboundOptions {
  /** Defaults to OUTBOUND_TIMEOUT_MS; covers connecting, the answer and its whole body. */
  timeoutMs?: number;
  /** Defaults to OUTBOUND_MAX_RESPONSE_BYTES; a longer answer fails the call. */
  maxResponseBytes?: number;
  /** Plain values that must never be stored (API keys, passwords, tokens). */
  secrets?: readonly (string | null | undefined)[];
}

export interface ReadOptions<T> extends OutboundOptions {
  /**
   * The caller's reading of the answer (status, JSON, shape), done before the call is logged:
   * when it throws, the action-log row is a failure carrying that reason and the error is rethrown.
   */
  read?: (res: OutboundResponse) => T;
}

export interface OutboundRequest {
  method?: string;
  url: string;
  headers?: Record<string, string>;
  /** Sent as JSON (content-type set). */
  json?: unknown;
  /** Sent as application/x-www-form-urlencoded. */
  form?: Record<string, string>;
}

export interface DownloadOptions extends OutboundOptions {
  /** Redirects to follow (default 0). Never from https to http; the secret headers are not sent on. */
  maxRedirects?: number;
  /** The error for a final answer that is not 2xx (default: http_status with an excerpt). */
  refused?: (res: OutboundResponse) => Error;
}

/** A 2xx answer whose body is read at its consumer's pace. */
export interface Download {
  status: number;
  headers: Headers;
  /** Fails with OutboundError too_large, timeout or network; destroy it to stop the transfer. */
  body: Readable;
  /** The action-log row, written once the body ended, failed or was dropped. */
  logged: Promise<unknown>;
}

export type OutboundFailure =
  | 'bad_url'
  | 'bad_header'
  | 'blocked'
  | 'timeout'
  | 'refused'
  | 'unreachable'
  | 'tls'
  | 'too_large'
  | 'http_status'
  | 'not_json'
  | 'network';

/** A call that did not produce a usable answer; a UserError so API callers answer 400 with it. */
export class OutboundError extends UserError {
  constructor(
    readonly reason: OutboundFailure,
    message: string,
  ) {
    super(message, { reason });
  }
}

/** A fully read answer. Non-2xx statuses are answers too: callers decide what they mean. */
export class OutboundResponse {
  constructor(
    /** "GET http://host/path", for messages */
    readonly label: string,
    readonly status: number,
    readonly headers: Headers,
    readonly body: Uint8Array,
    /** Values masked in the excerpts that error messages quote. */
    private readonly secrets: OutboundOptions['secrets'] = [],
  ) {}

  /** A short, secret-free quote of the body for error messages. */
  excerpt(): string {
    return excerpt(maskSecrets(redactBody(this.text(), this.headers.get('content-type') ?? ''), this.secrets));
  }

  get ok(): boolean {
    return this.status >= 200 && this.status < 300;
  }

  text(): string {
    return new TextDecoder().decode(this.body);
  }

  /** The body of a 2xx answer as JSON; another status fails with reason http_status and an excerpt. */
  okJson(): unknown {
    if (!this.ok) throw new OutboundError('http_status', `${this.label} answered HTTP ${this.status}: ${this.excerpt()}`);
    return this.json();
  }

  /** The body as JSON; anything else fails with reason not_json and a short excerpt. */
  json(): unknown {
    const text = this.text();
    try {
      return JSON.parse(text);
    } catch {
      throw new OutboundError('not_json', `${this.label} answered HTTP ${this.status} with something that is not JSON: ${this.excerpt()}`);
    }
  }
}

/**
 * A `read` for JSON APIs: 401/403 is a UserError starting with `refused` (the remote refused our
 * credentials), another non-2xx (http_status) or non-JSON answer one starting with `what`, and
 * the JSON must have the shape of `schema`.
 */
export function readJson<T extends z.ZodType>(schema: T, messages: { refused: string; what: string }) {
  return (res: OutboundResponse): z.output<T> => {
    if (res.status === 401 || res.status === 403) {
      throw new UserError(`${messages.refused}: ${res.label} answered HTTP ${res.status}: ${res.excerpt()}`);
    }
    let body: unknown;
    try {
      body = res.okJson();
    } catch (err) {
      const e = err as OutboundError;
      throw new OutboundError(e.reason, `${messages.what}: ${e.message}`);
    }
    const parsed = schema.safeParse(body);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      throw new UserError(`${messages.what} from ${res.label} is not as expected (${issue.path.join('.') || 'answer'}: ${issue.message})`);
    }
    return parsed.data;
  };
}

/** What the action log keeps of a request body we sent, and of an answer (which may be anyone's page). */
const LOGGED_REQUEST_CHARS = 4096;
const LOGGED_ANSWER_CHARS = 300;
const SECRET_HEADER = /authorization|api-key|apikey|token|secret|password|cookie/i;
const SECRET_BODY_FIELDS = new Set([
  ...SECRET_FIELD_NAMES,
  'assertion',
  'private_key',
  'client_secret',
  'refresh_token',
  'id_token',
  'secret',
]);
const NULL_BODY_STATUS = new Set([101, 204, 205, 304]);

function excerpt(text: string, max = 200): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max)}…` : flat || '(empty)';
}

function redactValue(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(redactValue);
  if (value && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [k, SECRET_BODY_FIELDS.has(k.toLowerCase()) ? '[redacted]' : redactValue(v)]),
    );
  }
  return value;
}

/** A body as it may be stored: secret fields of JSON or form bodies redacted, at most `max` characters. */
function redactBody(text: string, contentType = '', max = LOGGED_REQUEST_CHARS): string {
  let out = text;
  if (/json/i.test(contentType) || /^\s*[[{]/.test(text)) {
    try {
      out = JSON.stringify(redactValue(JSON.parse(text)));
    } catch {
      // not JSON after all: stored as text (explicit secrets are still masked)
    }
  } else if (/x-www-form-urlencoded/i.test(contentType)) {
    const params = new URLSearchParams(text);
    for (const key of [...params.keys()]) if (SECRET_BODY_FIELDS.has(key.toLowerCase())) params.set(key, '[redacted]');
    out = params.toString();
  }
  return out.length > max ? `${out.slice(0, max)}… [${out.length - max} more characters]` : out;
}

/** The URL as it may be stored: query parameters with secret names redacted. */
function redactUrl(raw: string): string {
  try {
    const url = new URL(raw);
    for (const key of [...url.searchParams.keys()]) if (SECRET_BODY_FIELDS.has(key.toLowerCase())) url.searchParams.set(key, '[redacted]');
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
function describeLocation(url: URL): string {
  return `${url.origin}${url.pathname}${url.search ? '?[redacted]' : ''}`;
}

function isRedirect(status: number): boolean {
  return [301, 302, 303, 307, 308].includes(status);
}

/**
 * new Headers(); a value HTTP cannot carry (beyond Latin-1, a line break) fails naming its header,
 * never quoting the value (it is usually a credential).
 */
function headersOf(init: Headers | Record<string, string | readonly string[]> | undefined, label: string): Headers {
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
function buildRequest(input: string | URL | Request, init: RequestInit = {}): Request {
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

function describeRequest(method: string, url: string, headers: Headers, body: string): string {
  const lines = [`${method} ${redactUrl(url)}`];
  for (const [name, value] of headers) lines.push(`${name}: ${SECRET_HEADER.test(name) ? '[redacted]' : value}`);
  if (body) lines.push('', redactBody(body, headers.get('content-type') ?? ''));
  return lines.join('\n');
}

/** Turns the transport's errors into a sentence an operator understands. */
function failureOf(err: unknown, label: string, timeoutMs: number): OutboundError {
  if (err instanceof OutboundError) return err;
  if (err instanceof BlockedAddressError) return new OutboundError('blocked', `${label}: ${err.message}`);
  const e = err as Error & { code?: string; errors?: { code?: string }[] };
  if (e?.name === 'TimeoutError' || e?.name === 'AbortError') {
    return new OutboundError('timeout', `${label}: no answer within ${timeoutMs} ms`);
  }
  // Several addresses tried (a name with IPv4 and IPv6 addresses): an AggregateError of the attempts.
  const code = e?.code ?? e?.errors?.[0]?.code ?? '';
  const detail = e?.message || code || String(err);
  if (code === 'ECONNREFUSED') return new OutboundError('refused', `${label}: connection refused`);
  if (['ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH'].includes(code)) {
    return new OutboundError('unreachable', `${label}: host unreachable (${detail})`);
  }
  if (/CERT|SSL|TLS/i.test(code) || /certificate|ssl|tls/i.test(detail)) return new OutboundError('tls', `${label}: TLS error (${detail})`);
  return new OutboundError('network', `${label}: ${detail}`);
}

/** An answer that declares more than `max` bytes is refused before any of it is read. */
async function refuseDeclaredOver(res: Response, max: number, label: string): Promise<void> {
  const declared = Number(res.headers.get('content-length') ?? NaN);
  if (declared > max) {
    await res.body?.cancel();
    throw new OutboundError('too_large', `${label}: answer of ${declared} bytes exceeds the limit of ${max} bytes`);
  }
}

/** One api_call row of the action log for a call to `target`. */
function logCall(
  db: Db,
  target: OutboundTarget,
  ok: boolean,
  input_text: string,
  output_text: string,
  secrets?: readonly (string | null | undefined)[],
) {
  return writeActionLog(db, {
    model_name: target.model_name,
    rec_id: target.rec_id,
    user_id: target.user_id ?? null,
    job_id: target.job_id ?? null,
    action_type: 'api_call',
    status: ok ? 'success' : 'failure',
    input_text,
    output_text,
    secrets,
  });
}

async function readBounded(res: Response, max: number, label: string): Promise<Uint8Array> {
  await refuseDeclaredOver(res, max, label);
  if (!res.body) return new Uint8Array();
  const chunks: Uint8Array[] = [];
  let total = 0;
  const reader = res.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > max) {
      await reader.cancel();
      throw new OutboundError('too_large', `${label}: answer exceeds the limit of ${max} bytes`);
    }
    chunks.push(value);
  }
  const out = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}

export type OutboundHttp = ReturnType<typeof createOutboundHttp>;

export function createOutboundHttp(deps: {
  db: Db;
  config: Pick<Config, 'OUTBOUND_TIMEOUT_MS' | 'OUTBOUND_MAX_RESPONSE_BYTES' | 'OUTBOUND_ALLOW_NETS'>;
}) {
  const { db, config } = deps;
  const transport = createTransport(createAddressGuard(config.OUTBOUND_ALLOW_NETS));

  /** One call: fetch with timeout, bounded read, action-log row. Throws OutboundError when no answer. */
  async function send<T>(target: OutboundTarget, request: Request, opts: ReadOptions<T>): Promise<T> {
    const timeoutMs = opts.timeoutMs ?? config.OUTBOUND_TIMEOUT_MS;
    const maxBytes = opts.maxResponseBytes ?? config.OUTBOUND_MAX_RESPONSE_BYTES;
    const label = `${request.method} ${redactUrl(request.url)}`;
    const requestBody = request.body ? await request.clone().text() : '';
    const signal = request.signal ? AbortSignal.any([request.signal, AbortSignal.timeout(timeoutMs)]) : AbortSignal.timeout(timeoutMs);

    let response: OutboundResponse | undefined;
    let failure: Error | undefined;
    try {
      const res = await transport(request, signal);
      response = new OutboundResponse(label, res.status, res.headers, await readBounded(res, maxBytes, label), opts.secrets);
    } catch (err) {
      failure = failureOf(err, label, timeoutMs);
    }
    let result: T | undefined;
    if (response) {
      try {
        result = opts.read ? opts.read(response) : (response as T);
      } catch (err) {
        failure = err as Error;
      }
    }
    const answer =
      response &&
      `HTTP ${response.status}\n${redactBody(response.text(), response.headers.get('content-type') ?? '', LOGGED_ANSWER_CHARS)}`;

    await logCall(
      db,
      target,
      Boolean(response?.ok && !failure),
      describeRequest(request.method, request.url, request.headers, requestBody),
      [answer, failure?.message].filter(Boolean).join('\n\n'),
      opts.secrets,
    );
    if (failure) throw failure;
    return result as T;
  }

  /**
   * The body of a 2xx answer as a Node stream: pulled from the network only as fast as it is read
   * (backpressure), at most `maxBytes`, and within the deadline of the whole download.
   */
  function streamBody(res: Response, o: { label: string; maxBytes: number; timeoutMs: number }) {
    const reader = res.body!.getReader();
    let received = 0;
    const body = new Readable({
      async read() {
        try {
          const { done, value } = await reader.read();
          if (done) return void this.push(null);
          received += value.byteLength;
          if (received > o.maxBytes) {
            throw new OutboundError('too_large', `${o.label}: the answer exceeds the limit of ${o.maxBytes} bytes`);
          }
          this.push(value);
        } catch (err) {
          const e = err as Error;
          this.destroy(
            e.name === 'TimeoutError' || e.name === 'AbortError'
              ? new OutboundError(
                  'timeout',
                  `${o.label}: the answer did not arrive in full within ${o.timeoutMs} ms (${received} bytes received)`,
                )
              : failureOf(err, o.label, o.timeoutMs),
          );
        }
      },
      destroy(err, done) {
        reader.cancel().catch(() => {});
        done(err);
      },
    });
    return { body, received: () => received };
  }

  return {
    /**
     * A download too large to hold in memory (GET): answers once a 2xx answer's headers arrived,
     * with the body as a stream; any other final status fails (`refused`). Redirects are followed
     * up to `maxRedirects`, without the request's secret headers (a credential stays with the host
     * it was given for) and never from https to http; a redirect URL's query is never stored.
     * `timeoutMs` covers the whole download, body included. One action-log row, written when the
     * body is done, says how it ended and how many bytes came.
     */
    async download(
      target: OutboundTarget,
      req: { url: string; headers?: Record<string, string> },
      opts: DownloadOptions = {},
    ): Promise<Download> {
      const timeoutMs = opts.timeoutMs ?? config.OUTBOUND_TIMEOUT_MS;
      const maxBytes = opts.maxResponseBytes ?? config.OUTBOUND_MAX_RESPONSE_BYTES;
      const deadline = AbortSignal.timeout(timeoutMs);
      const secrets = [...(opts.secrets ?? [])];
      const headers = headersOf(req.headers, `GET ${redactUrl(req.url)}`);
      const inputText = describeRequest('GET', req.url, headers, '');
      const trail: string[] = [];
      const log = (ok: boolean, outcome: string) => logCall(db, target, ok, inputText, [...trail, outcome].join('\n'), secrets);
      const fail = async (err: Error, answer = ''): Promise<never> => {
        const masked = err instanceof OutboundError ? new OutboundError(err.reason, maskSecrets(err.message, secrets)) : err;
        await log(false, [answer, masked.message].filter(Boolean).join('\n\n'));
        throw masked;
      };

      let url = new URL(req.url);
      let label = `GET ${redactUrl(req.url)}`;
      let res: Response;
      for (let hops = 0; ; hops++) {
        try {
          res = await transport(buildRequest(url, { headers }), deadline);
        } catch (err) {
          return fail(failureOf(err, label, timeoutMs));
        }
        if (!isRedirect(res.status) || hops >= (opts.maxRedirects ?? 0)) break;
        await res.body?.cancel();
        let next: URL | null = null;
        try {
          next = new URL(res.headers.get('location') ?? '', url);
        } catch {
          // refused below
        }
        if (!next || !['http:', 'https:'].includes(next.protocol) || (url.protocol === 'https:' && next.protocol === 'http:')) {
          return fail(
            new OutboundError('bad_url', `${label} redirected to an unusable location (${next ? describeLocation(next) : 'none'})`),
          );
        }
        for (const [name, value] of next.searchParams) if (SECRET_BODY_FIELDS.has(name.toLowerCase())) secrets.push(value);
        for (const name of [...headers.keys()]) if (SECRET_HEADER.test(name)) headers.delete(name);
        trail.push(`HTTP ${res.status} → ${describeLocation(next)}`);
        url = next;
        label = `GET ${describeLocation(next)}`;
      }

      if (!res.ok || !res.body) {
        let answer: OutboundResponse;
        try {
          answer = new OutboundResponse(
            label,
            res.status,
            res.headers,
            await readBounded(res, config.OUTBOUND_MAX_RESPONSE_BYTES, label),
            secrets,
          );
        } catch (err) {
          return fail(failureOf(err, label, timeoutMs));
        }
        const text = `HTTP ${res.status}\n${redactBody(answer.text(), res.headers.get('content-type') ?? '', LOGGED_ANSWER_CHARS)}`;
        return fail(
          opts.refused?.(answer) ?? new OutboundError('http_status', `${label} answered HTTP ${res.status}: ${answer.excerpt()}`),
          text,
        );
      }
      try {
        await refuseDeclaredOver(res, maxBytes, label);
      } catch (err) {
        return fail(err as Error);
      }

      const { body, received } = streamBody(res, { label, maxBytes, timeoutMs });
      const answered = `HTTP ${res.status} ${res.headers.get('content-type') ?? ''}`.trim();
      const logged = new Promise((resolve, reject) => {
        body.once('close', () => {
          const written = body.readableEnded
            ? log(true, `${answered}\n${received()} bytes received`)
            : body.errored
              ? log(false, `${answered}\n${maskSecrets(body.errored.message, secrets)}`)
              : log(false, `${answered}\nstopped by the receiver after ${received()} bytes`);
          written.then(resolve, reject);
        });
      });
      return { status: res.status, headers: res.headers, body, logged };
    },

    /**
     * A request described as data; answers the response, or what `opts.read` makes of it.
     * Redirects are not followed, so credentials stay with the host they were meant for.
     */
    async request<T = OutboundResponse>(target: OutboundTarget, req: OutboundRequest, opts: ReadOptions<T> = {}): Promise<T> {
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
      const request = buildRequest(req.url, { method: req.method ?? 'GET', headers, body });
      return send(target, request, opts);
    },

    /**
     * A fetch-compatible function for libraries that take one (Octokit: `request: { fetch }`).
     * Answers are fully read (bounded) before they are returned; failures reject with OutboundError.
     * Redirects are not followed: a 3xx fails with http_status naming its target (Octokit would
     * take it for a successful answer and read its body as the resource).
     */
    fetchFor(target: OutboundTarget, opts: OutboundOptions = {}): typeof fetch {
      return async (input, init) => {
        const request = buildRequest(input, init);
        const read = (res: OutboundResponse) => {
          if (!isRedirect(res.status)) return res;
          const location = res.headers.get('location') ?? '';
          const to = URL.canParse(location, request.url) ? describeLocation(new URL(location, request.url)) : 'nowhere';
          throw new OutboundError('http_status', `${res.label} answered HTTP ${res.status} (to ${to}): redirects are not followed`);
        };
        const res = await send(target, request, { ...opts, read });
        return new Response(NULL_BODY_STATUS.has(res.status) ? null : res.body, { status: res.status, headers: res.headers });
      };
    },
  };
}
