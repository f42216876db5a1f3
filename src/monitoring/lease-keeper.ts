// The leases of one monitor runner: which monitored servers this worker polls, shared with the
// runners of all other workers through Redis (monitor-leases.ts holds the keys and the rules). At
// each sync, in a few round trips: the heartbeat, the live workers and the schedule's version (the
// schedule itself is read again only when it changed); then the leases held are renewed (a lost
// one is dropped), those of servers no longer monitored released, those another live worker
// should hold handed over once it is warm, free ones taken, and the standbys to keep warm named.
// Before a due time is recorded, claim() checks in one Lua call that the lease is still held and
// the due time new, so no due time is recorded twice, even while a lease changes hands.
import type { Redis } from 'ioredis';
import { CLAIM, leaseKey, RELEASE, RENEW, type Ranking, rendezvous, slotKey, warmKey, workersKey } from './monitor-leases.js';
import { type MonitorSchedule, parseSchedule, sampleKey, scheduleKey, scheduleVersionKey } from './monitor-service.js';

/** How long the last recorded due time of a server is kept (far longer than any interval). */
const SLOT_TTL_MS = 3600_000;
/** A holder hands a server over without waiting for its new holder to be ready after this long. */
const HANDOVER_WAIT_MS = 120_000;
/** Heartbeats older than this are removed from the workers' set (every 30th sync). */
const DEAD_WORKER_MS = 60_000;

export interface LeaseKeeperOptions {
  redis: Redis;
  /** The queue prefix: the Redis keys' namespace. */
  prefix: string;
  workerId: string;
  /** A lease not renewed for this long is free; a worker not heard from for this long is dead. */
  leaseMs: number;
  /** This worker now holds the server: it polls it from now on. */
  take(id: number, schedule: MonitorSchedule): void;
  /** This worker no longer holds the server (lost, released or handed over). */
  drop(id: number): void;
  /** A held server's schedule changed. */
  reschedule(id: number, schedule: MonitorSchedule): void;
  /** The servers this worker should keep warm (it ranks first on them and does not hold them yet, or second), with their interval. */
  keepWarm(standbys: ReadonlyMap<number, number>, scheduled: (id: number) => boolean): void;
  /** A standby is ready to be taken over without connecting. */
  isWarm(id: number): boolean;
}

/** One due time to record: the lease must be held and the due time newer than the last; `sample` (JSON) is stored with it. */
export interface Claim {
  id: number;
  due: number;
  sample?: string;
  sampleTtlMs?: number;
}

export interface LeaseKeeper {
  sync(): Promise<void>;
  held(): number[];
  holds(id: number): boolean;
  scheduleOf(id: number): MonitorSchedule | undefined;
  /** Records due times (one Lua call): true for each this worker may record. */
  claim(claims: Claim[]): Promise<boolean[]>;
  /** Takes nothing more (a lease won meanwhile is released at once). */
  stop(): void;
  /** Releases every lease held and leaves the live workers: the others take over at once. */
  leave(): Promise<void>;
  /** Forgets every lease held without releasing it, as the end of the process would: they expire. */
  forget(): void;
}

export function createLeaseKeeper(o: LeaseKeeperOptions): LeaseKeeper {
  const { redis, prefix, workerId: me, leaseMs } = o;
  const held = new Map<number, MonitorSchedule>();
  /** Servers seen with a free lease, since when. */
  const freeSince = new Map<number, number>();
  /** Held servers ranked to another worker, and since when (they wait for it to be warm). */
  const handingOver = new Map<number, number>();
  const rankingOf = rendezvous();
  // The schedule as last read, and its version then (undefined: not read yet).
  let scheduled = new Map<number, MonitorSchedule>();
  let scheduleVersion: string | null | undefined;
  let syncs = 0;
  let stopped = false;

  function drop(id: number) {
    if (!held.delete(id)) return;
    o.drop(id);
  }

  async function release(ids: number[]) {
    if (ids.length === 0) return;
    for (const id of ids) drop(id);
    await redis.eval(RELEASE, ids.length, ...ids.map((id) => leaseKey(prefix, id)), me);
  }

  /** Renews what is held; what was lost (expired and taken) goes. */
  async function renew() {
    const ids = [...held.keys()];
    if (ids.length === 0) return;
    const renewed = (await redis.eval(RENEW, ids.length, ...ids.map((id) => leaseKey(prefix, id)), me, leaseMs)) as number[];
    ids.forEach((id, i) => {
      if (renewed[i] !== 1) drop(id);
    });
  }

  /** Releases what another live worker should hold, once it is warm (it takes it at its next sync). */
  async function handOver(ranking: (id: number) => Ranking) {
    const leaving = [...held.keys()].filter((id) => ranking(id).first !== me);
    const since = new Map(leaving.map((id) => [id, handingOver.get(id) ?? Date.now()]));
    handingOver.clear();
    if (leaving.length === 0) return;
    const warm = await redis.mget(...leaving.map((id) => warmKey(prefix, id)));
    const go: number[] = [];
    leaving.forEach((id, i) => {
      if (warm[i] === ranking(id).first || Date.now() - since.get(id)! >= HANDOVER_WAIT_MS) go.push(id);
      else handingOver.set(id, since.get(id)!);
    });
    await release(go);
  }

  /**
   * Takes free leases: this worker's share at once, anyone's once it stayed free for a lease time
   * (long enough for the worker it was handed to, or its standby, to take it first).
   */
  async function takeFree(ranking: (id: number) => Ranking) {
    const wanted = [...scheduled.keys()].filter((id) => !held.has(id));
    if (wanted.length === 0) return;
    const owners = await redis.mget(...wanted.map((id) => leaseKey(prefix, id)));
    const now = Date.now();
    const tryTake: number[] = [];
    wanted.forEach((id, i) => {
      if (owners[i] !== null) freeSince.delete(id);
      else if (ranking(id).first === me || now - (freeSince.get(id) ?? now) >= leaseMs) tryTake.push(id);
      else if (!freeSince.has(id)) freeSince.set(id, now);
    });
    if (tryTake.length === 0) return;
    const pipe = redis.pipeline();
    for (const id of tryTake) pipe.set(leaseKey(prefix, id), me, 'PX', leaseMs, 'NX');
    const results = (await pipe.exec()) ?? [];
    const won = tryTake.filter((id, i) => {
      freeSince.delete(id);
      return results[i]?.[1] === 'OK';
    });
    if (stopped) return release(won); // stopping meanwhile: the others take them at once
    for (const id of won) {
      const schedule = scheduled.get(id)!;
      held.set(id, schedule);
      o.take(id, schedule);
    }
  }

  /**
   * Names the standbys: the servers this worker ranks first on (not held yet) or second on; and
   * tells the holders which of the first it is ready to take (their warm mark).
   */
  async function keepWarm(ranking: (id: number) => Ranking) {
    const first: number[] = [];
    const standbys = new Map<number, number>();
    for (const [id, schedule] of scheduled) {
      if (held.has(id)) continue;
      const r = ranking(id);
      if (r.first === me) first.push(id);
      else if (r.second !== me) continue;
      standbys.set(id, schedule.every);
    }
    o.keepWarm(standbys, (id) => scheduled.has(id));
    const ready = first.filter((id) => o.isWarm(id));
    if (ready.length === 0) return;
    const pipe = redis.pipeline();
    for (const id of ready) pipe.set(warmKey(prefix, id), me, 'PX', leaseMs);
    await pipe.exec();
  }

  return {
    async sync() {
      const now = Date.now();
      const wk = workersKey(prefix);
      // One round trip: the heartbeat, the live workers and the schedule's version.
      const read = redis.pipeline().zadd(wk, now, me);
      if (syncs++ % 30 === 0) read.zremrangebyscore(wk, '-inf', now - DEAD_WORKER_MS);
      read.zrangebyscore(wk, now - leaseMs, '+inf').get(scheduleVersionKey(prefix));
      const replies = (await read.exec()) ?? [];
      for (const [err] of replies) if (err) throw err;
      const live = (replies.at(-2)![1] as string[]).sort();
      const version = replies.at(-1)![1] as string | null;
      if (syncs === 1) return; // let the workers starting with this one be seen before taking servers
      // The schedule is read again only when it changed (or its version is gone: Redis lost it).
      if (version === null || version !== scheduleVersion) {
        const hash = await redis.hgetall(scheduleKey(prefix));
        scheduled = new Map(Object.entries(hash).map(([id, v]) => [Number(id), parseSchedule(v)]));
        scheduleVersion = version;
      }
      const ranking = rankingOf(live);
      await renew();
      await release([...held.keys()].filter((id) => !scheduled.has(id)));
      for (const [id, schedule] of held) {
        const s = scheduled.get(id)!;
        if (s.every === schedule.every && s.phase === schedule.phase) continue;
        held.set(id, s);
        o.reschedule(id, s);
      }
      await handOver(ranking);
      await takeFree(ranking);
      await keepWarm(ranking);
    },

    held: () => [...held.keys()],
    holds: (id) => held.has(id),
    scheduleOf: (id) => held.get(id),

    async claim(claims) {
      if (claims.length === 0) return [];
      const keys = claims.flatMap(({ id }) => [leaseKey(prefix, id), slotKey(prefix, id), sampleKey(prefix, id)]);
      const args = claims.flatMap((c) => [c.due, c.sample ?? '', c.sampleTtlMs ?? 0]);
      const claimed = (await redis.eval(CLAIM, keys.length, ...keys, me, SLOT_TTL_MS, ...args)) as number[];
      return claimed.map((ok) => ok === 1);
    },

    stop() {
      stopped = true;
    },

    async leave() {
      await release([...held.keys()]);
      await redis.zrem(workersKey(prefix), me);
    },

    forget() {
      for (const id of [...held.keys()]) drop(id);
    },
  };
}
