// Reading an answer's body within the size bound: all at once (readBounded), or as a Node stream
// pulled from the network only as fast as its consumer reads it (streamBody).
import { Readable } from 'node:stream';
import { isTimeout, OutboundError, toOutboundError } from './outbound-error.js';

/** An answer that declares more than `max` bytes is refused before any of it is read. */
export async function refuseDeclaredOver(res: Response, max: number, label: string): Promise<void> {
  const declared = Number(res.headers.get('content-length') ?? NaN);
  if (declared > max) {
    await res.body?.cancel();
    throw new OutboundError('too_large', `${label}: answer of ${declared} bytes exceeds the limit of ${max} bytes`);
  }
}

/** The whole body, at most `max` bytes (announced or streamed). */
export async function readBounded(res: Response, max: number, label: string): Promise<Uint8Array> {
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

/**
 * The body of a 2xx answer as a Node stream (backpressure), at most `maxBytes`, within the deadline
 * of the whole download; it fails with OutboundError too_large, timeout or network.
 */
export function streamBody(res: Response, o: { label: string; maxBytes: number; timeoutMs: number }) {
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
        this.destroy(
          isTimeout(err)
            ? new OutboundError(
                'timeout',
                `${o.label}: the answer did not arrive in full within ${o.timeoutMs} ms (${received} bytes received)`,
              )
            : toOutboundError(err, o.label, o.timeoutMs),
        );
      }
    },
    destroy(err, done) {
      // The body is given up (its reader is done or failed, and that error goes on): a cancel that fails changes nothing.
      reader.cancel().catch(() => {});
      done(err);
    },
  });
  return { body, received: () => received };
}
