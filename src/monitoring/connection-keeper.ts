// The SSH connections and sample streams (monitor-stream.ts) of a monitor runner: one connection
// and one streaming channel per server it holds, and the same for its standbys (servers it does not
// hold but would take over: a failover or a hand-over then opens no connection). Connecting costs
// far more than sampling (the handshake, mostly on the server's side), so connections are opened a
// few at a time, takes before standbys (connect-pacer.ts), and one no longer needed lingers a while
// before it is closed.
import type { Logger } from 'pino';
import type { SshPool } from '../core/ssh-pool.js';
import { createConnectPacer, type PacerTicket } from './connect-pacer.js';
import { connectionSignature, type MonitorPoller, pollTimeoutMs, poolKeyOf, type Sampler } from './monitor-poll.js';
import { openStream, type SampleStream, streamSampler } from './monitor-stream.js';

/** A standby that could not be opened is tried again after this long. */
const WARM_RETRY_MS = 30_000;
/** A standby may take this long to connect: no poll waits for it. */
const STANDBY_TIMEOUT_MS = 15_000;
/**
 * A connection no longer needed is closed after this long: a worker that looks dead for a moment
 * (a stalled event loop) would otherwise make the others drop and reopen their standbys.
 */
const LINGER_MS = 60_000;

export interface ConnectionKeeperOptions {
  pool: SshPool;
  poller: Pick<MonitorPoller, 'loadMonitored' | 'connect' | 'previousSample'>;
  /** The runner holds the server (its connection is kept). */
  held(id: number): boolean;
  /** The most connections opened at once. */
  connectsAtOnce: number;
  log: Pick<Logger, 'debug'>;
}

export interface ConnectionKeeper {
  /**
   * Readies a server just taken: its stream (the standby's, else a new one, on a connection with
   * the server's current address and credentials) and its first counters, the last recorded ones
   * (any worker's) so the first delta spans about one interval, else a sample now.
   */
  prepare(id: number, every: number): Promise<void>;
  /** The server's open stream with a previous sample, ready for a due time; undefined when the due time must go through poll(). */
  readyStream(id: number): SampleStream | undefined;
  /** A stream that failed (out of step): closed and forgotten; the connection stays for the next due time. */
  dropStream(id: number, stream: SampleStream): void;
  /** The server's address or credentials changed: its stream and connection go; the next due time connects again. */
  reconnect(id: number): void;
  /** The standbys to keep (server → interval); a connection neither held nor a standby lingers, one of a server no longer `scheduled` goes at once. */
  keepWarm(standbys: ReadonlyMap<number, number>, scheduled: (id: number) => boolean): void;
  /** A standby is warm: its stream is open, or its connection (a shell that cannot run the loop). */
  isWarm(id: number): boolean;
  /** The warm standbys. */
  standbys(): number[];
  /** How poll() samples: the server's stream (opened if need be), or the per-poll command where the shell cannot run the loop. */
  readonly sampler: Sampler;
  /** Closes every stream and connection it keeps. */
  close(): void;
}

export function createConnectionKeeper({ pool, poller, held, connectsAtOnce, log }: ConnectionKeeperOptions): ConnectionKeeper {
  const streams = new Map<number, SampleStream>();
  /** Servers whose shell cannot run the loop: they use the per-poll command for as long as this process runs. */
  const fallback = new Set<number>();
  let standbys = new Set<number>();
  /** Servers this keeper may have a connection to (held, standby, or being opened). */
  const connected = new Set<number>();
  const opening = new Map<number, { promise: Promise<SampleStream | null>; ticket: PacerTicket }>();
  const warmRetryAt = new Map<number, number>();
  /** Connected servers neither held nor standbys any more, since when (closed after LINGER_MS). */
  const unneededSince = new Map<number, number>();
  const pacer = createConnectPacer({ start: 20, min: 4, max: connectsAtOnce, targetMs: 1000 });
  let closed = false;
  const kept = (id: number) => !closed && (held(id) || standbys.has(id));

  function closeStream(id: number) {
    streams.get(id)?.close();
    streams.delete(id);
  }

  function disconnect(id: number) {
    closeStream(id);
    pool.discard(poolKeyOf(id));
    connected.delete(id);
  }

  /**
   * The server's open stream, or one opened (once, however many ask); null: its shell cannot run
   * the loop. A take (urgent) that finds a standby still waiting to open hurries it.
   */
  function streamOf(id: number, every: number, urgent: boolean): Promise<SampleStream | null> {
    const open = streams.get(id);
    if (open && !open.closed) return Promise.resolve(open);
    const pending = opening.get(id);
    if (pending) {
      if (urgent) pacer.hurry(pending.ticket);
      return pending.promise;
    }
    connected.add(id);
    const ticket: PacerTicket = { urgent };
    const promise = pacer
      .run(ticket, async () => {
        const server = kept(id) ? await poller.loadMonitored(id) : null;
        if (!server || !kept(id)) return null;
        // A take connects within a poll's time (a dead server is failed as soon as a poll would be).
        const timeoutMs = ticket.urgent ? pollTimeoutMs(every) : STANDBY_TIMEOUT_MS;
        ticket.connected = !pool.has(poolKeyOf(id)); // only a handshake paces
        const conn = await poller.connect(server, timeoutMs);
        const stream = fallback.has(id) ? null : await openStream(server, conn, timeoutMs, fallback);
        if (!kept(id)) {
          stream?.close();
          disconnect(id);
          return null;
        }
        const current = streams.get(id); // a poll may have opened one meanwhile
        if (stream && current && !current.closed) {
          stream.close();
          return current;
        }
        if (stream) streams.set(id, stream);
        return stream;
      })
      .catch((err) => {
        if (!held(id)) disconnect(id); // a standby that failed is not warm
        throw err;
      })
      .finally(() => opening.delete(id));
    opening.set(id, { promise, ticket });
    return promise;
  }

  function isWarm(id: number) {
    return !opening.has(id) && (streams.get(id)?.closed === false || (fallback.has(id) && connected.has(id)));
  }

  return {
    async prepare(id, every) {
      let stream = await streamOf(id, every, true);
      if (!stream || !held(id)) return;
      const server = await poller.loadMonitored(id);
      if (server && connectionSignature(server) !== stream.signature) {
        // A standby opened before the address or credentials changed: connect with the new ones.
        disconnect(id);
        stream = await streamOf(id, every, true);
        if (!stream || !held(id)) return;
      }
      stream.last = (await poller.previousSample(id)) ?? (await stream.request(pollTimeoutMs(every)));
    },

    readyStream(id) {
      const stream = streams.get(id);
      return stream && !stream.closed && stream.last && !fallback.has(id) ? stream : undefined;
    },

    dropStream(id, stream) {
      stream.close();
      if (streams.get(id) === stream) streams.delete(id);
    },

    reconnect(id) {
      closeStream(id);
      pool.discard(poolKeyOf(id));
    },

    keepWarm(wanted, scheduled) {
      standbys = new Set(wanted.keys());
      const now = Date.now();
      for (const id of [...connected]) {
        if (kept(id)) unneededSince.delete(id);
        else if (!scheduled(id) || now - (unneededSince.get(id) ?? now) >= LINGER_MS) {
          disconnect(id);
          unneededSince.delete(id);
        } else if (!unneededSince.has(id)) unneededSince.set(id, now);
      }
      for (const id of [...warmRetryAt.keys()]) if (!standbys.has(id)) warmRetryAt.delete(id);
      for (const [id, every] of wanted) {
        if (opening.has(id) || isWarm(id) || (warmRetryAt.get(id) ?? 0) > now) continue;
        streamOf(id, every, false).catch((err) => {
          warmRetryAt.set(id, Date.now() + WARM_RETRY_MS);
          log.debug({ err, root_server_id: id }, 'opening a monitoring standby failed; tried again later');
        });
      }
    },

    isWarm,
    standbys: () => [...standbys].filter(isWarm),
    sampler: streamSampler(streams, fallback),

    close() {
      closed = true;
      standbys = new Set();
      for (const id of [...connected]) disconnect(id);
    },
  };
}
