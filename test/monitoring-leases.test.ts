// The monitor runners' lease keepers (src/monitoring/lease-keeper.ts) on a real Redis, synced by
// hand, with what a runner does with the servers recorded: how the servers split between live
// workers, claiming a due time, hand-over only to a warm worker, a dead worker's servers taken over,
// schedule changes, and leaving. No SSH, no database.
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { createRedis } from '../src/core/queue.js';
import { createLeaseKeeper, type LeaseKeeper } from '../src/monitoring/lease-keeper.js';
import { leaseKey, rendezvous } from '../src/monitoring/monitor-leases.js';
import { type MonitorSchedule, scheduleKey, scheduleVersionKey } from '../src/monitoring/monitor-service.js';
import { REDIS_URL } from './helpers/pg.js';

const redis = createRedis(REDIS_URL);
const prefixes: string[] = [];
afterAll(async () => {
  for (const prefix of prefixes) {
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length > 0) await redis.del(...keys);
  }
  redis.disconnect();
});

const LEASE_MS = 600;
const IDS = Array.from({ length: 12 }, (_, i) => i + 1);

/** A Redis namespace of its own, with `ids` scheduled every 5 s. */
async function fleet(ids = IDS) {
  const prefix = `test-leases-${randomBytes(4).toString('hex')}`;
  prefixes.push(prefix);
  await redis.hset(scheduleKey(prefix), Object.fromEntries(ids.map((id) => [id, `5000:${id}`])));
  await redis.incr(scheduleVersionKey(prefix));

  /** A worker's lease keeper, and what it was told to do. */
  const worker = (workerId: string) => {
    const w = {
      taken: [] as number[],
      dropped: [] as number[],
      rescheduled: [] as [number, MonitorSchedule][],
      standbys: [] as number[],
      warm: true,
      keeper: undefined as unknown as LeaseKeeper,
    };
    w.keeper = createLeaseKeeper({
      redis,
      prefix,
      workerId,
      leaseMs: LEASE_MS,
      take: (id) => w.taken.push(id),
      drop: (id) => w.dropped.push(id),
      reschedule: (id, s) => w.rescheduled.push([id, s]),
      keepWarm: (standbys) => {
        w.standbys = [...standbys.keys()];
      },
      isWarm: () => w.warm,
    });
    return w;
  };
  /** Syncs the keepers in turn, `rounds` times. */
  const sync = async (keepers: LeaseKeeper[], rounds = 1) => {
    for (let i = 0; i < rounds; i++) for (const k of keepers) await k.sync();
  };
  const sorted = (ids: number[]) => [...ids].sort((a, b) => a - b);
  return { prefix, worker, sync, sorted };
}

describe('lease keepers of two workers', () => {
  it('split the servers as rendezvous hashing ranks them, each held once, the others kept warm by the second', async () => {
    const { worker, sync, sorted } = await fleet();
    const [a, b] = [worker('A'), worker('B')];
    await sync([a.keeper, b.keeper], 3);
    const rank = rendezvous()(['A', 'B']);
    expect(sorted(a.keeper.held())).toEqual(IDS.filter((id) => rank(id).first === 'A'));
    expect(sorted(b.keeper.held())).toEqual(IDS.filter((id) => rank(id).first === 'B'));
    expect(a.keeper.held().length).toBeGreaterThan(0); // 12 servers on one side: odds of 1 in 2,048
    expect(b.keeper.held().length).toBeGreaterThan(0);
    expect(sorted(a.standbys)).toEqual(sorted(b.keeper.held()));
    expect(sorted(b.standbys)).toEqual(sorted(a.keeper.held()));
    // Told what they hold: every take of one not dropped since is held now.
    for (const w of [a, b]) expect(sorted(w.taken.filter((id) => !w.dropped.includes(id)))).toEqual(sorted(w.keeper.held()));
  });

  it('record a due time once, by the holder only, and never one older than the last', async () => {
    const { worker, sync } = await fleet([1]);
    const [a, b] = [worker('A'), worker('B')];
    await sync([a.keeper, b.keeper], 3);
    const [holder, other] = a.keeper.holds(1) ? [a, b] : [b, a];
    expect(await other.keeper.claim([{ id: 1, due: 10_000 }])).toEqual([false]);
    expect(await holder.keeper.claim([{ id: 1, due: 10_000 }])).toEqual([true]);
    expect(await holder.keeper.claim([{ id: 1, due: 10_000 }])).toEqual([false]);
    expect(await holder.keeper.claim([{ id: 1, due: 5_000 }])).toEqual([false]);
    expect(await holder.keeper.claim([{ id: 1, due: 15_000 }])).toEqual([true]);
  });

  it('hand a server over only once its new holder is warm', async () => {
    const { worker, sync, sorted } = await fleet();
    const a = worker('A');
    await sync([a.keeper], 2);
    expect(sorted(a.keeper.held())).toEqual(IDS);
    const b = worker('B');
    b.warm = false; // its standbys are still connecting
    await sync([a.keeper, b.keeper], 3);
    expect(sorted(a.keeper.held())).toEqual(IDS);
    expect(b.keeper.held()).toEqual([]);
    b.warm = true;
    await sync([b.keeper, a.keeper, b.keeper]);
    const rank = rendezvous()(['A', 'B']);
    expect(sorted(b.keeper.held())).toEqual(IDS.filter((id) => rank(id).first === 'B'));
    expect(sorted(a.dropped)).toEqual(sorted(b.keeper.held()));
  });

  it("take a dead worker's servers once its leases expired; a clean leave hands them over at the next sync", async () => {
    const { worker, sync, sorted } = await fleet();
    const [a, b] = [worker('A'), worker('B')];
    await sync([a.keeper, b.keeper], 3);
    const ofA = sorted(a.keeper.held());
    a.keeper.forget(); // A dies: it neither renews nor releases
    await sync([b.keeper]);
    expect(b.keeper.held().some((id) => ofA.includes(id))).toBe(false); // A's leases still run
    await expect
      .poll(
        async () => {
          await b.keeper.sync();
          return sorted(b.keeper.held());
        },
        { timeout: 10 * LEASE_MS, interval: LEASE_MS / 4 },
      )
      .toEqual(IDS);

    const c = worker('C');
    await sync([b.keeper, c.keeper], 2);
    const ofB = sorted(b.keeper.held());
    expect(ofB).toEqual(IDS); // C joined, but B hands nothing over before C is warm
    await b.keeper.leave();
    await sync([c.keeper]);
    expect(sorted(c.keeper.held())).toEqual(IDS);
  });

  it('follow the schedule: a changed interval reschedules, a server no longer monitored is released', async () => {
    const { prefix, worker, sync } = await fleet([1, 2]);
    const a = worker('A');
    await sync([a.keeper], 2);
    await redis.multi().hset(scheduleKey(prefix), '1', '10000:7').hdel(scheduleKey(prefix), '2').incr(scheduleVersionKey(prefix)).exec();
    await sync([a.keeper]);
    expect(a.rescheduled).toEqual([[1, { every: 10_000, phase: 7 }]]);
    expect(a.dropped).toEqual([2]);
    expect(a.keeper.held()).toEqual([1]);
    expect(await redis.get(leaseKey(prefix, 2))).toBeNull();
  });
});
