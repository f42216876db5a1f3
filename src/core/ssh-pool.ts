// Reuse of SSH connections (monitoring polls a server every few seconds; a new handshake each time
// would cost far more than the poll). One connection per key; a changed signature (new address or
// credentials) replaces it; a closed one is replaced on next use. Connections stay open until their
// owner lets them go: discard() one (no longer needed, or it failed), close() them all.
import type { SshConnection } from './ssh.js';

export interface SshPool {
  /** The open connection for `key`, connecting (once, however many callers wait) when needed. */
  acquire(key: string, signature: string, connect: () => Promise<SshConnection>): Promise<SshConnection>;
  discard(key: string): void;
  /** A connection for `key` is open or being opened. */
  has(key: string): boolean;
  size(): number;
  close(): void;
}

interface Entry {
  signature: string;
  conn: Promise<SshConnection>;
}

export function createSshPool(): SshPool {
  const entries = new Map<string, Entry>();

  function discard(key: string) {
    const entry = entries.get(key);
    if (!entry) return;
    entries.delete(key);
    entry.conn.then(
      (c) => c.close(),
      () => {},
    );
  }

  return {
    async acquire(key, signature, connect) {
      const entry = entries.get(key);
      if (entry && entry.signature === signature) {
        // A connect that failed is no connection to reuse: a new one is made below (its own error, if any, is told).
        const conn = await entry.conn.catch(() => null);
        if (conn && !conn.closed) return conn;
        if (entries.get(key) === entry) entries.delete(key);
      } else if (entry) {
        discard(key);
      }
      const conn = connect();
      const fresh: Entry = { signature, conn };
      entries.set(key, fresh);
      try {
        return await conn;
      } catch (err) {
        if (entries.get(key) === fresh) entries.delete(key);
        throw err;
      }
    },
    discard,
    has: (key) => entries.has(key),
    size: () => entries.size,
    close() {
      for (const key of [...entries.keys()]) discard(key);
    },
  };
}
