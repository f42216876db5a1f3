// The monitor runner's connection keeper (src/monitoring/connection-keeper.ts) with SSH connections
// that need no network (test/helpers/fake-ssh-connection.ts) and a hand-driven Date: one connection
// and stream per server however many ask, the first counters of a server taken, a standby opened
// with old credentials, lingering and retried standbys, and a shell that cannot run the loop.
// Needs no service.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createSshPool } from '../../src/core/ssh-pool.js';
import type { RootServer } from '../../src/generated/prisma/client.js';
import { createConnectionKeeper } from '../../src/monitoring/connection-keeper.js';
import { connectionSignature, poolKeyOf } from '../../src/monitoring/monitor-poll.js';
import { parseSample, type ProcSample } from '../../src/monitoring/proc-metrics.js';
import { type FakeConnection, fakeConnection } from '../helpers/fake-ssh-connection.js';
import { procSections } from '../helpers/fake-ssh-host.js';

const EVERY = 5000;
/** Lets what was let go close (the pool closes a connection once its promise settles). */
const tick = () => new Promise((r) => setImmediate(r));

/** A keeper over fake servers: `servers` are the rows it loads, `held` what the runner holds. */
function harness({ loop = true, refuse = false } = {}) {
  const servers = new Map<number, RootServer>();
  const held = new Set<number>();
  const previous = new Map<number, ProcSample>();
  const conns: FakeConnection[] = [];
  let connects = 0;
  const pool = createSshPool();
  const keeper = createConnectionKeeper({
    pool,
    held: (id) => held.has(id),
    connectsAtOnce: 10,
    log: { debug: () => {} } as never,
    poller: {
      loadMonitored: async (id) => servers.get(id) ?? null,
      connect: (server) =>
        pool.acquire(poolKeyOf(server.id), connectionSignature(server), async () => {
          connects++;
          if (refuse) throw new Error('Connection refused');
          const conn = fakeConnection({ loop });
          conns.push(conn);
          return conn;
        }),
      previousSample: async (id) => previous.get(id) ?? null,
    },
  });
  const server = (id: number, ip = '10.0.0.1') => {
    servers.set(id, { id, ip, port: 22, username: 'root', password: 'pw', key: null, host_key: null } as RootServer);
  };
  return { keeper, pool, servers, held, previous, conns, server, connects: () => connects };
}

afterEach(() => {
  vi.useRealTimers();
});

describe('createConnectionKeeper', () => {
  it('readies a server taken with one connection and one stream, however many ask, from the last recorded counters', async () => {
    const h = harness();
    h.server(1);
    h.held.add(1);
    const recorded = parseSample(procSections({ uptime: '100.00 1' }));
    h.previous.set(1, recorded);
    h.keeper.keepWarm(new Map([[1, EVERY]]), () => true); // also a standby of itself, opened once
    await Promise.all([h.keeper.prepare(1, EVERY), h.keeper.prepare(1, EVERY)]);
    expect(h.connects()).toBe(1);
    expect(h.conns[0]!.streams).toHaveLength(1);
    expect(h.keeper.readyStream(1)?.last).toEqual(recorded);
    // Without recorded counters, a server taken is sampled once at once.
    h.server(2);
    h.held.add(2);
    await h.keeper.prepare(2, EVERY);
    expect(h.keeper.readyStream(2)?.last?.memTotal).toBe(8_000_000 * 1024);
    h.keeper.close();
    await tick();
    expect(h.conns.every((c) => c.closed)).toBe(true);
  });

  it('takes over a standby opened before the address changed on a new connection', async () => {
    const h = harness();
    h.server(1, '10.0.0.1');
    h.keeper.keepWarm(new Map([[1, EVERY]]), () => true);
    await vi.waitUntil(() => h.keeper.isWarm(1));
    expect(h.keeper.standbys()).toEqual([1]);
    h.server(1, '10.0.0.2');
    h.held.add(1);
    await h.keeper.prepare(1, EVERY);
    expect(h.connects()).toBe(2);
    await tick();
    expect(h.conns[0]!.closed).toBe(true);
    expect(h.keeper.readyStream(1)?.signature).toBe(connectionSignature(h.servers.get(1)!));
    h.keeper.close();
  });

  it('a connection no longer needed lingers 60 s; one of a server no longer scheduled closes at once', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const h = harness();
    h.server(1);
    h.server(2);
    h.keeper.keepWarm(
      new Map([
        [1, EVERY],
        [2, EVERY],
      ]),
      () => true,
    );
    await vi.waitUntil(() => h.keeper.isWarm(1) && h.keeper.isWarm(2));
    const scheduled = (id: number) => id === 1;
    h.keeper.keepWarm(new Map(), scheduled);
    expect(h.pool.size()).toBe(1); // 2 is not monitored any more
    vi.setSystemTime(Date.now() + 59_000);
    h.keeper.keepWarm(new Map(), scheduled);
    expect(h.pool.size()).toBe(1);
    vi.setSystemTime(Date.now() + 2000);
    h.keeper.keepWarm(new Map(), scheduled);
    expect(h.pool.size()).toBe(0);
    await tick();
    expect(h.conns.every((c) => c.closed)).toBe(true);
  });

  it('a standby that could not be opened is tried again after 30 s, not before', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const h = harness({ refuse: true });
    h.server(1);
    const standbys = new Map([[1, EVERY]]);
    h.keeper.keepWarm(standbys, () => true);
    await vi.waitUntil(() => h.connects() === 1 && !h.pool.has(poolKeyOf(1)));
    await tick(); // the failure is noted
    h.keeper.keepWarm(standbys, () => true);
    vi.setSystemTime(Date.now() + 29_000);
    h.keeper.keepWarm(standbys, () => true);
    expect(h.connects()).toBe(1);
    vi.setSystemTime(Date.now() + 1000);
    h.keeper.keepWarm(standbys, () => true);
    await vi.waitUntil(() => h.connects() === 2);
    expect(h.keeper.isWarm(1)).toBe(false);
  });

  it('a shell that cannot run the loop: warm on its connection, due times through poll() and the per-poll command', async () => {
    const h = harness({ loop: false });
    h.server(1);
    h.held.add(1);
    await h.keeper.prepare(1, EVERY);
    expect(h.keeper.isWarm(1)).toBe(true);
    expect(h.keeper.readyStream(1)).toBeUndefined();
    const conn = h.conns[0]!;
    const samples = await h.keeper.sampler(h.servers.get(1)!, conn, null, Date.now() + 5000);
    expect(samples.map((s) => s.memTotal)).toEqual([8_000_000 * 1024, 8_000_000 * 1024]); // no counters yet: two samples
    expect(conn.streams).toHaveLength(1); // the loop is not tried again
    h.keeper.close();
  });
});
