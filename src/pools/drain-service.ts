// drain (DESIGN §22): an Odoo host's tenants moved to the other hosts of its pool through §20's
// move, a few at a time. The host is cordoned first (placement's cordon), so no new tenant lands
// there meanwhile. The drain's state is the host itself: the tenants still recorded on it, the moves
// from it under way, those that failed since the drain began (not tried again by this drain). So a
// run that died continues where it was (the job is run again after a crash), and asking for a drain
// while one runs answers that one. Each tenant's target is placement's choice among the pool's other
// hosts (healthy, not cordoned, with room; the least filled). A tenant that is not running (a
// suspended one, say) cannot be moved, and stays: the drain ends naming it.
import type { Job } from 'bullmq';
import type { AppContext } from '../context.js';
import { type Author, postMessage } from '../core/chatter.js';
import { AppError, ConflictError, NotFoundError } from '../core/errors.js';
import { publicJobId } from '../core/queue.js';
import { sleep } from '../core/sleep.js';
import type { HostDrain, RootServer } from '../generated/prisma/client.js';
import { createMoveService } from '../moves/index.js';
import { createPlacementHosts, place } from '../placement/index.js';
import { poolJobs } from './pool-job-specs.js';

/** Moves under way from the host at once, unless the operator says otherwise. */
export const DRAIN_BATCH_SIZE = 3;
/** How long one move's request (its checks on the target) may take while it holds the target's room. */
const MOVE_REQUEST_MS = 120_000;
/** How often a drain looks at its moves. */
const LOOK_EVERY_MS = 2000;

type Payload = { drain_id: number; user_id: number | null };

/** The subscriptions living on the host: recorded there, or (recorded nowhere) on a template built there. */
const onHost = (hostId: number) => ({
  database_created_at: { not: null },
  database_dropped_at: null,
  OR: [{ root_server_id: hostId }, { root_server_id: null, database_template: { root_server_id: hostId } }],
});

export interface DrainLook {
  /** Tenants still on the host. */
  left: { id: number; state: string; operation: string | null }[];
  /** Subscriptions with a move from the host under way. */
  moving: number[];
  /** Moves from the host done since the drain began. */
  moved: number;
  /** Subscriptions whose move from the host failed since the drain began. */
  failed: number[];
}

/** What is left to do: read from the host's tenants and the moves from it since the drain began. */
export async function lookAtDrain(db: AppContext['db'], drain: Pick<HostDrain, 'root_server_id' | 'created_at'>): Promise<DrainLook> {
  const [left, moves] = await Promise.all([
    db.subscription.findMany({
      where: onHost(drain.root_server_id),
      select: { id: true, state: true, operation: true },
      orderBy: { id: 'asc' },
    }),
    db.subscriptionMove.findMany({
      where: { from_root_server_id: drain.root_server_id, created_at: { gte: drain.created_at } },
      select: { subscription_id: true, state: true },
      orderBy: { id: 'asc' },
    }),
  ]);
  const moving = moves.filter((m) => m.state === 'moving').map((m) => m.subscription_id);
  const moved = moves.filter((m) => m.state === 'done').length;
  const stillHere = new Set(left.map((s) => s.id));
  const failed = [...new Set(moves.filter((m) => m.state === 'failed' && stillHere.has(m.subscription_id)).map((m) => m.subscription_id))];
  return { left, moving, moved, failed: failed.filter((id) => !moving.includes(id)) };
}

/** The tenants to start moving now: running, idle, not moving, not failed in this drain; at most `slots`. */
export function nextToMove(look: DrainLook, refused: readonly number[], slots: number): number[] {
  if (slots <= 0) return [];
  const skip = new Set([...look.moving, ...look.failed, ...refused]);
  return look.left
    .filter((s) => s.state === 'running' && s.operation === null && !skip.has(s.id))
    .slice(0, slots)
    .map((s) => s.id);
}

export function createDrains(ctx: AppContext) {
  const { db } = ctx;
  const moves = createMoveService(ctx);
  const hosts = createPlacementHosts(ctx);

  const note = (hostId: number, body: string, alert = false) =>
    postMessage(db, {
      model_name: 'svc.root.server',
      rec_id: hostId,
      body,
      message_type: 'notification',
      ...(alert ? { subtype_xmlid: 'mail.mt_alert' } : {}),
    });

  /**
   * Starts one tenant's move to placement's choice among the pool's other hosts. The move is recorded
   * while placement holds the target's lock (its reservation): the next move of the batch, another
   * drain or a deployment reads it there (a move to a host holds its room until its switch), so a
   * batch never fills one host past its room.
   */
  async function startMove(host: RootServer, subscriptionId: number, userId: number | null): Promise<void> {
    const pool = await db.rootServer.findMany({
      where: { id: { not: host.id }, odoo_version_id: host.odoo_version_id, odoo_postgresql_server_id: { not: null } },
      select: { id: true, odoo_postgresql_server_id: true },
    });
    await place(db, {
      candidates: pool.map((h) => ({ root_server_id: h.id, postgresql_server_id: h.odoo_postgresql_server_id! })),
      what: `subscription ${subscriptionId} (drain of root server ${host.id})`,
      exceptSubscription: subscriptionId,
      reserve: async (_tx, c) => {
        await moves.request(subscriptionId, { root_server_id: c.root_server_id! }, userId);
      },
      // The move's checks (the target's disk, its version) run under the lock.
      holdMs: MOVE_REQUEST_MS,
    });
  }

  /** Ends the drain: done when the host is empty, else failed naming what stayed and why. */
  async function finish(drain: HostDrain, look: DrainLook, refused: Map<number, string>) {
    const why = (s: DrainLook['left'][number]) =>
      refused.get(s.id) ??
      (look.failed.includes(s.id)
        ? 'its move failed (see its moves)'
        : s.state !== 'running'
          ? `it is ${s.state}: only a running instance is moved`
          : `busy with a ${s.operation}`);
    const leftOver = look.left.map((s) => `subscription ${s.id}: ${why(s)}`).join('; ');
    const state = look.left.length === 0 ? 'done' : 'failed';
    const done = await db.hostDrain.update({
      where: { id: drain.id },
      data: { state, moved: look.moved, failed_subscription_ids: look.failed, left_over: leftOver || null, finished_at: new Date() },
    });
    await note(
      drain.root_server_id,
      state === 'done'
        ? `Drained: ${look.moved} tenant(s) moved to other hosts of the pool; no tenant is left here. It stays cordoned.`
        : `Drain ended with ${look.left.length} tenant(s) left here (${look.moved} moved): ${leftOver}`,
      state !== 'done',
    );
    return done;
  }

  return {
    /** Cordons the host and queues its drain, or answers the drain under way (queued again: a lost job runs again). */
    async request(hostId: number, batchSize: number | undefined, author: Author | null, userId: number | null): Promise<string> {
      const host = await db.rootServer.findUnique({ where: { id: hostId } });
      if (!host) throw new NotFoundError('Root server');
      if (host.odoo_version_id === null) throw new ConflictError(`Root server ${hostId} runs no Odoo: it has no tenants to drain`);
      if (!host.cordoned_at) await hosts.cordon(hostId, 'drain', author, userId);
      let drain = await db.hostDrain.findFirst({ where: { root_server_id: hostId, state: 'draining' } });
      if (!drain) {
        drain = await db.hostDrain.create({ data: { root_server_id: hostId, batch_size: batchSize ?? DRAIN_BATCH_SIZE, user_id: userId } });
        await note(hostId, `Drain ${drain.id} started: its tenants move to other hosts of the pool, ${drain.batch_size} at a time.`);
      }
      const jobId = await ctx.queues.enqueue(poolJobs.host_drain, { drain_id: drain.id, user_id: drain.user_id ?? userId });
      await db.hostDrain.update({ where: { id: drain.id }, data: { job_id: jobId } });
      return jobId;
    },

    list: (hostId: number) => db.hostDrain.findMany({ where: { root_server_id: hostId }, orderBy: { id: 'desc' } }),

    /** Stops the running drain: no further move starts; those under way finish (or fail) on their own. The host stays cordoned. */
    async stop(hostId: number, userId: number | null) {
      if (!(await db.rootServer.findUnique({ where: { id: hostId }, select: { id: true } }))) throw new NotFoundError('Root server');
      const drain = await db.hostDrain.findFirst({ where: { root_server_id: hostId, state: 'draining' } });
      if (!drain) throw new ConflictError(`Root server ${hostId} has no drain under way`);
      const look = await lookAtDrain(db, drain);
      const stopped = await db.hostDrain.update({
        where: { id: drain.id },
        data: { state: 'stopped', moved: look.moved, failed_subscription_ids: look.failed, finished_at: new Date() },
      });
      await note(
        hostId,
        `Drain ${drain.id} stopped${userId ? ` by user ${userId}` : ''}: ${look.moved} tenant(s) moved, ${look.moving.length} move(s) under way finish on their own, ${look.left.length} tenant(s) still here. The host stays cordoned.`,
      );
      return stopped;
    },

    async run(payload: Payload, job: Job, lookEveryMs = LOOK_EVERY_MS) {
      const first = await db.hostDrain.findUnique({ where: { id: payload.drain_id } });
      if (first?.state !== 'draining') return { drain_id: payload.drain_id, state: first?.state ?? 'gone' };
      const jobId = publicJobId(job.queueName, job.id!);
      // Tenants this run could not start a move for (no host fits, the move refused), with why: not asked again by it.
      const refused = new Map<number, string>();
      for (;;) {
        const drain = await db.hostDrain.findUniqueOrThrow({ where: { id: payload.drain_id } });
        if (drain.state !== 'draining') return { drain_id: drain.id, state: drain.state };
        const host = await db.rootServer.findUniqueOrThrow({ where: { id: drain.root_server_id } });
        const look = await lookAtDrain(db, drain);
        const start = nextToMove(look, [...refused.keys()], drain.batch_size - look.moving.length);
        for (const id of start) {
          try {
            await startMove(host, id, payload.user_id);
            look.moving.push(id);
          } catch (err) {
            // A refusal (no host fits, the move's checks: a conflict, a bad state) is this tenant's; anything else fails the run.
            if (!(err instanceof AppError)) throw err;
            refused.set(id, err.message);
          }
        }
        await db.hostDrain.update({
          where: { id: drain.id },
          data: { moved: look.moved, failed_subscription_ids: look.failed, job_id: jobId },
        });
        await job.updateProgress({
          step: 'moving',
          moved: look.moved,
          moving: look.moving.length,
          failed: look.failed.length + refused.size,
          left: look.left.length,
          percent: Math.round((100 * look.moved) / Math.max(1, look.moved + look.left.length)),
        });
        if (look.moving.length === 0 && nextToMove(look, [...refused.keys()], 1).length === 0) {
          const done = await finish(drain, look, refused);
          return { drain_id: done.id, state: done.state, moved: done.moved, left_over: done.left_over };
        }
        await sleep(lookEveryMs);
      }
    },
  };
}
