// The streaming form of a poll: one long-lived exec channel per server runs STREAM_SCRIPT (a shell
// loop); each line written to it asks for one sample, which comes back as the same sections the
// per-poll command prints, ended by "@@end". A sample costs the server a few shell builtins and one
// `df` instead of an SSH session, a shell and awk, and costs the service no channel set-up.
// A server whose shell cannot run the loop (it ends before "@@ready") falls back to the per-poll
// command (execSampler) for as long as this process runs.
import type { SshConnection, SshStream } from '../core/ssh.js';
import type { RootServer } from '../generated/prisma/client.js';
import { connectionSignature, execSampler, type Sampler } from './monitor-poll.js';
import { MetricsParseError, parseSamples, STREAM_COMMAND, type ProcSample } from './proc-metrics.js';

/** The loop did not start (its shell cannot run it): use the per-poll command. */
export class StreamUnsupported extends Error {
  override name = 'StreamUnsupported';
}

/**
 * Output kept while waiting for a line end (before "@@ready") or for a sample's end (after it); a
 * sample is a few KB. Checked before each chunk is kept, so a party that sends endless output
 * without them costs this much and no more; going over it ends the stream as a failure.
 */
export const MAX_PENDING_BYTES = 256 * 1024;

/** A request waiting for its sample. */
interface Waiter {
  resolve: (s: ProcSample) => void;
  reject: (e: Error) => void;
  timer?: NodeJS.Timeout;
}

/** One server's sample stream over one connection. */
export class SampleStream {
  private buffer = '';
  private ready = false;
  /** Went over MAX_PENDING_BYTES: what still arrives before the channel closes is dropped. */
  private overflowed = false;
  private readonly waiting: Waiter[] = [];
  private onReady: { resolve: () => void; reject: (e: Error) => void } | null = null;
  /** The last sample this stream gave (the previous counters of the next one). */
  last: ProcSample | null = null;

  private constructor(
    readonly conn: SshConnection,
    private readonly channel: SshStream,
    /** The connection signature of the server when the stream was opened (see connectionSignature). */
    readonly signature: string,
  ) {
    channel.onData((chunk) => this.take(chunk));
    channel.onClose((code) => {
      const err = this.ready
        ? new Error('The monitoring stream ended')
        : new StreamUnsupported(`The monitoring loop did not start (exit code ${code ?? 'none'})`);
      this.onReady?.reject(err);
      this.onReady = null;
      this.failAll(err);
    });
  }

  /** Starts the loop on `conn` and waits for "@@ready". */
  static async open(
    conn: SshConnection,
    timeoutMs: number,
    { command = STREAM_COMMAND, signature = '' }: { command?: string; signature?: string } = {},
  ): Promise<SampleStream> {
    const deadline = Date.now() + timeoutMs;
    const channel = await conn.stream(command, { timeoutMs });
    const stream = new SampleStream(conn, channel, signature);
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => {
          stream.close();
          reject(new Error(`The monitoring loop did not start within ${Math.round(timeoutMs / 1000)} s`));
        },
        Math.max(1, deadline - Date.now()),
      );
      stream.onReady = {
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      };
      if (stream.ready) stream.onReady.resolve();
      if (channel.closed) stream.onReady?.reject(new StreamUnsupported('The monitoring loop did not start'));
    });
    return stream;
  }

  get closed(): boolean {
    return this.channel.closed || this.conn.closed;
  }

  /** Characters received and not yet consumed (at most MAX_PENDING_BYTES). */
  get buffered(): number {
    return this.buffer.length;
  }

  /** Asks for one sample; a sample that does not come in time ends the stream (answers would be out of step). */
  request(timeoutMs: number): Promise<ProcSample> {
    if (this.closed) return Promise.reject(new Error('The monitoring stream ended'));
    return new Promise((resolve, reject) => {
      const w: Waiter = { resolve, reject };
      // After a stalled event loop, timers run before the input that arrived meanwhile is read:
      // the answer may be waiting in the socket. Look once more after reading it (setImmediate
      // runs after the I/O phase) before calling it a timeout.
      w.timer = setTimeout(
        () =>
          setImmediate(() => {
            if (!this.waiting.includes(w)) return;
            this.close();
            this.failAll(new Error(`The metrics command did not answer within ${Math.round(timeoutMs / 1000)} s`));
          }),
        timeoutMs,
      );
      this.waiting.push(w);
      this.channel.write('\n');
    });
  }

  close(): void {
    this.channel.close();
  }

  private failAll(err: Error) {
    for (const w of this.waiting.splice(0)) {
      clearTimeout(w.timer);
      w.reject(err);
    }
  }

  private take(chunk: Buffer) {
    if (this.overflowed) return;
    if (this.buffer.length + chunk.length > MAX_PENDING_BYTES) return this.overflow();
    this.buffer += chunk.toString('utf8');
    if (!this.ready) {
      const nl = this.buffer.indexOf('\n');
      if (nl < 0) return;
      const first = this.buffer.slice(0, nl).trim();
      this.buffer = this.buffer.slice(nl + 1);
      if (first !== '@@ready') {
        this.onReady?.reject(new StreamUnsupported(`The monitoring loop did not start: ${first.slice(0, 200)}`));
        this.onReady = null;
        this.close();
        return;
      }
      this.ready = true;
      this.onReady?.resolve();
      this.onReady = null;
    }
    for (;;) {
      const end = this.buffer.indexOf('\n@@end\n');
      if (end < 0) break;
      const text = this.buffer.slice(0, end + 1);
      this.buffer = this.buffer.slice(end + 7);
      const w = this.waiting.shift();
      if (!w) continue; // an answer nobody waits for any more
      clearTimeout(w.timer);
      try {
        const [sample] = parseSamples(text);
        this.last = sample!;
        w.resolve(sample!);
      } catch (err) {
        w.reject(err as MetricsParseError);
      }
    }
  }

  /** Too much without a line end (or a sample's end): the server's failure, not a shell that cannot run the loop. */
  private overflow() {
    this.overflowed = true;
    this.buffer = '';
    const kib = MAX_PENDING_BYTES / 1024;
    const err = new MetricsParseError(
      this.ready
        ? `The monitoring stream sent more than ${kib} KiB without ending a sample ("@@end")`
        : `The monitoring loop sent more than ${kib} KiB without a line end before "@@ready"`,
    );
    this.onReady?.reject(err);
    this.onReady = null;
    this.failAll(err);
    this.close();
  }
}

/**
 * Opens a stream for the server on `conn` (its connection), keeping the server's connection
 * signature with it; null, and the server added to `fallback`, when its shell cannot run the loop.
 */
export async function openStream(
  server: RootServer,
  conn: SshConnection,
  timeoutMs: number,
  fallback: Set<number>,
  command = STREAM_COMMAND,
): Promise<SampleStream | null> {
  try {
    return await SampleStream.open(conn, timeoutMs, { command, signature: connectionSignature(server) });
  } catch (err) {
    if (!(err instanceof StreamUnsupported)) throw err;
    fallback.add(server.id);
    return null;
  }
}

/**
 * A Sampler over per-server streams: reuses the server's stream while its connection lives, opens
 * one otherwise, and falls back to the per-poll command for servers whose shell cannot run the
 * loop. `streams` is the caller's (the monitor runner keeps one per server it polls).
 */
export function streamSampler(streams: Map<number, SampleStream>, fallback: Set<number>, command = STREAM_COMMAND): Sampler {
  return async (server, conn, prev, deadline) => {
    if (fallback.has(server.id)) return execSampler(server, conn, prev, deadline);
    let stream = streams.get(server.id);
    if (!stream || stream.closed || stream.conn !== conn) {
      stream?.close();
      streams.delete(server.id);
      const opened = await openStream(server, conn, Math.max(1000, deadline - Date.now()), fallback, command);
      if (!opened) return execSampler(server, conn, prev, deadline);
      stream = opened;
      streams.set(server.id, stream);
    }
    const first = await stream.request(Math.max(1000, deadline - Date.now()));
    if (prev) return [first];
    await new Promise((r) => setTimeout(r, 1000));
    return [first, await stream.request(Math.max(1000, deadline - Date.now()))];
  };
}
