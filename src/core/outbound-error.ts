// How an outbound call fails: one error class with a reason, and the transport's errors turned
// into a sentence an operator understands.
import { UserError } from './errors.js';
import { BlockedAddressError } from './outbound-guard.js';

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

export const isTimeout = (err: unknown) => (err as Error)?.name === 'TimeoutError' || (err as Error)?.name === 'AbortError';

/** `err` of the call `label` ("GET http://host/path") as an OutboundError. */
export function toOutboundError(err: unknown, label: string, timeoutMs: number): OutboundError {
  if (err instanceof OutboundError) return err;
  if (err instanceof BlockedAddressError) return new OutboundError('blocked', `${label}: ${err.message}`);
  if (isTimeout(err)) return new OutboundError('timeout', `${label}: no answer within ${timeoutMs} ms`);
  const e = err as Error & { code?: string; errors?: { code?: string }[] };
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
