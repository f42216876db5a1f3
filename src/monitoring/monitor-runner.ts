// The monitor runner: runs in every worker process and polls the monitored servers it holds a
// lease on. Everything another worker needs is in Redis or PostgreSQL (monitor-leases.ts):
// - the schedule (monitor-service.ts): a hash of server id → interval and phase; a server is due
//   at every t ≡ phase (mod interval), the same grid for every worker; a version bumped with
//   every write of it, so a sync (one round trip: heartbeat, live workers, version) re-reads the
//   hash only when it changed;
// - a lease per server, renewed every sync: the live workers rank each server by rendezvous
//   hashing; the first holds it, and a dead worker's leases expire and go to the others;
// - the last due time recorded per server, checked with the lease in one Lua script, so no due
//   time is recorded twice even while a lease changes hands;
// - the previous /proc counters, so the next worker's deltas go on.
// A held server has one SSH connection and one streaming channel (monitor-stream.ts): at each due
// time the runner asks the stream for a sample and writes the samples of many servers in one
// statement (recordSamples). Anything else (no stream yet, a failure, a server in backoff, a shell
// that cannot run the loop) goes through poll(), one server at a time, with the same rules.
// Connecting costs far more than sampling (the handshake, mostly on the server's side), so the
// worker ranked second on a server keeps a warm standby (its connection and an idle stream): a
// failover takes the server over without connecting. A worker ranked first that does not hold a
// server yet (it just joined) warms it the same way, and the holder hands it over only then.
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import type { AppContext } from '../context.js';
import { createSshPool } from '../core/ssh-pool.js';
import type { MonitorPollObserver } from '../feature.js';
import { createConnectPacer, type PacerTicket } from './connect-pacer.js';
import { CLAIM, leaseKey, nextDue, RELEASE, RENEW, rendezvous, slotKey, warmKey, workersKey, type Ranking } from './monitor-leases.js';
import {
  connectionSignature,
  createMonitorPoller,
  poolKeyOf,
  pollTimeoutMs,
  type PollResult,
  type Sampler,
  type SampleToRecord,
} from './monitor-poll.js';
import { openStream, type SampleStream, streamSampler } from './monitor-stream.js';
import { parseSchedule, sampleKey, sampleTtlMs, scheduleKey, scheduleVersionKey, type MonitorSchedule } from './monitor-service.js';
import { computeMetrics } from './proc-metrics.js';
import { recordPoll, trackRunner } from './monitor-metrics.js';

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
  /** Server ids this runner keeps a warm standby for (a connection and an idle stream). */
  standby(): number[];
  /** SSH connections open or being opened (held servers and standbys). */
  connections(): number;
  /** Hands the servers over and stops. */
  close(): Promise<void>;
  /** Tests: stops as a killed process would (leases are left to expire, connections drop). */
  abandon(): void;
}

const SLOT_TTL_MS = 3600_000;
const BATCH_MAX = 200;
/** Streamed samples wait this long for others to share their write (far below any interval). */
const BATCH_WAIT_MS = 200;
/** A standby that could not be opened is tried again after this long. */
const WARM_RETRY_MS = 30_000;
/** A standby may take this long to connect: no poll waits for it. */
const STANDBY_TIMEOUT_MS = 15_000;
/**
 * A connection no longer needed is closed after this long: a worker that looks dead for a moment
 * (a stalled event loop) would otherwise make the others drop and reopen their standbys.
 */
const LINGER_MS = 60_000;
/** A holder hands a server over without waiting for its new holder to be ready after this long. */
const HANDOVER_WAIT_MS = 120_000;

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
  // Connections live as long as the lease or standby: no idle sweep (a stream is never "used").
  const pool = createSshPool({ idleMs: 365 * 24 * 3600_000 });
  const poller = createMonitorPoller({ ...ctx, sshPool: pool }, observers, { pool });
  const streams = new Map<number, SampleStream>();
  const fallback = new Set<number>();
  const held = new Map<number, Held>();
  /** Servers seen with a free lease, since when. */
  const freeSince = new Map<number, number>();
  const rankingOf = rendezvous();
  const sampler: Sampler = opts.sampler ?? streamSampler(streams, fallback);
  let closed = false;
  let syncs = 0;
  type Slot = Parameters<NonNullable<MonitorRunnerOptions['onSlot']>>[0];
  /** A due time handled: counted for /metrics (late from `sampledAt`), and told to a benchmark. */
  const slotDone = (slot: Slot, sampledAt = slot.recordedAt) => {
    recordPoll(slot.outcome, sampledAt - slot.due);
    opts.onSlot?.(slot);
  };

  // --- connections: held servers and warm standbys -------------------------------------------
  /** Servers not held that this worker keeps (or opens) a connection and an idle stream for. */
  let standbys = new Set<number>();
  /** Servers this worker may have a connection to (held, standby, or being opened). */
  const connected = new Set<number>();
  const opening = new Map<number, { promise: Promise<SampleStream | null>; ticket: PacerTicket }>();
  const warmRetryAt = new Map<number, number>();
  /** Connected servers neither held nor standbys any more, since when (closed after LINGER_MS). */
  const unneededSince = new Map<number, number>();
  const kept = (id: number) => !closed && (held.has(id) || standbys.has(id));

  function disconnect(id: number) {
    streams.get(id)?.close();
    streams.delete(id);
    pool.discard(poolKeyOf(id));
    connected.delete(id);
  }

  // Connections are opened a few at a time, takes before standbys (connect-pacer.ts).
  const pacer = createConnectPacer({ start: 20, min: 4, max: connectsAtOnce, targetMs: 1000 });

  /**
   * The server's open stream, or one opened (once, however many ask); null: its shell cannot run
   * the loop. A take that finds a standby still waiting to open hurries it.
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
        if (!held.has(id)) disconnect(id); // a standby that failed is not warm
        throw err;
      })
      .finally(() => opening.delete(id));
    opening.set(id, { promise, ticket });
    return promise;
  }

  /** A standby is warm: its stream is open, or its connection is (a shell that cannot run the loop). */
  const isWarm = (id: number) => !opening.has(id) && (streams.get(id)?.closed === false || (fallback.has(id) && connected.has(id)));

  // --- due times -----------------------------------------------------------------------------
  function arm(h: Held) {
    if (h.timer) clearTimeout(h.timer);
    if (h.dropped || closed) return;
    const due = nextDue(h.schedule, Date.now());
    h.timer = setTimeout(() => pollDueTime(h, due), due - Date.now());
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

  /** Polls the server for one due time: its stream when warm (the sample joins a batch write), else poll(). */
  function pollDueTime(h: Held, due: number) {
    arm(h);
    if (h.busy || h.dropped || closed) return;
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
            // Dropped or stopping (its connections were closed under it): not the server's failure.
            if (h.dropped || closed || !(await claimOne(h.id, due))) return;
            const result = await poller.fail(h.id, err.message);
            slotDone({ serverId: h.id, due, recordedAt: Date.now(), outcome: result.outcome });
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
        (result) => slotDone({ serverId: h.id, due, recordedAt: Date.now(), outcome: result.outcome }),
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
      if (row?.outcome === 'ok' && row.signature !== item.signature) {
        streams.get(item.serverId)?.close();
        streams.delete(item.serverId);
        pool.discard(poolKeyOf(item.serverId));
      }
      slotDone({ serverId: item.serverId, due, recordedAt: now, outcome: row?.outcome ?? 'skipped' }, item.at.getTime());
    }
  }

  // --- leases --------------------------------------------------------------------------------
  /** Stops polling a server; its connection stays while it is a standby (the next sync decides). */
  function drop(id: number) {
    const h = held.get(id);
    if (!h) return;
    h.dropped = true;
    if (h.timer) clearTimeout(h.timer);
    held.delete(id);
  }

  function take(id: number, schedule: MonitorSchedule) {
    const h: Held = { id, schedule, timer: null, busy: false, dropped: false };
    held.set(id, h);
    connected.add(id);
    (opts.sampler ? Promise.resolve() : startStream(h))
      .catch((err) => ctx.log.debug({ err, root_server_id: id }, 'opening the monitoring stream failed; the due time will retry'))
      .finally(() => {
        if (h.dropped || closed) return;
        arm(h);
        // The due time that passed while connecting (a start_monitor, a take-over) is still taken
        // when it is recent; the slot check skips it if the previous holder recorded it.
        const last = nextDue(h.schedule, Date.now()) - h.schedule.every;
        if (Date.now() - last < h.schedule.every * 0.7) pollDueTime(h, last);
      });
  }

  /**
   * The stream of a server just taken (the standby's, else a new one) and its first counters: the
   * last recorded ones (any worker's), so the first delta spans about one interval; else a sample now.
   */
  async function startStream(h: Held) {
    let stream = await streamOf(h.id, h.schedule.every, true);
    if (!stream || h.dropped) return;
    const server = await poller.loadMonitored(h.id);
    if (server && connectionSignature(server) !== stream.signature) {
      // A standby opened before the address or credentials changed: connect with the new ones.
      disconnect(h.id);
      connected.add(h.id);
      stream = await streamOf(h.id, h.schedule.every, true);
      if (!stream || h.dropped) return;
    }
    stream.last = (await poller.previousSample(h.id)) ?? (await stream.request(pollTimeoutMs(h.schedule.every)));
  }

  async function release(ids: number[]) {
    if (ids.length === 0) return;
    for (const id of ids) drop(id);
    await ctx.redis.eval(RELEASE, ids.length, ...ids.map((id) => leaseKey(prefix, id)), me);
  }

  // The schedule as last read, and its version then (undefined: not read yet).
  let scheduled = new Map<number, MonitorSchedule>();
  let scheduleVersion: string | null | undefined;
  /** Held servers ranked to another worker, and since when (they wait for it to be warm). */
  const handingOver = new Map<number, number>();

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
    const ranking = rankingOf(live);

    // Renew what is held; what was lost (expired and taken) or is no longer monitored goes.
    const ids = [...held.keys()];
    if (ids.length > 0) {
      const renewed = (await ctx.redis.eval(RENEW, ids.length, ...ids.map((id) => leaseKey(prefix, id)), me, leaseMs)) as number[];
      ids.forEach((id, i) => {
        if (renewed[i] !== 1) drop(id);
      });
    }
    await release([...held.keys()].filter((id) => !scheduled.has(id)));
    for (const [id, h] of held) {
      const s = scheduled.get(id)!;
      if (s.every !== h.schedule.every || s.phase !== h.schedule.phase) {
        h.schedule = s;
        arm(h);
      }
    }
    await handOver(ranking);
    await takeFree(ranking);
    await keepWarm(ranking);
  }

  /** Releases what another live worker should hold, once it is warm (it takes it at its next sync). */
  async function handOver(ranking: (id: number) => Ranking) {
    const leaving = [...held.keys()].filter((id) => ranking(id).first !== me);
    const since = new Map(leaving.map((id) => [id, handingOver.get(id) ?? Date.now()]));
    handingOver.clear();
    if (leaving.length === 0) return;
    const warm = await ctx.redis.mget(...leaving.map((id) => warmKey(prefix, id)));
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
    const owners = await ctx.redis.mget(...wanted.map((id) => leaseKey(prefix, id)));
    const now = Date.now();
    const tryTake: number[] = [];
    wanted.forEach((id, i) => {
      if (owners[i] !== null) freeSince.delete(id);
      else if (ranking(id).first === me || now - (freeSince.get(id) ?? now) >= leaseMs) tryTake.push(id);
      else if (!freeSince.has(id)) freeSince.set(id, now);
    });
    if (tryTake.length === 0) return;
    const pipe = ctx.redis.pipeline();
    for (const id of tryTake) pipe.set(leaseKey(prefix, id), me, 'PX', leaseMs, 'NX');
    const results = (await pipe.exec()) ?? [];
    const won = tryTake.filter((id, i) => {
      freeSince.delete(id);
      return results[i]?.[1] === 'OK';
    });
    if (closed) return release(won); // stopping meanwhile: the others take them at once
    for (const id of won) take(id, scheduled.get(id)!);
  }

  /**
   * Keeps warm standbys for the servers this worker ranks first (not held yet) or second on, closes
   * the connections it no longer needs, and tells the holders which servers it is ready to take.
   */
  async function keepWarm(ranking: (id: number) => Ranking) {
    const first: number[] = [];
    const second: number[] = [];
    for (const id of scheduled.keys()) {
      if (held.has(id)) continue;
      const r = ranking(id);
      if (r.first === me) first.push(id);
      else if (r.second === me) second.push(id);
    }
    standbys = new Set([...first, ...second]);
    const now = Date.now();
    for (const id of [...connected]) {
      if (kept(id)) unneededSince.delete(id);
      else if (!scheduled.has(id) || now - (unneededSince.get(id) ?? now) >= LINGER_MS) {
        disconnect(id);
        unneededSince.delete(id);
      } else if (!unneededSince.has(id)) unneededSince.set(id, now);
    }
    for (const id of [...warmRetryAt.keys()]) if (!standbys.has(id)) warmRetryAt.delete(id);
    if (opts.sampler) {
      // Tests that sample without streams: nothing to warm, ready at once.
      await announceReady(first);
      return;
    }
    for (const id of standbys) {
      if (opening.has(id) || isWarm(id) || (warmRetryAt.get(id) ?? 0) > now) continue;
      streamOf(id, scheduled.get(id)!.every, false).catch((err) => {
        warmRetryAt.set(id, Date.now() + WARM_RETRY_MS);
        ctx.log.debug({ err, root_server_id: id }, 'opening a monitoring standby failed; tried again later');
      });
    }
    await announceReady(first.filter(isWarm));
  }

  async function announceReady(ids: number[]) {
    if (ids.length === 0) return;
    const pipe = ctx.redis.pipeline();
    for (const id of ids) pipe.set(warmKey(prefix, id), me, 'PX', leaseMs);
    await pipe.exec();
  }

  let syncing: Promise<void> = Promise.resolve();
  const loop = setInterval(() => {
    syncing = syncing.then(sync).catch((err) => ctx.log.error({ err }, 'monitor runner sync failed'));
  }, syncMs);
  syncing = sync().catch((err) => ctx.log.error({ err }, 'monitor runner sync failed'));

  function closeConnections() {
    standbys = new Set();
    for (const id of [...connected]) disconnect(id);
    pool.close();
  }

  const runner: MonitorRunner = {
    workerId: me,
    held: () => [...held.keys()],
    standby: () => [...standbys].filter(isWarm),
    connections: () => pool.size(),
    async close() {
      untrack();
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
      closeConnections();
    },
    abandon() {
      untrack();
      closed = true;
      clearInterval(loop);
      if (batchTimer) clearTimeout(batchTimer);
      batch = [];
      for (const id of [...held.keys()]) drop(id);
      closeConnections();
    },
  };
  const untrack = trackRunner(runner);
  return runner;
}
