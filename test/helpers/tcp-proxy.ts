// A TCP relay on loopback in front of a real service (PostgreSQL, Redis), which a test can cut:
// every open connection is destroyed and new ones are refused until it is restored, as when the
// service goes down or the network to it breaks. For PostgreSQL it can also break at a COMMIT
// (breakAtCommit): the moment whose outcome the client cannot know.
import { createServer, type Server, type Socket, connect } from 'node:net';

/** How the relay breaks at a COMMIT: see breakAtCommit. */
export type CommitBreak = 'answer-lost' | 'never-arrives' | 'held';

export interface TcpProxy {
  port: number;
  /** Drops every connection and refuses new ones. */
  cut(): void;
  restore(): void;
  /**
   * Arms a break at the next COMMIT sent as a simple query on a PostgreSQL connection whose
   * startup message names `applicationName`: 'answer-lost' forwards the COMMIT and, when the
   * server's answer comes back, drops it and cuts (the transaction committed; the client never
   * hears); 'never-arrives' cuts instead of forwarding it (the server aborts the transaction);
   * 'held' cuts but keeps that server connection open with the COMMIT held back (a COMMIT still
   * on its way, the transaction still open): releaseHeldCommit() sends it later.
   * Either way the relay stays cut until restore(). Resolves once the break happened.
   */
  breakAtCommit(applicationName: string, how: CommitBreak): Promise<void>;
  /** Whether the server connection of a 'held' break is still open (the server did not end it). */
  holdsCommit(): boolean;
  /** Sends the held COMMIT on to the server, when its connection is still open. */
  releaseHeldCommit(): void;
  close(): Promise<void>;
}

// Frontend Query message: 'Q', int32 length (itself + text + NUL), "COMMIT", NUL.
const COMMIT_QUERY = Buffer.concat([Buffer.from([0x51, 0, 0, 0, 11]), Buffer.from('COMMIT\0')]);

export async function startTcpProxy(target: { host: string; port: number }): Promise<TcpProxy> {
  const sockets = new Set<Socket>();
  let down = false;
  let armed: { app: Buffer; how: CommitBreak; done: () => void } | null = null;
  let held: { upstream: Socket; chunk: Buffer } | null = null;

  function cut() {
    down = true;
    for (const s of sockets) s.destroy();
  }

  const server: Server = createServer((client) => {
    if (down) return client.destroy();
    const upstream = connect(target.port, target.host);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    let startup = Buffer.alloc(0);
    let awaitingAnswer: (() => void) | null = null;
    client.on('data', (chunk: Buffer) => {
      if (startup.length < 4096) startup = Buffer.concat([startup, chunk]);
      const hit = armed && startup.includes(armed.app) && chunk.includes(COMMIT_QUERY) ? armed : null;
      if (!hit) return void upstream.write(chunk);
      armed = null;
      if (hit.how === 'never-arrives') {
        cut();
        return hit.done();
      }
      if (hit.how === 'held') {
        sockets.delete(upstream);
        held = { upstream, chunk };
        upstream.removeAllListeners('end');
        cut();
        return hit.done();
      }
      awaitingAnswer = hit.done;
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (!awaitingAnswer) return void client.write(chunk);
      const done = awaitingAnswer;
      awaitingAnswer = null;
      cut();
      done();
    });
    client.on('end', () => upstream.end());
    upstream.on('end', () => client.end());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return {
    port,
    cut,
    restore() {
      down = false;
    },
    holdsCommit: () => held !== null && !held.upstream.destroyed && !held.upstream.readableEnded,
    releaseHeldCommit() {
      if (held && !held.upstream.destroyed) held.upstream.write(held.chunk);
    },
    breakAtCommit: (applicationName, how) =>
      new Promise<void>((resolve) => {
        armed = { app: Buffer.from(`application_name\0${applicationName}\0`), how, done: resolve };
      }),
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        held?.upstream.destroy();
        server.close(() => resolve());
      }),
  };
}
