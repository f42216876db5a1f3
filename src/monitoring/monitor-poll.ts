// One monitoring poll of one root server (the monitor_poll job). The SSH connection is reused
// between polls (ctx.sshPool), the previous /proc counters are kept in Redis (so any worker can
// take the next poll), and the row, the state and the failure count are written in one statement.
// server_state (DESIGN §7): online / warning after a good poll, offline after 3 failures in a row;
// every change is posted to the server's chatter. An offline server is retried with a growing
// delay (interval × 2^n, at most 5 minutes) instead of at every interval. Every recorded poll is
// then told to the observers (alerts); an observer's failure is logged, never the poll's.
import { createHash } from 'node:crypto';
import type { AppContext } from '../context.js';
import { connectRootServer } from '../servers/root-server-ssh.js';
import { postMessage } from '../core/chatter.js';
import type { MonitorPollEvent, MonitorPollObserver } from '../feature.js';
import type { RootServer } from '../generated/prisma/client.js';
import {
  computeMetrics,
  parseSamples,
  SAMPLE_COMMAND,
  serverStateOf,
  TWO_SAMPLES_COMMAND,
  type Metrics,
  type ProcSample,
} from './proc-metrics.js';
import { intervalMs, sampleKey } from './monitor-service.js';

const OFFLINE_AFTER_FAILURES = 3;
const MAX_BACKOFF_MS = 5 * 60_000;
const KEEPALIVE_MS = 60_000;

export type PollResult =
  | { outcome: 'ok'; server_state: 'online' | 'warning'; metrics: Metrics }
  | { outcome: 'failed'; server_state: string; failures: number; error: string }
  | { outcome: 'skipped'; reason: string };

/** A poll must end before the next one is due: 80 % of the interval, between 4 and 30 seconds. */
function pollTimeoutMs(interval: number): number {
  return Math.min(30_000, Math.max(4_000, Math.floor(interval * 0.8)));
}

/** Identifies what a pooled connection was opened with; any change opens a new one. */
function connectionSignature(s: RootServer): string {
  const parts = [s.ip, s.port, s.username, s.password, s.key, s.host_key];
  return createHash('sha256').update(JSON.stringify(parts)).digest('base64');
}

export function createMonitorPoller(
  ctx: Pick<AppContext, 'db' | 'box' | 'redis' | 'queues' | 'sshPool' | 'log'>,
  observers: readonly MonitorPollObserver[] = [],
) {
  const prefix = ctx.queues.prefix;

  async function tellObservers(event: MonitorPollEvent) {
    for (const observe of observers) {
      try {
        await observe(event);
      } catch (err) {
        ctx.log.error({ err, root_server_id: event.root_server_id }, 'a monitoring poll observer failed');
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

  async function recordSuccess(server: RootServer, m: Metrics, state: 'online' | 'warning'): Promise<boolean> {
    // One statement: the state update and the row, both only while monitoring is still on (a
    // stop_monitor that commits first wins; nothing is written after it).
    const written = await ctx.db.$executeRaw`
      WITH s AS (
        UPDATE root_servers SET server_state = ${state}::"ServerState", monitor_failures = 0, last_monitor_at = now()
        WHERE id = ${server.id} AND monitoring_enabled RETURNING id)
      INSERT INTO root_server_monitor_logs (root_server_id, cpu_percent, ram_used_bytes, ram_total_bytes, ram_percent,
        disk_used_bytes, disk_total_bytes, disk_percent, net_rx_bytes_per_s, net_tx_bytes_per_s, load_1, load_5, load_15)
      SELECT s.id, ${m.cpu_percent}, ${m.ram_used_bytes}, ${m.ram_total_bytes}, ${m.ram_percent},
        ${m.disk_used_bytes}, ${m.disk_total_bytes}, ${m.disk_percent}, ${m.net_rx_bytes_per_s}, ${m.net_tx_bytes_per_s},
        ${m.load_1}, ${m.load_5}, ${m.load_15} FROM s`;
    return written > 0;
  }

  async function recordFailure(server: RootServer): Promise<{ failures: number; server_state: string } | null> {
    const [row] = await ctx.db.$queryRaw<{ monitor_failures: number; server_state: string }[]>`
      UPDATE root_servers SET monitor_failures = monitor_failures + 1, last_monitor_at = now(),
        server_state = CASE WHEN monitor_failures + 1 >= ${OFFLINE_AFTER_FAILURES} THEN 'offline'::"ServerState" ELSE server_state END
      WHERE id = ${server.id} AND monitoring_enabled
      RETURNING monitor_failures, server_state::text`;
    return row ? { failures: row.monitor_failures, server_state: row.server_state } : null;
  }

  async function previousSample(serverId: number): Promise<ProcSample | null> {
    const raw = await ctx.redis.get(sampleKey(prefix, serverId));
    return raw ? (JSON.parse(raw) as ProcSample) : null;
  }

  return async function poll(serverId: number): Promise<PollResult> {
    const server = await ctx.db.rootServer.findUnique({ where: { id: serverId } });
    // Not (or not yet: start_monitor's transaction may still be committing) monitored: nothing to
    // do. stop_monitor removes the schedule; worker start removes any left behind.
    if (!server?.monitoring_enabled || server.state !== 'confirmed') return { outcome: 'skipped', reason: 'not monitored' };
    const interval = intervalMs(server.monitor_update_interval);
    if (server.monitor_failures >= OFFLINE_AFTER_FAILURES && server.last_monitor_at) {
      const wait = Math.min(MAX_BACKOFF_MS, interval * 2 ** (server.monitor_failures - OFFLINE_AFTER_FAILURES));
      if (Date.now() - server.last_monitor_at.getTime() < wait - interval / 2) return { outcome: 'skipped', reason: 'backoff' };
    }

    const timeoutMs = pollTimeoutMs(interval);
    const deadline = Date.now() + timeoutMs; // connect and command together
    const poolKey = `root-server:${server.id}`;
    try {
      const conn = await ctx.sshPool.acquire(poolKey, connectionSignature(server), () =>
        connectRootServer(ctx, server, { connectTimeoutMs: timeoutMs, keepaliveMs: KEEPALIVE_MS }),
      );
      const prev = await previousSample(server.id);
      const res = await conn.exec(prev ? SAMPLE_COMMAND : TWO_SAMPLES_COMMAND, {
        sudo: false,
        timeoutMs: Math.max(1000, deadline - Date.now()),
        maxOutputBytes: 256 * 1024,
      });
      if (res.timedOut) throw new Error(`The metrics command did not answer within ${timeoutMs / 1000} s`);
      if (res.exitCode !== 0) throw new Error(`The metrics command failed (exit code ${res.exitCode}): ${res.stderr.trim().slice(0, 500)}`);
      const samples = parseSamples(res.stdout);
      const cur = samples[samples.length - 1]!;
      const metrics = computeMetrics(prev ?? (samples.length > 1 ? samples[0]! : null), cur);
      await ctx.redis.set(sampleKey(prefix, server.id), JSON.stringify(cur), 'PX', interval * 3 + 60_000);
      const state = serverStateOf(metrics);
      if (!(await recordSuccess(server, metrics, state))) return { outcome: 'skipped', reason: 'monitoring stopped' };
      if (state !== server.server_state) {
        const why =
          state === 'warning'
            ? `CPU ${metrics.cpu_percent} %, RAM ${metrics.ram_percent} %, disk ${metrics.disk_percent} % (warning at 90 %).`
            : '';
        await stateChanged(server, state, why);
      }
      await tellObservers({
        root_server_id: server.id,
        outcome: 'ok',
        previous_state: server.server_state,
        server_state: state,
        metrics: { ...metrics },
        failures: 0,
        error: null,
        at: new Date(),
      });
      return { outcome: 'ok', server_state: state, metrics };
    } catch (err) {
      // A failed poll may leave the connection unusable (timeout, reset): start afresh next time.
      ctx.sshPool.discard(poolKey);
      const error = (err as Error).message;
      const after = await recordFailure(server);
      if (!after) return { outcome: 'skipped', reason: 'monitoring stopped' };
      if (after.server_state !== server.server_state) {
        await stateChanged(server, after.server_state, `${after.failures} failed polls in a row; last error: ${error}`);
      }
      await tellObservers({
        root_server_id: server.id,
        outcome: 'failed',
        previous_state: server.server_state,
        server_state: after.server_state,
        metrics: null,
        failures: after.failures,
        error,
        at: new Date(),
      });
      return { outcome: 'failed', server_state: after.server_state, failures: after.failures, error };
    }
  };
}
