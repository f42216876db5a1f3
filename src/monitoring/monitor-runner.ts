// The monitor runner: runs in every worker process and polls the monitored servers it holds a
// lease on. Everything another worker needs is in Redis or PostgreSQL:
// - the schedule (monitor-service.ts): a hash of server id → interval and phase; a server is due
//   at every t ≡ phase (mod interval), the same grid for every worker; a version bumped with
//   every write of it, so a sync (one round trip: heartbeat, live workers, version) re-reads the
//   hash only when it changed;
// - a lease per server (`…:monitor:lease:<id>` = worker id, expiring after LEASE_MS, renewed every
//   sync): the workers alive (a heartbeat sorted set) split the servers by rendezvous hashing, and
//   a dead worker's leases expire and go to the others;
// - the last due time recorded per server (`…:monitor:slot:<id>`): a sample or failure is
//   recorded only if its due time is newer, checked together with the lease in one Lua script, so
//   no due time is recorded twice even while a lease changes hands;
// - the previous /proc counters (`…:monitor:sample:<id>`), so the next worker's deltas go on.
// A held server has one SSH connection and one streaming channel (monitor-stream.ts): at each due
// time the runner asks the stream for a sample and writes the samples of many servers in one
// statement (recordSamples). Anything else (no stream yet, a failure, a server in backoff, a shell
// that cannot run the loop) goes through poll(), one server at a time, with the same rules.
import { hostname } from 'node:os';
import { createHash, randomBytes } from 'node:crypto';
import type { AppContext } from '../context.js';
import { createSshPool } from '../core/ssh-pool.js';
import type { MonitorPollObserver } from '../feature.js';
import { createMonitorPoller, poolKeyOf, pollTimeoutMs, type PollResult, type Sampler, type SampleToRecord } from './monitor-poll.js';
import { openStream, type SampleStream, streamSampler } from './monitor-stream.js';
import { parseSchedule, sampleKey, sampleTtlMs, scheduleKey, scheduleVersionKey, type MonitorSchedule } from './monitor-service.js';
import { computeMetrics } from './proc-metrics.js';

export interface MonitorRunnerOptions {
  /** How often leases are renewed and the schedule re-read (default 1 s). */
  syncMs?: number;
  /** A lease not renewed for this long is free (default 3 s): most of the failover time. */
  leaseMs?: number;
  /** SSH connections opened at once (warm-up, take-over), so handshakes are spread out. */
  connectsAtOnce?: number;
  /** Tests: a sampler used instead of the stream (e.g. to stand for a shell that cannot run the loop). */
  sampler?: Sampler;
  /** Benchmarks: told every recorded (or skipped) due time. */
  onSlot?: (slot: { serverId: number; due: number; recordedAt: number; outcome: PollResult['outcome'] }) => void;
}

export interface MonitorRunner {
  readonly workerId: string;
  /** Server ids this runner holds a lease on. */
  held(): number[];
  /** Hands the servers over and stops. */
  close(): Promise<void>;
  /** Tests: stops as a killed process would (leases are left to expire, connections drop). */
  abandon(): void;
}

const SLOT_TTL_MS = 3600_000;
const BATCH_MAX = 200;
/** Streamed samples wait this long for others to share their write (far below any interval). */
const BATCH_WAIT_MS = 200;

export function leaseKey(prefix: string, id: number) {
  return `${prefix}:monitor:lease:${id}`;
}
export function slotKey(prefix: string, id: number) {
  return `${prefix}:monitor:slot:${id}`;
}
function workersKey(prefix: string) {
  return `${prefix}:monitor:workers`;
}

// KEYS: lease, slot, sample per item; ARGV: worker, slot ttl, then due, sample json ('' = keep), sample ttl per item.
const CLAIM = `
local out = {}
for i = 1, #KEYS / 3 do
  local ok = 0
  if redis.call('GET', KEYS[3*i-2]) == ARGV[1] then
    local due = tonumber(ARGV[3*i])
    if (tonumber(redis.call('GET', KEYS[3*i-1]) or '0') or 0) < due then
      redis.call('SET', KEYS[3*i-1], ARGV[3*i], 'PX', ARGV[2])
      if ARGV[3*i+1] ~= '' then redis.call('SET', KEYS[3*i], ARGV[3*i+1], 'PX', ARGV[3*i+2]) end
      ok = 1
    end
  end
  out[i] = ok
end
return out`;

const RENEW = `
local out = {}
for i, k in ipairs(KEYS) do
  if redis.call('GET', k) == ARGV[1] then redis.call('PEXPIRE', k, ARGV[2]); out[i] = 1 else out[i] = 0 end
end
return out`;

const RELEASE = `
for _, k in ipairs(KEYS) do if redis.call('GET', k) == ARGV[1] then redis.call('DEL', k) end end
return 0`;

/** The rendezvous weight of a (worker, server) pair: a well-mixed hash (worker ids differ in few characters). */
function weight(worker: string, id: number): number {
  return createHash('md5').update(`${id}/${worker}`).digest().readUInt32BE(0);
}

/**
 * Which live worker should hold each server (rendezvous hashing), cached while the live set stays
 * the same: given the live set (once per sync), answers the chooser for that set.
 */
function rendezvous() {
  let liveKey = '';
  const cache = new Map<number, string | undefined>();
  return (live: string[]) => {
    const key = live.join(' ');
    if (key !== liveKey) {
      liveKey = key;
      cache.clear();
    }
    return (id: number) => preferred(id, live);
  };
  function preferred(id: number, live: string[]): string | undefined {
    if (cache.has(id)) return cache.get(id);
    let best: string | undefined;
    let bestWeight = -1;
    for (const w of live) {
      const x = weight(w, id);
      if (x > bestWeight) [best, bestWeight] = [w, x];
    }
    cache.set(id, best);
    return best;
  }
}

/** The first due time after `now` of a schedule. */
export function nextDue({ every, phase }: MonitorSchedule, now: number): number {
  return Math.floor((now - phase) / every) * every + phase + every;
}

interface Held {
  id: number;
  schedule: MonitorSchedule;
  timer: NodeJS.Timeout | null;
  /** A due time is being polled (a new one is not started on top). */
  busy: boolean;
  dropped: boolean;
}

export async function startMonitorRunner(
  ctx: Pick<AppContext, 'db' | 'box' | 'redis' | 'queues' | 'log' | 'config' | 'sshPool'>,
  observers: readonly MonitorPollObserver[] = [],
  opts: MonitorRunnerOptions = {},
): Promise<MonitorRunner> {
  const syncMs = opts.syncMs ?? 1000;
  const leaseMs = opts.leaseMs ?? 3000;
  const connectsAtOnce = opts.connectsAtOnce ?? ctx.config.MONITOR_CONCURRENCY;
  const prefix = ctx.queues.prefix;
  const me = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  // Connections live as long as the lease: no idle sweep (a streaming connection is never "used").
  const pool = createSshPool({ idleMs: 365 * 24 * 3600_000 });
  const poller = createMonitorPoller({ ...ctx, sshPool: pool }, observers, { pool });
  const streams = new Map<number, SampleStream>();
  const fallback = new Set<number>();
  const held = new Map<number, Held>();
  const freeSeen = new Set<number>();
  const preferredOf = rendezvous();
  const sampler: Sampler = opts.sampler ?? streamSampler(streams, fallback);
  let closed = false;
  let syncs = 0;

  // --- connecting, a few at a time -----------------------------------------------------------
  let connecting = 0;
  const waitingToConnect: (() => void)[] = [];
  async function limited<T>(fn: () => Promise<T>): Promise<T> {
    if (connecting >= connectsAtOnce) await new Promise<void>((r) => waitingToConnect.push(r));
    connecting++;
    try {
      return await fn();
    } finally {
      connecting--;
      waitingToConnect.shift()?.();
    }
  }

  /** Connects and starts the stream ahead of the first due time (warm-up, take-over). */
  async function open(h: Held) {
    if (opts.sampler) return;
    const server = await poller.loadMonitored(h.id);
    if (!server || h.dropped) return;
    const timeoutMs = pollTimeoutMs(h.schedule.every);
    const stream = await openStream(server, await poller.connect(server, timeoutMs), timeoutMs, fallback);
    if (!stream) return; // its shell cannot run the loop: the per-poll command
    await stream.request(timeoutMs); // the first counters: the first due time needs one sample only
    if (h.dropped) return stream.close();
    streams.set(h.id, stream);
  }

  // --- due times -----------------------------------------------------------------------------
  function arm(h: Held) {
    if (h.timer) clearTimeout(h.timer);
    if (h.dropped || closed) return;
    const due = nextDue(h.schedule, Date.now());
    h.timer = setTimeout(() => fire(h, due), due - Date.now());
  }

  /** Claims one due time of a server, storing its new counters with it when given (else keeping them). */
  async function claimOne(id: number, due: number, sampleJson = '', ttlMs = 0): Promise<boolean> {
    const [ok] = (await ctx.redis.eval(
      CLAIM,
      3,
      leaseKey(prefix, id),
      slotKey(prefix, id),
      sampleKey(prefix, id),
      me,
      SLOT_TTL_MS,
      due,
      sampleJson,
      ttlMs,
    )) as number[];
    return ok === 1;
  }

  function fire(h: Held, due: number) {
    arm(h);
    if (h.busy || h.dropped) return;
    h.busy = true;
    const stream = streams.get(h.id);
    const prev = stream?.last;
    if (stream && !stream.closed && prev && !fallback.has(h.id) && !opts.sampler) {
      stream.request(pollTimeoutMs(h.schedule.every)).then(
        (sample) => {
          h.busy = false;
          queueRecord({ serverId: h.id, metrics: computeMetrics(prev, sample), signature: stream.signature, at: new Date() }, due, sample);
        },
        async (err: Error) => {
          streams.delete(h.id);
          stream.close();
          try {
            if (!(await claimOne(h.id, due))) return;
            const result = await poller.fail(h.id, err.message);
            opts.onSlot?.({ serverId: h.id, due, recordedAt: Date.now(), outcome: result.outcome });
          } catch (e) {
            ctx.log.error({ err: e, root_server_id: h.id }, 'recording a monitoring failure failed');
          } finally {
            h.busy = false;
          }
        },
      );
      return;
    }
    poller
      .poll(h.id, { sampler, claim: (sampleJson, ttlMs) => claimOne(h.id, due, sampleJson, ttlMs) })
      .then(
        (result) => opts.onSlot?.({ serverId: h.id, due, recordedAt: Date.now(), outcome: result.outcome }),
        (err) => ctx.log.error({ err, root_server_id: h.id }, 'monitoring poll failed'),
      )
      .finally(() => {
        h.busy = false;
      });
  }

  // --- batched writes of streamed samples ----------------------------------------------------
  let batch: { item: SampleToRecord; due: number; sample: unknown }[] = [];
  let batchTimer: NodeJS.Timeout | null = null;
  const flushing = new Set<Promise<void>>();

  function queueRecord(item: SampleToRecord, due: number, sample: unknown) {
    batch.push({ item, due, sample });
    if (batch.length >= BATCH_MAX) flush();
    else batchTimer ??= setTimeout(flush, BATCH_WAIT_MS);
  }

  function flush() {
    if (batchTimer) clearTimeout(batchTimer);
    batchTimer = null;
    const items = batch;
    batch = [];
    if (items.length === 0) return;
    const p = writeBatch(items)
      .catch((err) => ctx.log.error({ err, samples: items.length }, 'recording monitoring samples failed'))
      .finally(() => flushing.delete(p));
    flushing.add(p);
  }

  async function writeBatch(items: { item: SampleToRecord; due: number; sample: unknown }[]) {
    const keys: string[] = [];
    const args: (string | number)[] = [me, SLOT_TTL_MS];
    for (const { item, due, sample } of items) {
      keys.push(leaseKey(prefix, item.serverId), slotKey(prefix, item.serverId), sampleKey(prefix, item.serverId));
      const every = held.get(item.serverId)?.schedule.every ?? 60_000;
      args.push(due, JSON.stringify(sample), sampleTtlMs(every));
    }
    const claimed = (await ctx.redis.eval(CLAIM, keys.length, ...keys, ...args)) as number[];
    const mine = items.filter((_, i) => claimed[i] === 1);
    const written = await poller.recordSamples(mine.map((m) => m.item));
    const now = Date.now();
    for (const { item, due } of mine) {
      const row = written.get(item.serverId);
      // The address or credentials changed: the next due time connects again with the new ones.
      if (row && row.signature !== item.signature) {
        streams.get(item.serverId)?.close();
        streams.delete(item.serverId);
        pool.discard(poolKeyOf(item.serverId));
      }
      opts.onSlot?.({ serverId: item.serverId, due, recordedAt: now, outcome: row ? 'ok' : 'skipped' });
    }
  }

  // --- leases --------------------------------------------------------------------------------
  function drop(id: number) {
    const h = held.get(id);
    if (!h) return;
    h.dropped = true;
    if (h.timer) clearTimeout(h.timer);
    held.delete(id);
    streams.get(id)?.close();
    streams.delete(id);
    pool.discard(poolKeyOf(id));
  }

  function take(id: number, schedule: MonitorSchedule) {
    const h: Held = { id, schedule, timer: null, busy: false, dropped: false };
    held.set(id, h);
    limited(() => open(h))
      .catch((err) => ctx.log.debug({ err, root_server_id: id }, 'opening the monitoring stream failed; the due time will retry'))
      .finally(() => {
        if (h.dropped || closed) return;
        arm(h);
        // The due time that passed while connecting (a start_monitor, a take-over) is still taken
        // when it is recent; the slot check skips it if the previous holder recorded it.
        const last = nextDue(h.schedule, Date.now()) - h.schedule.every;
        if (Date.now() - last < h.schedule.every * 0.7) fire(h, last);
      });
  }

  async function release(ids: number[]) {
    if (ids.length === 0) return;
    for (const id of ids) drop(id);
    await ctx.redis.eval(RELEASE, ids.length, ...ids.map((id) => leaseKey(prefix, id)), me);
  }

  // The schedule as last read, and its version then (undefined: not read yet).
  let scheduled = new Map<number, MonitorSchedule>();
  let scheduleVersion: string | null | undefined;

  async function sync() {
    const now = Date.now();
    const wk = workersKey(prefix);
    // One round trip: the heartbeat, the live workers and the schedule's version.
    const read = ctx.redis.pipeline().zadd(wk, now, me);
    if (syncs++ % 30 === 0) read.zremrangebyscore(wk, '-inf', now - 60_000);
    read.zrangebyscore(wk, now - leaseMs, '+inf').get(scheduleVersionKey(prefix));
    const replies = (await read.exec()) ?? [];
    for (const [err] of replies) if (err) throw err;
    const live = (replies.at(-2)![1] as string[]).sort();
    const version = replies.at(-1)![1] as string | null;
    if (syncs === 1) return; // let the workers starting with this one be seen before taking servers
    // The schedule is read again only when it changed (or its version is gone: Redis lost it).
    if (version === null || version !== scheduleVersion) {
      scheduled = new Map(Object.entries(await ctx.redis.hgetall(scheduleKey(prefix))).map(([id, v]) => [Number(id), parseSchedule(v)]));
      scheduleVersion = version;
    }
    const preferred = preferredOf(live);

    // Renew what is held; what was lost (expired and taken) or is no longer monitored goes.
    const ids = [...held.keys()];
    if (ids.length > 0) {
      const renewed = (await ctx.redis.eval(RENEW, ids.length, ...ids.map((id) => leaseKey(prefix, id)), me, leaseMs)) as number[];
      ids.forEach((id, i) => {
        if (renewed[i] !== 1) drop(id);
      });
    }
    const unscheduled = [...held.keys()].filter((id) => !scheduled.has(id));
    await release(unscheduled);
    for (const [id, h] of held) {
      const s = scheduled.get(id)!;
      if (s.every !== h.schedule.every || s.phase !== h.schedule.phase) {
        h.schedule = s;
        arm(h);
      }
    }

    // Hand over what another live worker should have (it takes it at its next sync).
    await release([...held.keys()].filter((id) => preferred(id) !== me));

    // Take free leases: our share at once, anyone's when it stayed free for two syncs.
    const wanted = [...scheduled.keys()].filter((id) => !held.has(id));
    if (wanted.length === 0) return;
    const owners = await ctx.redis.mget(...wanted.map((id) => leaseKey(prefix, id)));
    const tryTake: number[] = [];
    wanted.forEach((id, i) => {
      if (owners[i] !== null) freeSeen.delete(id);
      else if (preferred(id) === me || freeSeen.has(id)) tryTake.push(id);
      else freeSeen.add(id);
    });
    if (tryTake.length === 0) return;
    const pipe = ctx.redis.pipeline();
    for (const id of tryTake) pipe.set(leaseKey(prefix, id), me, 'PX', leaseMs, 'NX');
    const results = (await pipe.exec()) ?? [];
    tryTake.forEach((id, i) => {
      freeSeen.delete(id);
      if (results[i]?.[1] === 'OK' && !closed) take(id, scheduled.get(id)!);
    });
  }

  let syncing: Promise<void> = Promise.resolve();
  const loop = setInterval(() => {
    syncing = syncing.then(sync).catch((err) => ctx.log.error({ err }, 'monitor runner sync failed'));
  }, syncMs);
  syncing = sync().catch((err) => ctx.log.error({ err }, 'monitor runner sync failed'));

  return {
    workerId: me,
    held: () => [...held.keys()],
    async close() {
      closed = true;
      clearInterval(loop);
      await syncing;
      const ids = [...held.keys()];
      // Let running polls and writes finish, then hand the servers over at once (no lease to wait out).
      for (let i = 0; i < 100 && [...held.values()].some((h) => h.busy); i++) await new Promise((r) => setTimeout(r, 50));
      flush();
      await Promise.all(flushing);
      await release(ids);
      await ctx.redis.zrem(workersKey(prefix), me);
      pool.close();
    },
    abandon() {
      closed = true;
      clearInterval(loop);
      if (batchTimer) clearTimeout(batchTimer);
      batch = [];
      for (const id of [...held.keys()]) drop(id);
      pool.close();
    },
  };
}
