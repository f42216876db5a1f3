// The monitor runner: runs in every worker process and polls the monitored servers it holds a
// lease on. Everything another worker needs is in Redis or PostgreSQL, so the workers split the
// fleet between them and take over from one that dies. The runner composes four parts:
// - the lease keeper (lease-keeper.ts): which servers this worker holds, synced every second;
// - the connection keeper (connection-keeper.ts): one SSH connection and one streaming channel
//   per held server, and warm standbys of the servers it would take over;
// - the due times (due-times.ts): one timer per held server on its interval's grid;
// - the batch writer (batch-writer.ts): streamed samples written many servers at once.
// At each due time the runner asks the server's stream for a sample and hands it to the batch
// writer, which claims the due times and writes the samples of many servers in one statement
// (recordSamples). Anything else (no stream yet, a failure, a server in backoff, a shell that
// cannot run the loop) goes through poll(), one server at a time, with the same rules.
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { AppContext } from '../context.js';
import { createSshPool } from '../core/ssh-pool.js';
import type { MonitorPollObserver } from '../feature.js';
import { createBatchWriter } from './batch-writer.js';
import { createConnectionKeeper } from './connection-keeper.js';
import { createDueTimes } from './due-times.js';
import { createLeaseKeeper } from './lease-keeper.js';
import { recordPoll, trackRunner } from './monitor-metrics.js';
import { createMonitorPoller, type PollResult, pollTimeoutMs, type SampleToRecord } from './monitor-poll.js';
import { type MonitorSchedule, sampleTtlMs } from './monitor-service.js';
import { computeMetrics, type ProcSample } from './proc-metrics.js';

/** A due time handled: recorded (ok or failed), or skipped (recorded by another worker, not monitored, backing off). */
export interface HandledDueTime {
  serverId: number;
  due: number;
  outcome: PollResult['outcome'];
  /** When the sample was read (a streamed one), else when the poll was recorded. */
  sampledAt: number;
  recordedAt: number;
}

export interface MonitorRunnerOptions {
  /** Told every recorded poll (the features' onMonitorPoll). */
  observers?: readonly MonitorPollObserver[];
  /** How often leases are renewed and the schedule re-read (default 1 s). */
  syncMs?: number;
  /** A lease not renewed for this long is free (default 3 s): most of the failover time. */
  leaseMs?: number;
  /** SSH connections opened at once at most (default MONITOR_CONCURRENCY). */
  connectsAtOnce?: number;
  /** Told every due time handled (default: counted in this process's series, monitor-metrics.ts). */
  dueTimeHandled?: (d: HandledDueTime) => void;
  /** Aborted: the runner stops where it stands, as at the end of its process: nothing is handed over (the leases expire), its connections drop. */
  signal?: AbortSignal;
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
}

/** A streamed sample waiting for its batch write, with its due time and its counters (the next delta's base). */
interface Queued {
  item: SampleToRecord;
  due: number;
  sample: ProcSample;
}

/** Running polls may take this long to finish when the runner closes. */
const CLOSE_WAIT_MS = 5000;

const countDueTime = (d: HandledDueTime) => recordPoll(d.outcome, d.sampledAt - d.due);

export async function startMonitorRunner(
  ctx: Pick<AppContext, 'db' | 'secretBox' | 'redis' | 'queues' | 'log' | 'config'>,
  opts: MonitorRunnerOptions = {},
): Promise<MonitorRunner> {
  const handled = opts.dueTimeHandled ?? countDueTime;
  const workerId = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  // The runner's own connections: they live as long as its leases and standbys, and end with it.
  const pool = createSshPool();
  const poller = createMonitorPoller(ctx, { pool, observers: opts.observers });
  let closed = false;

  const leases = createLeaseKeeper({
    redis: ctx.redis,
    prefix: ctx.queues.prefix,
    workerId,
    leaseMs: opts.leaseMs ?? 3000,
    take,
    drop: (id) => dueTimes.remove(id),
    reschedule: (id, schedule) => dueTimes.reschedule(id, schedule),
    keepWarm: (standbys, scheduled) => connections.keepWarm(standbys, scheduled),
    isWarm: (id) => connections.isWarm(id),
  });
  const connections = createConnectionKeeper({
    pool,
    poller,
    held: (id) => !closed && leases.holds(id),
    connectsAtOnce: opts.connectsAtOnce ?? ctx.config.MONITOR_CONCURRENCY,
    log: ctx.log,
  });
  const dueTimes = createDueTimes({
    run: pollDueTime,
    failed: (err, id) => ctx.log.error({ err, root_server_id: id }, 'monitoring poll failed'),
  });
  const batch = createBatchWriter<Queued>({
    write: writeBatch,
    failed: (err, items) => ctx.log.error({ err, samples: items.length }, 'recording monitoring samples failed'),
  });

  /** A server just taken: its stream readied ahead of its due times (a failure is retried by the due time). */
  function take(id: number, schedule: MonitorSchedule) {
    connections
      .prepare(id, schedule.every)
      .catch((err) => ctx.log.debug({ err, root_server_id: id }, 'opening the monitoring stream failed; the due time will retry'))
      .finally(() => {
        const current = leases.scheduleOf(id); // still held, perhaps rescheduled meanwhile
        if (current && !closed) dueTimes.add(id, current);
      });
  }

  const claimOne = async (id: number, due: number, sample?: string, sampleTtl?: number) =>
    (await leases.claim([{ id, due, sample, sampleTtlMs: sampleTtl }]))[0]!;

  /** A due time recorded (or skipped) on its own, not in a batch: no sample time apart from the record's. */
  function handledNow(id: number, due: number, outcome: PollResult['outcome']) {
    const now = Date.now();
    handled({ serverId: id, due, outcome, sampledAt: now, recordedAt: now });
  }

  /** One due time of a held server: a streamed sample (recorded with others by the batch writer), else poll(). */
  async function pollDueTime(id: number, due: number, every: number) {
    const stream = connections.readyStream(id);
    if (!stream) {
      const result = await poller.poll(id, {
        sampler: connections.sampler,
        claim: (sample, ttlMs) => claimOne(id, due, sample, ttlMs),
      });
      return handledNow(id, due, result.outcome);
    }
    const prev = stream.last!;
    let sample: ProcSample;
    try {
      sample = await stream.request(pollTimeoutMs(every));
    } catch (err) {
      connections.dropStream(id, stream);
      // Dropped or stopping (its connections were closed under it): not the server's failure.
      if (closed || !leases.holds(id) || !(await claimOne(id, due))) return;
      const result = await poller.fail(id, (err as Error).message);
      return handledNow(id, due, result.outcome);
    }
    const item = { serverId: id, metrics: computeMetrics(prev, sample), signature: stream.signature, at: new Date() };
    batch.add({ item, due, sample });
  }

  /** Claims the due times of a batch (storing each server's counters), writes those claimed, and tells who changed address. */
  async function writeBatch(items: Queued[]) {
    const claimed = await leases.claim(
      items.map(({ item, due, sample }) => ({
        id: item.serverId,
        due,
        sample: JSON.stringify(sample),
        sampleTtlMs: sampleTtlMs(leases.scheduleOf(item.serverId)?.every ?? 60_000),
      })),
    );
    const mine = items.filter((_, i) => claimed[i]);
    const written = await poller.recordSamples(mine.map((m) => m.item));
    const now = Date.now();
    for (const { item, due } of mine) {
      const row = written.get(item.serverId);
      // The address or credentials changed: the next due time connects again with the new ones.
      if (row?.outcome === 'ok' && row.signature !== item.signature) connections.reconnect(item.serverId);
      handled({ serverId: item.serverId, due, outcome: row?.outcome ?? 'skipped', sampledAt: item.at.getTime(), recordedAt: now });
    }
  }

  const syncFailed = (err: unknown) => ctx.log.error({ err }, 'monitor runner sync failed');
  let syncing: Promise<void> = leases.sync().catch(syncFailed);
  const loop = setInterval(() => {
    syncing = syncing.then(() => leases.sync()).catch(syncFailed);
  }, opts.syncMs ?? 1000);

  /** Stops syncing and starting due times. */
  function stop() {
    untrack();
    closed = true;
    leases.stop();
    clearInterval(loop);
    dueTimes.clear();
  }

  function closeConnections() {
    connections.close();
    pool.close();
  }

  const runner: MonitorRunner = {
    workerId,
    held: () => leases.held(),
    standby: () => connections.standbys(),
    connections: () => pool.size(),
    async close() {
      if (closed) return;
      stop();
      await syncing;
      // Let running polls and writes finish, then hand the servers over at once (no lease to wait out).
      await dueTimes.settled(CLOSE_WAIT_MS);
      await batch.close();
      await leases.leave();
      closeConnections();
    },
  };
  const untrack = trackRunner(runner);
  opts.signal?.addEventListener('abort', () => {
    if (closed) return;
    stop();
    batch.drop();
    leases.forget();
    closeConnections();
  });
  return runner;
}
