// restart_odoo, stop_odoo and odoo_status on a root server whose Odoo setup_odoo made, and the start
// again of one found stopped while it should run (odoo-recovery.ts).
import type { Job } from 'bullmq';
import type { AppContext } from '../context.js';
import type { JobPayload } from '../core/jobs.js';
import { publicJobId } from '../core/queue.js';
import { basePathOf, openRemoteSession, type RemoteSession, stepFailed } from '../servers/index.js';
import type { odooJobs } from './odoo-job-specs.js';
import { type OdooLayout, odooLayout } from './odoo-layout.js';
import { postMessage } from '../core/chatter.js';
import {
  describeSource,
  gracefulRestart,
  logTail,
  odooProcesses,
  routingProbe,
  serviceStatus,
  startIfStopped,
  startService,
  stopService,
  waitHealthy,
} from './odoo-scripts.js';
import { queueStartAgain, START_AGAIN_WHY, shouldRun, type StartAgainReason } from './odoo-recovery.js';
import { loadOdooHost, odooHostStore } from './odoo-store.js';

const STEP_TIMEOUT_MS = 2 * 60_000;

type Payload = JobPayload<typeof odooJobs.odoo_restart>;

export function createOdooService(ctx: AppContext) {
  const store = odooHostStore(ctx);

  /**
   * odoo_status's check of svc's routing (routingProbe): a running Odoo without it is marked
   * `failed` with the reason and the end of its log (not stopped: a status read changes no service).
   */
  async function probeRouting(session: RemoteSession, l: OdooLayout, port: number, id: number, state: string, userId: number | null) {
    const probe = await session.run(routingProbe(port), { timeoutMs: STEP_TIMEOUT_MS });
    const said = session.mask(probe.stderr.trim() || probe.stdout.trim() || 'no answer');
    if (probe.exitCode === 0) return { loaded: true, said };
    if (state === 'running') {
      const tail = await session.run(logTail(l), { timeoutMs: STEP_TIMEOUT_MS });
      const error = session.mask(`svc's routing is not loaded: ${said}\n--- end of ${l.log} ---\n${tail.stdout.trim()}`).slice(-8000);
      await store.setState(id, { odoo_state: 'failed', odoo_error: error }, userId);
    }
    return { loaded: false, said };
  }

  /** Runs a start (startService's path); a failure marks the server `failed` with its output. */
  async function runStart(session: RemoteSession, command: string, port: number, id: number, userId: number | null) {
    const started = await session
      .check(command, `Starting Odoo on port ${port} failed`, { timeoutMs: STEP_TIMEOUT_MS })
      .catch(async (err: Error) => {
        await store.setState(id, { odoo_state: 'failed', odoo_error: err.message }, userId);
        throw err;
      });
    return started.stdout.trim();
  }

  /**
   * What odoo_status reads on the host: the service's state and workers, its source's version line
   * (null when unreadable), /web/health asked once, and the processes of the service.
   */
  async function readStatus(session: RemoteSession, l: OdooLayout, version: string | null) {
    const what = 'Reading the state of Odoo failed';
    const opts = { timeoutMs: STEP_TIMEOUT_MS };
    const lines = async (command: string) => {
      const res = await session.check(command, what, opts);
      return new Map(
        session
          .mask(res.stdout)
          .split('\n')
          .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)] as const),
      );
    };
    const kv = await lines(serviceStatus(l));
    const described = version === null ? null : await session.run(describeSource(l.sourceOf(version)), opts);
    const health = await session.run(waitHealthy(l.port, 0), opts);
    const procs = await session.check(odooProcesses(l), what, opts);
    const raw = procs.stdout.split('\n').find((line) => line.startsWith('processes='));
    if (!raw) stepFailed(session, what, procs);
    return {
      service: kv.get('service'),
      workers: kv.get('workers'),
      version: described?.exitCode === 0 ? session.mask(described.stdout.split('\n')[0]!.trim()) : '',
      // "healthy: HTTP 200 …" once asked, else why not.
      health: session.mask(health.exitCode === 0 ? health.stdout.trim().replace(/^healthy: /, '') : health.stderr.trim() || 'no answer'),
      processes: JSON.parse(raw.slice('processes='.length)) as { pid: number; rss_bytes: number; gevent: boolean }[],
    };
  }

  async function withHost<T>(
    id: number,
    audit: { user_id: number | null; job_id?: string },
    fn: (s: RemoteSession, port: number, server: Awaited<ReturnType<typeof loadOdooHost>>) => Promise<T>,
  ) {
    const server = await loadOdooHost(ctx.db, id);
    const session = await openRemoteSession(ctx, server, audit);
    try {
      return await fn(session, server.odoo_http_port, server);
    } finally {
      session.close();
    }
  }

  return {
    /** Checks the action may run (409 otherwise) before its job is queued. */
    assertOdooHost: (id: number) => loadOdooHost(ctx.db, id),

    async restart(payload: Payload, job: Job) {
      const jobId = publicJobId(job.queueName, job.id!);
      return withHost(payload.root_server_id, { user_id: payload.user_id, job_id: jobId }, async (session, port, server) => {
        const l = odooLayout(basePathOf(ctx.config, server), port);
        await runStart(session, startService(l), port, server.id, payload.user_id);
        const health = await store.waitReady(session, l, port, server.id, payload.user_id);
        await store.setState(server.id, { odoo_state: 'running', odoo_error: null }, payload.user_id);
        return { odoo_state: 'running' as const, http_port: port, health };
      });
    },

    /**
     * odoo_start_again: starts the service the way restart_odoo does (health, then svc's routing:
     * `failed` with the end of the log otherwise), but only while odoo_state is `running` and the
     * host has it stopped without stop_odoo (startIfStopped); a notice in the server's chatter.
     */
    async startAgain(payload: Payload & { reason: StartAgainReason }, job: Job) {
      const jobId = publicJobId(job.queueName, job.id!);
      const server = await ctx.db.rootServer.findUnique({ where: { id: payload.root_server_id } });
      if (!server || !shouldRun(server)) return { started: false, odoo_state: server?.odoo_state ?? null };
      return withHost(server.id, { user_id: payload.user_id, job_id: jobId }, async (session, port) => {
        const l = odooLayout(basePathOf(ctx.config, server), port);
        const said = await runStart(session, startIfStopped(l), port, server.id, payload.user_id);
        // Already running, or stopped by stop_odoo (its job has not recorded `stopped` yet): left as it is.
        if (said === 'running' || said === 'disabled') return { started: false, odoo_state: server.odoo_state, service: said };
        const health = await store.waitReady(session, l, port, server.id, payload.user_id);
        await postMessage(ctx.db, {
          model_name: 'svc.root.server',
          rec_id: server.id,
          body: `Odoo on port ${port} was not running (${START_AGAIN_WHY[payload.reason]}): started again, healthy, with svc's routing (job ${jobId}).`,
          message_type: 'notification',
        });
        return { started: true, odoo_state: 'running' as const, http_port: port, health };
      });
    },

    /**
     * Restarts a running Odoo without refusing requests (host/odoo-service.sh restart-gracefully): the old
     * processes stop only once the new ones answer. A new Odoo that does not answer is stopped and
     * the old one keeps serving: a UserError with the end of Odoo's log.
     */
    async gracefulRestart(id: number, audit: { user_id: number | null; job_id?: string }) {
      return withHost(id, audit, async (session, port, server) => {
        const l = odooLayout(basePathOf(ctx.config, server), port);
        const seconds = Math.ceil(ctx.config.ODOO_HEALTH_TIMEOUT_MS / 1000);
        const res = await session.check(
          gracefulRestart(l, seconds),
          `Restarting Odoo on port ${port} gracefully failed (the old one keeps serving)`,
          {
            timeoutMs: ctx.config.ODOO_HEALTH_TIMEOUT_MS + STEP_TIMEOUT_MS,
          },
        );
        const health = await store.waitReady(session, l, port, server.id, audit.user_id);
        await store.setState(server.id, { odoo_state: 'running', odoo_error: null }, audit.user_id);
        return { restarted: session.mask(res.stdout.trim().split('\n').pop() ?? ''), health };
      });
    },

    async stop(payload: Payload, job: Job) {
      const jobId = publicJobId(job.queueName, job.id!);
      return withHost(payload.root_server_id, { user_id: payload.user_id, job_id: jobId }, async (session, port, server) => {
        await session.check(stopService(odooLayout(basePathOf(ctx.config, server), port)), `Stopping Odoo on port ${port} failed`, {
          timeoutMs: STEP_TIMEOUT_MS,
        });
        await store.setState(server.id, { odoo_state: 'stopped', odoo_error: null }, payload.user_id);
        return { odoo_state: 'stopped' as const, http_port: port };
      });
    },

    /** What runs on the host now: health, version, processes and their memory. */
    async status(id: number, userId: number | null) {
      return withHost(id, { user_id: userId }, async (session, port, server) => {
        const version = await ctx.db.odooVersion.findUnique({ where: { id: server.odoo_version_id! } });
        const l = odooLayout(basePathOf(ctx.config, server), port);
        const status = await readStatus(session, l, version?.name ?? null);
        const workers = Number(status.workers);
        const http = status.processes.filter((p) => !p.gevent);
        const healthy = /^HTTP 200\b/.test(status.health);
        const routing = healthy ? await probeRouting(session, l, port, server.id, server.odoo_state, userId) : null;
        const service = status.service === 'running' ? ('running' as const) : ('stopped' as const);
        // Stopped while it should run (a reboot without systemd, a crash): started again by a job.
        const startJobId = service === 'stopped' ? await queueStartAgain(ctx, server.id, 'status') : null;
        return {
          odoo_state: routing?.loaded === false && server.odoo_state === 'running' ? ('failed' as const) : server.odoo_state,
          routing_loaded: routing?.loaded ?? null,
          routing: routing?.said ?? 'not probed: Odoo is not healthy',
          http_port: port,
          service,
          start_job_id: startJobId,
          healthy,
          health: status.health,
          version: status.version || null,
          odoo_version_id: server.odoo_version_id,
          workers: Number.isFinite(workers) ? workers : null,
          processes: status.processes.length,
          // In prefork mode the master forks the workers: the processes besides it (and the gevent one).
          worker_processes: Math.max(0, http.length - 1),
          memory_bytes: status.processes.reduce((sum, p) => sum + p.rss_bytes, 0),
          process_memory_bytes: status.processes.map((p) => p.rss_bytes),
        };
      });
    },
  };
}
