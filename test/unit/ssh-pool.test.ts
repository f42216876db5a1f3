// The SSH pool (src/core/ssh-pool.ts) with connections that need no network: one connection per key
// however many wait for it, a new one when the signature changes or the old one closed, none kept
// from a failed connect, and nothing closed but by its owner. Needs no service.
import { describe, expect, it } from 'vitest';
import { createSshPool } from '../../src/core/ssh-pool.js';
import { fakeConnection } from '../helpers/fake-ssh-connection.js';

/** A connect function that counts its calls and resolves the last one when the test says. */
function connector() {
  const made: ReturnType<typeof fakeConnection>[] = [];
  let open: (() => void) | null = null;
  return {
    made,
    connect: () =>
      new Promise<ReturnType<typeof fakeConnection>>((resolve) => {
        const conn = fakeConnection();
        made.push(conn);
        open = () => resolve(conn);
      }),
    /** Lets a waiting acquire() call connect, then opens that connection. */
    async open() {
      await new Promise((r) => setImmediate(r));
      open?.();
    },
  };
}

describe('createSshPool', () => {
  it('connects once however many wait, and reuses the connection after', async () => {
    const pool = createSshPool();
    const c = connector();
    const waiting = [1, 2, 3].map(() => pool.acquire('a', 'sig', c.connect));
    expect(pool.has('a')).toBe(true);
    await c.open();
    const conns = await Promise.all(waiting);
    expect(new Set(conns).size).toBe(1);
    expect(await pool.acquire('a', 'sig', c.connect)).toBe(conns[0]);
    expect(c.made).toHaveLength(1);
    pool.close();
  });

  it('replaces a connection whose signature changed (closing the old one) or that closed', async () => {
    const pool = createSshPool();
    const c = connector();
    const first = pool.acquire('a', 'sig-1', c.connect);
    await c.open();
    const old = await first;
    const moved = pool.acquire('a', 'sig-2', c.connect);
    await c.open();
    const fresh = await moved;
    expect(fresh).not.toBe(old);
    expect(old.closed).toBe(true);
    fresh.close(); // it ended (the server went away)
    const again = pool.acquire('a', 'sig-2', c.connect);
    await c.open();
    expect(await again).not.toBe(fresh);
    expect(c.made).toHaveLength(3);
    expect(pool.size()).toBe(1);
    pool.close();
  });

  it('keeps nothing from a failed connect; discard() and close() close what they drop', async () => {
    const pool = createSshPool();
    await expect(pool.acquire('a', 'sig', () => Promise.reject(new Error('refused')))).rejects.toThrow('refused');
    expect(pool.has('a')).toBe(false);
    const [a, b] = [fakeConnection(), fakeConnection()];
    await pool.acquire('a', 'sig', async () => a);
    await pool.acquire('b', 'sig', async () => b);
    pool.discard('a');
    await Promise.resolve();
    expect([a.closed, b.closed, pool.size()]).toEqual([true, false, 1]);
    pool.close();
    await Promise.resolve();
    expect([b.closed, pool.size()]).toEqual([true, 0]);
  });
});
