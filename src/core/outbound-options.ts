// What every outbound call may set, and the defaults it takes from the configuration.
import type { Config } from './config.js';

export type OutboundConfig = Pick<Config, 'OUTBOUND_TIMEOUT_MS' | 'OUTBOUND_MAX_RESPONSE_BYTES' | 'OUTBOUND_ALLOW_NETS'>;

/** Plain values that must never be stored (API keys, passwords, tokens). */
export type Secrets = readonly (string | null | undefined)[];

export interface OutboundOptions {
  /** Defaults to OUTBOUND_TIMEOUT_MS; covers connecting, the answer and its whole body. */
  timeoutMs?: number;
  /** Defaults to OUTBOUND_MAX_RESPONSE_BYTES; a longer answer fails the call. */
  maxResponseBytes?: number;
  secrets?: Secrets;
}

/** The call's own bounds, else the configured ones. */
export function boundsOf(opts: OutboundOptions, config: OutboundConfig) {
  return {
    timeoutMs: opts.timeoutMs ?? config.OUTBOUND_TIMEOUT_MS,
    maxBytes: opts.maxResponseBytes ?? config.OUTBOUND_MAX_RESPONSE_BYTES,
  };
}
