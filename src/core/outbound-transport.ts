// How the outbound client puts a request on the wire: node:http(s) with agents whose connections
// resolve names through the address guard's lookup hook (Node's built-in fetch takes no hook or
// agent of ours). Fetch's contract as far as the client needs it: a Request in, a Response out with
// its body streamed, redirects never followed, everything ended by `signal`, whose reason (a
// TimeoutError) is what the request and its body then fail with.
import http from 'node:http';
import https from 'node:https';
import { Readable } from 'node:stream';
import type { AddressGuard } from './outbound-guard.js';

/** Statuses whose answer has no body (a Response refuses one). */
export const NULL_BODY_STATUS = new Set([101, 204, 205, 304]);

export type Transport = (request: Request, signal: AbortSignal) => Promise<Response>;

export function createTransport(guard: AddressGuard): Transport {
  // As Node's global agents, plus the guard: idle connections are kept a few seconds for the next call.
  const options = { keepAlive: true, scheduling: 'lifo' as const, timeout: 5000, lookup: guard.lookup };
  const httpAgent = new http.Agent(options);
  const httpsAgent = new https.Agent(options);

  return async (request, signal) => {
    const url = new URL(request.url);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(`unsupported protocol ${url.protocol}`);
    guard.checkHost(url.hostname);
    const body = request.body ? Buffer.from(await request.arrayBuffer()) : undefined;
    const headers: Record<string, string> = { 'user-agent': 'svc', ...Object.fromEntries(request.headers) };
    if (body) headers['content-length'] = String(body.byteLength);
    signal.throwIfAborted();

    return new Promise<Response>((resolve, reject) => {
      let answer: http.IncomingMessage | undefined;
      const abort = () => {
        answer?.destroy(signal.reason);
        req.destroy(signal.reason);
      };
      const req =
        url.protocol === 'https:'
          ? https.request(url, { method: request.method, headers, agent: httpsAgent })
          : http.request(url, { method: request.method, headers, agent: httpAgent });
      const done = () => signal.removeEventListener('abort', abort);
      req.on('error', (err) => {
        done();
        reject(err); // after the answer arrived, its body reports failures: this rejection is then moot
      });
      req.once('response', (res) => {
        answer = res;
        res.once('close', done);
        const status = res.statusCode ?? 0;
        try {
          const responseHeaders = new Headers();
          for (let i = 0; i < res.rawHeaders.length; i += 2) responseHeaders.append(res.rawHeaders[i]!, res.rawHeaders[i + 1]!);
          const stream = NULL_BODY_STATUS.has(status) || request.method === 'HEAD' ? null : (Readable.toWeb(res) as ReadableStream);
          if (!stream) res.on('error', () => {}).resume(); // no body to report a failure to
          resolve(new Response(stream, { status, statusText: res.statusMessage, headers: responseHeaders }));
        } catch {
          res.destroy();
          reject(new Error(`answered with the unusable status ${status}`));
        }
      });
      signal.addEventListener('abort', abort, { once: true });
      req.end(body);
    });
  };
}
