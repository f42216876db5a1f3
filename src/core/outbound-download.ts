// A download too large to hold in memory (a git tarball): GET, answered once a 2xx answer's headers
// arrived, with the body as a stream; any other final status fails (`refused`). Redirects are
// followed up to `maxRedirects`, each hop a connection of its own through the address guard,
// without the request's secret headers (a credential stays with the host it was given for) and
// never from https to http; a redirect URL's query is never stored. `timeoutMs` covers the whole
// download, body included. One action-log row, written when the body is done, says how it ended
// and how many bytes came.
import type { Readable } from 'node:stream';
import { maskSecrets } from './action-log.js';
import type { Db } from './db.js';
import { readBounded, refuseDeclaredOver, streamBody } from './outbound-body.js';
import { OutboundError, toOutboundError } from './outbound-error.js';
import { logCall, type OutboundTarget } from './outbound-log.js';
import { boundsOf, type OutboundConfig, type OutboundOptions } from './outbound-options.js';
import { describeLocation, describeRequest, isSecretField, isSecretHeader, redactUrl } from './outbound-redaction.js';
import { buildRequest, headersOf } from './outbound-request.js';
import { isRedirect, OutboundResponse } from './outbound-response.js';
import type { Transport } from './outbound-transport.js';

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

export async function download(
  deps: { db: Db; config: OutboundConfig; transport: Transport },
  target: OutboundTarget,
  req: { url: string; headers?: Record<string, string> },
  opts: DownloadOptions = {},
): Promise<Download> {
  const { timeoutMs, maxBytes } = boundsOf(opts, deps.config);
  const deadline = AbortSignal.timeout(timeoutMs);
  const secrets = [...(opts.secrets ?? [])];
  const headers = headersOf(req.headers, `GET ${redactUrl(req.url)}`);
  const inputText = describeRequest('GET', req.url, headers, '');
  /** The redirects taken, for the action-log row. */
  const trail: string[] = [];
  const log = (ok: boolean, outcome: string) => logCall(deps.db, target, ok, inputText, [...trail, outcome].join('\n'), secrets);
  const fail = async (err: Error, answer = ''): Promise<never> => {
    const masked = err instanceof OutboundError ? new OutboundError(err.reason, maskSecrets(err.message, secrets)) : err;
    await log(false, [answer, masked.message].filter(Boolean).join('\n\n'));
    throw masked;
  };

  /** The answer after the redirects allowed; a redirect to a location it may not go to fails. */
  async function finalAnswer(): Promise<{ res: Response; label: string }> {
    let url = new URL(req.url);
    let label = `GET ${redactUrl(req.url)}`;
    for (let hops = 0; ; hops++) {
      let res: Response;
      try {
        res = await deps.transport(buildRequest(url, { headers }), deadline);
      } catch (err) {
        throw toOutboundError(err, label, timeoutMs);
      }
      if (!isRedirect(res.status) || hops >= (opts.maxRedirects ?? 0)) return { res, label };
      await res.body?.cancel();
      const location = res.headers.get('location') ?? '';
      const next = URL.canParse(location, url.href) ? new URL(location, url) : null;
      if (!next || !['http:', 'https:'].includes(next.protocol) || (url.protocol === 'https:' && next.protocol === 'http:')) {
        throw new OutboundError('bad_url', `${label} redirected to an unusable location (${next ? describeLocation(next) : 'none'})`);
      }
      for (const [name, value] of next.searchParams) if (isSecretField(name)) secrets.push(value);
      for (const name of [...headers.keys()]) if (isSecretHeader(name)) headers.delete(name);
      trail.push(`HTTP ${res.status} → ${describeLocation(next)}`);
      url = next;
      label = `GET ${describeLocation(next)}`;
    }
  }

  let res: Response;
  let label: string;
  try {
    ({ res, label } = await finalAnswer());
  } catch (err) {
    return fail(err as Error);
  }

  if (!res.ok || !res.body) {
    let answer: OutboundResponse;
    try {
      const body = await readBounded(res, deps.config.OUTBOUND_MAX_RESPONSE_BYTES, label);
      answer = new OutboundResponse(label, res.status, res.headers, body, secrets);
    } catch (err) {
      return fail(toOutboundError(err, label, timeoutMs));
    }
    const refusal = opts.refused?.(answer) ?? new OutboundError('http_status', `${label} answered HTTP ${res.status}: ${answer.excerpt()}`);
    return fail(refusal, answer.logged());
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
}
