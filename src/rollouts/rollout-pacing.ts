// A rollout paced to the PostgreSQL connections it has. How many tenants of a host it updates at
// once: tenants_per_host, fewer when the server's room (what every Odoo host using it may hold at
// worst, what svc and everyone else hold now) leaves no room for that many update processes. And a
// tenant's step that PostgreSQL refused for want of a connection slot ("sorry, too many clients
// already") is tried again, a few times, once the server has room, instead of failing the tenant:
// a slot is a passing shortage, not the tenant's fault (docs/rollouts.md, "Connections").
import type { AppContext } from '../context.js';
import { writeActionLog } from '../core/action-log.js';
import { sleep } from '../core/sleep.js';
import type { PostgresqlServer } from '../generated/prisma/client.js';
import { onServer } from '../instances/index.js';
import { connectionsInUse, hostConnections, otherHosts, postgresqlRoom, SVC_CONNECTIONS } from '../odoo/index.js';

/** PostgreSQL's words when no slot is left (its own, in svc's errors and in Odoo's output). */
const NO_SLOT = /too many clients already|remaining connection slots are reserved/i;

export const refusedForConnections = (text: string) => NO_SLOT.test(text);

/** Tries of one step (the first and the retries). */
export const CONNECTION_ATTEMPTS = 5;
/** The longest wait for room before a retry: this times 2^(retry − 1), room looked for every second. */
const WAIT_MS = 5_000;

/** The server's free slots now, and how many one update process of the host may take. */
async function roomNow(ctx: Pick<AppContext, 'secretBox'>, pg: PostgresqlServer) {
  return onServer(ctx.secretBox, pg, async (query) => {
    const room = await postgresqlRoom(query);
    return { room, inUse: await connectionsInUse(query) };
  });
}

/**
 * Tenants of the host to update at once: `wanted` (tenants_per_host), fewer when the server's
 * free slots — its max_connections less the reserved ones, less what is in use now or, when more,
 * what svc and every Odoo host using it may hold (the other hosts' updates included) — hold fewer
 * update processes of this host; at least one. `why` says so when it is fewer.
 */
export async function rolloutLanes(
  ctx: Pick<AppContext, 'db' | 'secretBox'>,
  host: { id: number; odoo_workers: number | null; odoo_max_cron_threads: number | null },
  pg: PostgresqlServer,
  wanted: number,
): Promise<{ lanes: number; why: string | null }> {
  // A host set up before svc recorded its processes: nothing to count from.
  if (host.odoo_workers === null) return { lanes: wanted, why: null };
  const mine = hostConnections({ workers: host.odoo_workers, maxCronThreads: host.odoo_max_cron_threads ?? 0 }, 0);
  const others = (await otherHosts(ctx.db, pg.id, host.id)).map((o) => hostConnections(o, wanted));
  const planned = SVC_CONNECTIONS + mine.serving + others.reduce((n, o) => n + o.total, 0);
  const { room, inUse } = await roomNow(ctx, pg);
  const free = room.max - room.reserved - Math.max(inUse, planned);
  const lanes = Math.max(1, Math.min(wanted, Math.floor(free / mine.perUpdate)));
  if (lanes >= wanted) return { lanes, why: null };
  return {
    lanes,
    why:
      `${lanes} tenant(s) at once, not ${wanted} (tenants_per_host): PostgreSQL allows ${room.max} connections, ${room.reserved} reserved; ` +
      `${Math.max(inUse, planned)} in use or planned (${inUse} open now; svc ${SVC_CONNECTIONS}, this host's Odoo ${mine.serving}, other hosts ${planned - SVC_CONNECTIONS - mine.serving}), ` +
      `${mine.perUpdate} per update`,
  };
}

/**
 * rolloutLanes for a host's rollout now; fewer than `wanted` is said in the host's action log (so is
 * a server whose room could not be read: then one at a time).
 */
export async function pacedLanes(
  ctx: Pick<AppContext, 'db' | 'secretBox'>,
  host: { serverId: number; rolloutId: number; userId: number | null; jobId: string },
  wanted: number,
): Promise<number> {
  const server = await ctx.db.rootServer.findUniqueOrThrow({ where: { id: host.serverId }, include: { odoo_postgresql_server: true } });
  if (!server.odoo_postgresql_server || wanted <= 1) return Math.max(1, wanted);
  const { lanes, why } = await rolloutLanes(ctx, server, server.odoo_postgresql_server, wanted).catch((err: Error) => ({
    lanes: 1,
    why: `1 tenant at a time: PostgreSQL's connections could not be read: ${err.message}`,
  }));
  if (why) {
    await writeActionLog(ctx.db, {
      model_name: 'svc.root.server',
      rec_id: host.serverId,
      action_type: 'deployment',
      operation: 'rollout',
      input_text: `rollout ${host.rolloutId}: tenants updated at once`,
      output_text: why,
      user_id: host.userId,
      job_id: host.jobId,
    });
  }
  return lanes;
}

/** Waits until the server has `needed` free slots, looking every second, at most WAIT_MS × 2^(retry − 1). */
async function waitForRoom(ctx: Pick<AppContext, 'secretBox'>, pg: PostgresqlServer, needed: number, retry: number) {
  const until = Date.now() + WAIT_MS * 2 ** (retry - 1);
  for (;;) {
    await sleep(1000);
    const now = await roomNow(ctx, pg).catch(() => null); // refused too: no room yet
    if ((now && now.room.max - now.room.reserved - now.inUse >= needed) || Date.now() >= until) return;
  }
}

export interface RetryTarget {
  pg: PostgresqlServer;
  subscriptionId: number;
  /** The action log's input for this tenant (rollout, commit, database). */
  input: string;
  userId: number | null;
  jobId: string;
  /** Slots one try needs (an update process's pool). */
  needed: number;
}

/** Whom a tenant's retry is written on, with what (the rollout, its code, the database). */
export function retryTarget(
  host: { rolloutId: number; commit: string | null; serverId: number; userId: number | null; jobId: string; perUpdate: number },
  row: { subscription_id: number; database_name: string },
  pg: PostgresqlServer,
): RetryTarget {
  return {
    pg,
    subscriptionId: row.subscription_id,
    input: `rollout ${host.rolloutId}: ${host.commit ? `commit ${host.commit}` : 'code'} on root server ${host.serverId}, database ${row.database_name}`,
    userId: host.userId,
    jobId: host.jobId,
    needed: host.perUpdate,
  };
}

/** retriedForConnections's arguments after `attempt`'s name. */
export type RetryRest<T> = [attempt: () => Promise<T>, refusal?: (outcome: T) => string | null, before?: () => Promise<void>];

/**
 * Runs `attempt` until it is not refused for want of connection slots, at most CONNECTION_ATTEMPTS
 * times; before each retry, `before` (putting the tenant back, say), an action-log row on the
 * subscription, and a wait for room. `refusal` finds PostgreSQL's refusal in an outcome (an error
 * thrown, or Odoo's output); the last outcome is answered (or thrown) as it is.
 */
export async function retriedForConnections<T>(
  ctx: Pick<AppContext, 'db' | 'secretBox'>,
  target: RetryTarget,
  what: string,
  attempt: () => Promise<T>,
  refusal: (outcome: T) => string | null = () => null,
  before: () => Promise<void> = async () => {},
): Promise<T> {
  for (let n = 1; ; n++) {
    let said: string | null;
    let outcome: { ok: T } | { err: unknown };
    try {
      outcome = { ok: await attempt() };
      said = refusal(outcome.ok);
    } catch (err) {
      outcome = { err };
      said = refusedForConnections(String((err as Error)?.message)) ? (err as Error).message : null;
    }
    if (said === null || n >= CONNECTION_ATTEMPTS) {
      if ('err' in outcome) throw outcome.err;
      return outcome.ok;
    }
    const line = said.split('\n').find((l) => refusedForConnections(l)) ?? said;
    await before();
    await writeActionLog(ctx.db, {
      model_name: 'svc.subscription',
      rec_id: target.subscriptionId,
      action_type: 'deployment',
      operation: 'rollout',
      input_text: `${target.input}: ${what}`,
      output_text: `refused for want of PostgreSQL connections (try ${n} of ${CONNECTION_ATTEMPTS}): ${line.trim().slice(0, 500)}; tried again once the server has room (waiting at most ${(WAIT_MS * 2 ** (n - 1)) / 1000} s)`,
      status: 'failure',
      user_id: target.userId,
      job_id: target.jobId,
    });
    await waitForRoom(ctx, target.pg, target.needed, n);
  }
}
