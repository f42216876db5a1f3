// The one outbound HTTP client of the service (backup API, ntfy, FCM, the git host through
// Octokit's custom fetch). Every call has a timeout, a bounded response body, and one action-log
// row of type api_call naming the record it was made for, which never holds secrets
// (outbound-redaction.ts). Connections go through the address guard (outbound-guard.ts).
// Its parts: the Request (outbound-request.ts), the wire (outbound-transport.ts), the bounded body
// (outbound-body.ts), the answer (outbound-response.ts, read by outbound-read-json.ts), failures
// (outbound-error.ts), the action-log row (outbound-log.ts) and streamed downloads
// (outbound-download.ts).
import type { Db } from './db.js';
import { readBounded } from './outbound-body.js';
import { download, type DownloadOptions } from './outbound-download.js';
import { OutboundError, toOutboundError } from './outbound-error.js';
import { createAddressGuard } from './outbound-guard.js';
import { logCall, type OutboundTarget } from './outbound-log.js';
import { boundsOf, type OutboundConfig, type OutboundOptions } from './outbound-options.js';
import { describeLocation, describeRequest, redactUrl } from './outbound-redaction.js';
import { buildRequest, requestOf, type OutboundRequest } from './outbound-request.js';
import { isRedirect, OutboundResponse } from './outbound-response.js';
import { createTransport, NULL_BODY_STATUS } from './outbound-transport.js';

export interface ReadOptions<T> extends OutboundOptions {
  /**
   * The caller's reading of the answer (status, JSON, shape), done before the call is logged:
   * when it throws, the action-log row is a failure carrying that reason and the error is rethrown.
   */
  read?: (res: OutboundResponse) => T;
}

export type OutboundHttp = ReturnType<typeof createOutboundHttp>;

export function createOutboundHttp(deps: { db: Db; config: OutboundConfig }) {
  const { db, config } = deps;
  const transport = createTransport(createAddressGuard(config.OUTBOUND_ALLOW_NETS));

  /** One call: fetch with timeout, bounded read, action-log row. Throws OutboundError when no answer. */
  async function send<T>(target: OutboundTarget, request: Request, opts: ReadOptions<T>): Promise<T> {
    const { timeoutMs, maxBytes } = boundsOf(opts, config);
    const label = `${request.method} ${redactUrl(request.url)}`;
    const requestBody = request.body ? await request.clone().text() : '';
    const signal = request.signal ? AbortSignal.any([request.signal, AbortSignal.timeout(timeoutMs)]) : AbortSignal.timeout(timeoutMs);

    let response: OutboundResponse | undefined;
    let failure: Error | undefined;
    try {
      const res = await transport(request, signal);
      response = new OutboundResponse(label, res.status, res.headers, await readBounded(res, maxBytes, label), opts.secrets);
    } catch (err) {
      failure = toOutboundError(err, label, timeoutMs);
    }
    let result: T | undefined;
    if (response) {
      try {
        result = opts.read ? opts.read(response) : (response as T);
      } catch (err) {
        failure = err as Error;
      }
    }
    await logCall(
      db,
      target,
      Boolean(response?.ok && !failure),
      describeRequest(request.method, request.url, request.headers, requestBody),
      [response?.logged(), failure?.message].filter(Boolean).join('\n\n'),
      opts.secrets,
    );
    if (failure) throw failure;
    return result as T;
  }

  return {
    /** A GET whose answer is streamed: see outbound-download.ts. */
    download: (target: OutboundTarget, req: { url: string; headers?: Record<string, string> }, opts: DownloadOptions = {}) =>
      download({ db, config, transport }, target, req, opts),

    /**
     * A request described as data; answers the response, or what `opts.read` makes of it.
     * Redirects are not followed, so credentials stay with the host they were meant for.
     */
    async request<T = OutboundResponse>(target: OutboundTarget, req: OutboundRequest, opts: ReadOptions<T> = {}): Promise<T> {
      return send(target, requestOf(req), opts);
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
