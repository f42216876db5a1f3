// Reuse of SSH connections inside one process (monitoring polls a server every few seconds; a new
// handshake each time would cost far more than the poll). One connection per key; a changed
// signature (new address or credentials) replaces it; a closed one is replaced on next use;
// connections unused for `idleMs` are closed. Callers discard() a connection that failed them.
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
  lastUsed: number;
}

export function createSshPool({ idleMs = 10 * 60_000, sweepMs = 60_000 } = {}): SshPool {
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

  const sweep = setInterval(() => {
    const now = Date.now();
    for (const [key, entry] of entries) if (now - entry.lastUsed > idleMs) discard(key);
  }, sweepMs);
  sweep.unref();

  return {
    async acquire(key, signature, connect) {
      const entry = entries.get(key);
      if (entry && entry.signature === signature) {
        entry.lastUsed = Date.now();
        const conn = await entry.conn.catch(() => null);
        if (conn && !conn.closed) return conn;
        if (entries.get(key) === entry) entries.delete(key);
      } else if (entry) {
        discard(key);
      }
      const conn = connect();
      const fresh: Entry = { signature, conn, lastUsed: Date.now() };
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
      clearInterval(sweep);
      for (const key of [...entries.keys()]) discard(key);
    },
  };
}
