// One monitoring poll of one root server. The SSH connection is reused between polls (an SSH
// pool), the previous /proc counters are kept in Redis (so any worker can take the next poll), and
// the row, the state and the failure count are written in one statement. How the sample is read is
// the caller's choice (a Sampler): one exec channel per poll (execSampler, the per-poll command), or a
// long-lived streaming channel (monitor-stream.ts). recordSamples() writes many streamed samples
// at once with the same rules.
// server_state: online / warning after a good poll, offline after 3 failures in a row;
// every change is posted to the server's chatter. An offline server is retried with a growing
// delay (interval × 2^n, at most 5 minutes) instead of at every interval. Every recorded poll is
// then told to the observers (alerts), exactly once, a batch write's polls in one call; an
// observer's failure is logged, never the poll's.
import { createHash } from 'node:crypto';
import type { AppContext } from '../context.js';
import {
  checkedResult,
  connectRootServer,
  intervalMs,
  METRIC_COLUMN_LIST,
  METRIC_COLUMNS,
  METRIC_NAMES,
  type Metrics,
} from '../servers/index.js';
import { postMessage } from '../core/chatter.js';
import { isBadValueError } from '../core/db.js';
import type { SshConnection } from '../core/ssh.js';
import type { SshPool } from '../core/ssh-pool.js';
import type { MonitorPollEvent, MonitorPollObserver } from '../feature.js';
import { Prisma, type RootServer } from '../generated/prisma/client.js';
import { computeMetrics, parseSamples, SAMPLE_COMMAND, serverStateOf, TWO_SAMPLES_COMMAND, type ProcSample } from './proc-metrics.js';
import { MONITORED, MONITORED_SQL, sampleKey, sampleTtlMs } from './monitor-service.js';

const OFFLINE_AFTER_FAILURES = 3;
const MAX_BACKOFF_MS = 5 * 60_000;
const KEEPALIVE_MS = 60_000;

export type PollResult =
  | { outcome: 'ok'; server_state: 'online' | 'warning'; metrics: Metrics }
  | { outcome: 'failed'; server_state: string; failures: number; error: string }
  | { outcome: 'skipped'; reason: string };

/**
 * Reads the server's sample(s) over `conn` before `deadline`: one sample when the previous one is
 * known, else two a second apart (the last is the current one).
 */
export type Sampler = (server: RootServer, conn: SshConnection, prev: ProcSample | null, deadline: number) => Promise<ProcSample[]>;

/** The per-poll command: one exec channel running the sampling command (the fallback of the stream). */
export const execSampler: Sampler = async (_server, conn, prev, deadline) => {
  const timeoutMs = Math.max(1000, deadline - Date.now());
  const res = await conn.exec(prev ? SAMPLE_COMMAND : TWO_SAMPLES_COMMAND, { sudo: false, timeoutMs, maxOutputBytes: 256 * 1024 });
  if (res.timedOut) throw new Error(`The metrics command did not answer within ${Math.round(timeoutMs / 1000)} s`);
  // Unaudited (a poll every interval) and without secrets in its output: nothing to mask.
  return parseSamples(checkedResult({ mask: (text) => text }, 'The metrics command failed', res, timeoutMs).stdout);
};

export interface PollOptions {
  /** How the sample is read (default: execSampler). */
  sampler?: Sampler;
  /**
   * Called once the outcome is known, before anything is recorded: false = another worker already
   * recorded this due time (or took the server), and nothing is written. After a good poll it is
   * given the new counters to store with the claim (JSON, kept for `ttlMs`), in its round trip;
   * without a claim the poll stores them itself.
   */
  claim?: (sampleJson?: string, ttlMs?: number) => Promise<boolean>;
}

/** A streamed sample to record (recordSamples). */
export interface SampleToRecord {
  serverId: number;
  metrics: Metrics;
  /** The connection signature the sample was read with (see connectionSignature). */
  signature: string;
  /** When the sample was read: the row's created_at (a write that waits does not move it). */
  at: Date;
}

/** What became of a streamed sample: written (with the server's connection signature now), or a failed poll. */
export type SampleRecorded = { outcome: 'ok'; signature: string } | { outcome: 'failed'; error: string };

/** The failure of a sample the database refused, in its words (PostgreSQL's message when the driver gives it). */
function refusedSample(err: unknown): string {
  const cause = (err as { meta?: { driverAdapterError?: { cause?: { originalMessage?: unknown } } } }).meta?.driverAdapterError?.cause;
  const text =
    typeof cause?.originalMessage === 'string' ? cause.originalMessage : ((err as Error).message.trim().split('\n').at(-1) ?? '');
  return `The sample could not be recorded: ${text.slice(0, 300)}`;
}

/** A poll must end before the next one is due: 80 % of the interval, between 4 and 30 seconds. */
export function pollTimeoutMs(interval: number): number {
  return Math.min(30_000, Math.max(4_000, Math.floor(interval * 0.8)));
}

/**
 * Identifies what a connection was opened with; any change opens a new one. Computed the same way
 * in SQL by recordSamples(), so a batch write can tell that a server's address or credentials changed.
 */
export function connectionSignature(s: Pick<RootServer, 'ip' | 'port' | 'username' | 'password' | 'key' | 'host_key'>): string {
  const parts = [s.ip, String(s.port), s.username, s.password, s.key, s.host_key].filter((p): p is string => p !== null);
  return createHash('md5').update(parts.join('|')).digest('hex');
}

export function poolKeyOf(serverId: number): string {
  return `root-server:${serverId}`;
}

export interface MonitorPollerOptions {
  /** The pool the poller's connections are kept in (their owner closes it). */
  pool: SshPool;
  /** Told every recorded poll (the features' onMonitorPoll). */
  observers?: readonly MonitorPollObserver[];
}

export function createMonitorPoller(
  ctx: Pick<AppContext, 'db' | 'secretBox' | 'redis' | 'queues' | 'log'>,
  { pool, observers = [] }: MonitorPollerOptions,
) {
  const prefix = ctx.queues.prefix;

  async function tellObservers(events: readonly MonitorPollEvent[]) {
    if (events.length === 0) return;
    for (const observe of observers) {
      try {
        await observe(events);
      } catch (err) {
        ctx.log.error({ err, root_server_ids: events.map((e) => e.root_server_id) }, 'a monitoring poll observer failed');
      }
    }
  }

  async function stateChanged(server: RootServer, to: string, why: string) {
    await postMessage(ctx.db, {
      model_name: 'svc.root.server',
      rec_id: server.id,
      body: why ? `Server state: ${server.server_state} → ${to}. ${why}` : `Server state: ${server.server_state} → ${to}.`,
      message_type: 'notification',
      subtype_xmlid: to === 'online' ? 'mail.mt_note' : 'mail.mt_alert',
    });
  }

  async function recordFailure(server: RootServer): Promise<{ failures: number; server_state: string } | null> {
    const [row] = await ctx.db.$queryRaw<{ monitor_failures: number; server_state: string }[]>`
      UPDATE root_servers SET monitor_failures = monitor_failures + 1, last_monitor_at = now(),
        server_state = CASE WHEN monitor_failures + 1 >= ${OFFLINE_AFTER_FAILURES} THEN 'offline'::"ServerState" ELSE server_state END
      WHERE id = ${server.id} AND ${MONITORED_SQL}
      RETURNING monitor_failures, server_state::text`;
    return row ? { failures: row.monitor_failures, server_state: row.server_state } : null;
  }

  /** The counters of the last recorded sample (any worker's), while they are kept. */
  async function previousSample(serverId: number): Promise<ProcSample | null> {
    const raw = await ctx.redis.get(sampleKey(prefix, serverId));
    return raw ? (JSON.parse(raw) as ProcSample) : null;
  }

  async function recordFailed(server: RootServer, error: string): Promise<PollResult> {
    const after = await recordFailure(server);
    if (!after) return { outcome: 'skipped', reason: 'monitoring stopped' };
    if (after.server_state !== server.server_state) {
      await stateChanged(server, after.server_state, `${after.failures} failed polls in a row; last error: ${error}`);
    }
    await tellObservers([
      {
        root_server_id: server.id,
        outcome: 'failed',
        previous_state: server.server_state,
        server_state: after.server_state,
        metrics: null,
        failures: after.failures,
        error,
        at: new Date(),
      },
    ]);
    return { outcome: 'failed', server_state: after.server_state, failures: after.failures, error };
  }

  /** After a good poll is recorded: the chatter message of a state change, and the observers' event. */
  async function afterSuccess(
    server: Pick<RootServer, 'id' | 'server_state'>,
    metrics: Metrics,
    state: 'online' | 'warning',
  ): Promise<MonitorPollEvent> {
    if (state !== server.server_state) {
      const why =
        state === 'warning'
          ? `CPU ${metrics.cpu_percent} %, RAM ${metrics.ram_percent} %, disk ${metrics.disk_percent} % (warning at 90 %).`
          : '';
      await stateChanged(server as RootServer, state, why);
    }
    return {
      root_server_id: server.id,
      outcome: 'ok',
      previous_state: server.server_state,
      server_state: state,
      metrics: { ...metrics },
      failures: 0,
      error: null,
      at: new Date(),
    };
  }

  /** The server, if it is monitored; else null. */
  async function loadMonitored(serverId: number): Promise<RootServer | null> {
    // Not (or not yet: start_monitor's transaction may still be committing) monitored: nothing to
    // do. stop_monitor removes the schedule; worker start removes any left behind.
    return ctx.db.rootServer.findFirst({ where: { id: serverId, ...MONITORED } });
  }

  /** The server's pooled connection; a new one when there is none or its address or credentials changed. */
  function connect(server: RootServer, timeoutMs: number): Promise<SshConnection> {
    return pool.acquire(poolKeyOf(server.id), connectionSignature(server), () =>
      connectRootServer(ctx, server, { connectTimeoutMs: timeoutMs, keepaliveMs: KEEPALIVE_MS }),
    );
  }

  /** The monitored server, or why it is not polled now (not monitored, or offline and backing off). */
  async function loadForPoll(serverId: number): Promise<RootServer | { outcome: 'skipped'; reason: string }> {
    const server = await loadMonitored(serverId);
    if (!server) return { outcome: 'skipped', reason: 'not monitored' };
    const interval = intervalMs(server.monitor_update_interval);
    if (server.monitor_failures >= OFFLINE_AFTER_FAILURES && server.last_monitor_at) {
      const wait = Math.min(MAX_BACKOFF_MS, interval * 2 ** (server.monitor_failures - OFFLINE_AFTER_FAILURES));
      if (Date.now() - server.last_monitor_at.getTime() < wait - interval / 2) return { outcome: 'skipped', reason: 'backoff' };
    }
    return server;
  }

  /** One poll: connect (or reuse the connection), read the sample, record it or the failure. */
  async function poll(serverId: number, { sampler = execSampler, claim }: PollOptions = {}): Promise<PollResult> {
    const server = await loadForPoll(serverId);
    if ('outcome' in server) return server;
    const interval = intervalMs(server.monitor_update_interval);
    const timeoutMs = pollTimeoutMs(interval);
    const deadline = Date.now() + timeoutMs; // connect and command together
    let metrics: Metrics;
    let cur: ProcSample;
    let sampledAt: Date;
    try {
      const conn = await connect(server, timeoutMs);
      const prev = await previousSample(server.id);
      const samples = await sampler(server, conn, prev, deadline);
      cur = samples[samples.length - 1]!;
      metrics = computeMetrics(prev ?? (samples.length > 1 ? samples[0]! : null), cur);
      sampledAt = new Date();
    } catch (err) {
      afterFailure(server);
      if (claim && !(await claim())) return { outcome: 'skipped', reason: 'already polled' };
      return recordFailed(server, (err as Error).message);
    }
    const sampleJson = JSON.stringify(cur);
    if (!claim) await ctx.redis.set(sampleKey(prefix, server.id), sampleJson, 'PX', sampleTtlMs(interval));
    else if (!(await claim(sampleJson, sampleTtlMs(interval)))) return { outcome: 'skipped', reason: 'already polled' };
    let written: Map<number, SampleRecorded>;
    try {
      written = await writeSamples([{ serverId: server.id, metrics, signature: connectionSignature(server), at: sampledAt }]);
    } catch (err) {
      // A value the database refuses is this server's failed poll (as in recordSamples).
      if (!isBadValueError(err)) throw err;
      return recordFailed(server, refusedSample(err));
    }
    if (!written.has(server.id)) return { outcome: 'skipped', reason: 'monitoring stopped' };
    return { outcome: 'ok', server_state: serverStateOf(metrics), metrics };
  }

  /** Records a failure found outside poll() (a streamed sample that did not come). */
  async function fail(serverId: number, error: string): Promise<PollResult> {
    const server = await loadMonitored(serverId);
    if (!server) return { outcome: 'skipped', reason: 'not monitored' };
    afterFailure(server);
    return recordFailed(server, error);
  }

  /**
   * A failure closes the server's connection only when the poll before it failed too. A first
   * timeout is often a moment, not the connection (a stall on either side): the next poll opens a
   * new channel on it, without a handshake, so a fleet that stalls at once does not reconnect at
   * once. A second failure in a row starts afresh; a connection that ended is replaced when next
   * used anyway (the pool checks).
   */
  function afterFailure(server: RootServer) {
    if (server.monitor_failures > 0) pool.discard(poolKeyOf(server.id));
  }

  /**
   * Records streamed samples of many servers in one statement (writeSamples). When the database
   * refuses a value, the rows are written one by one, so a row it refuses costs only its own
   * server: a failed poll, with the reason. Any other error is the database's, not a row's (every
   * row would fail alike): it is thrown. Answers what became of each sample; a server not
   * monitored any more is left out.
   */
  async function recordSamples(items: SampleToRecord[]): Promise<Map<number, SampleRecorded>> {
    try {
      return await writeSamples(items);
    } catch (err) {
      if (!isBadValueError(err)) throw err;
      if (items.length === 1) {
        const error = refusedSample(err);
        const result = await fail(items[0]!.serverId, error);
        return new Map(result.outcome === 'failed' ? [[items[0]!.serverId, { outcome: 'failed', error }]] : []);
      }
      const out = new Map<number, SampleRecorded>();
      for (const item of items) for (const [id, r] of await recordSamples([item])) out.set(id, r);
      return out;
    }
  }

  /**
   * Writes the samples of one or many servers in one statement: each row only while its server is
   * monitored (MONITORED_SQL, checked under the row lock: a stop that commits first wins), its
   * state, failures reset; then the state change of each, and the observers told the whole batch
   * at once. Answers the servers written (a server not monitored any more is left out).
   */
  async function writeSamples(items: SampleToRecord[]): Promise<Map<number, SampleRecorded>> {
    const out = new Map<number, SampleRecorded>();
    if (items.length === 0) return out;
    const states = items.map((i) => serverStateOf(i.metrics));
    const metricArrays = METRIC_NAMES.map(
      (name) => Prisma.sql`${items.map((i) => i.metrics[name])}::${Prisma.raw(METRIC_COLUMNS[name] === 'bytes' ? 'int8' : 'float8')}[]`,
    );
    const rows = await ctx.db.$queryRaw<{ id: number; prev: string; signature: string }[]>`
      WITH input AS (
        SELECT * FROM unnest(${items.map((i) => i.serverId)}::int[], ${items.map((i) => i.at.toISOString())}::timestamptz[], ${states}::text[],
          ${Prisma.join(metricArrays)})
          AS t(id, at, new_state, ${METRIC_COLUMN_LIST})),
      old AS (
        SELECT r.id, r.server_state FROM root_servers r JOIN input i ON i.id = r.id
        WHERE ${MONITORED_SQL} ORDER BY r.id FOR UPDATE OF r),
      upd AS (
        UPDATE root_servers r SET server_state = i.new_state::"ServerState", monitor_failures = 0, last_monitor_at = now()
        FROM input i, old o WHERE r.id = i.id AND o.id = r.id
        RETURNING r.id, o.server_state::text AS prev,
          md5(concat_ws('|', r.ip, r.port::text, r.username, r.password, r.key, r.host_key)) AS signature),
      ins AS (
        INSERT INTO root_server_monitor_logs (root_server_id, created_at, ${METRIC_COLUMN_LIST})
        SELECT i.id, i.at, ${METRIC_COLUMN_LIST} FROM input i JOIN upd u ON u.id = i.id)
      SELECT id, prev, signature FROM upd`;
    const byId = new Map(items.map((item, n) => [item.serverId, { item, state: states[n]! as 'online' | 'warning' }]));
    const events: MonitorPollEvent[] = [];
    for (const row of rows) {
      const { item, state } = byId.get(row.id)!;
      out.set(row.id, { outcome: 'ok', signature: row.signature });
      events.push(await afterSuccess({ id: row.id, server_state: row.prev as RootServer['server_state'] }, item.metrics, state));
    }
    await tellObservers(events);
    return out;
  }

  return { poll, fail, recordSamples, loadMonitored, connect, previousSample };
}

export type MonitorPoller = ReturnType<typeof createMonitorPoller>;
