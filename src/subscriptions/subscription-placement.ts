// Where a deployment puts the subscription (issue 49, DESIGN §22): among the hosts holding a ready
// copy of its template, a trial takes a ready standby on a healthy host (least filled first; the
// standby's room is counted already), else placement picks the host (src/placement) and the
// subscription's servers are recorded at once (placed_at), under the host's lock: its room is
// taken before the database exists, and every later step and operation follows the record (§20).
import type { AppContext } from '../context.js';
import type { PostgresqlServer, RootServer, Subscription } from '../generated/prisma/client.js';
import { readyTemplateHosts, serverWhere, type Standby, takeStandby, type TemplateHost } from '../instances/index.js';
import { NoRoomError, place, standbyHosts, tellOperators } from '../placement/index.js';

type Ctx = Pick<AppContext, 'db' | 'secretBox' | 'config' | 'queues'>;

export interface Placed {
  server: PostgresqlServer;
  root: RootServer | null;
  /** The copy of the template it is made from. */
  templateHost: TemplateHost;
  standby: Standby | null;
  /** Why, for the deployment's action log. */
  text: string;
}

/** The ready standby's package for a trial (null: not a trial, or no package). */
async function trialPackageOf(ctx: Ctx, sub: Subscription) {
  if (!sub.is_trial) return null;
  const request = await ctx.db.trialRequest.findFirst({ where: { subscription_id: sub.id }, select: { trial_package_id: true } });
  return request?.trial_package_id ?? null;
}

/** Chooses where the subscription lives and records it; a NoRoomError (operators told) when no host fits. */
export async function placeSubscription(ctx: Ctx, sub: Subscription, templateId: number): Promise<Placed> {
  const candidates = await readyTemplateHosts(ctx.db, templateId);
  const what = `subscription ${sub.id} (${sub.database_name})`;
  const packageId = await trialPackageOf(ctx, sub);
  if (packageId !== null) {
    // A template without an Odoo host: its standbys are on its PostgreSQL server only, any of them.
    const hosts = candidates.some((c) => c.root_server_id !== null) ? await standbyHosts(ctx.db, candidates) : undefined;
    const standby = await takeStandby(ctx.db, packageId, templateId, hosts);
    if (standby) {
      await record(ctx, sub.id, standby.postgresql_server_id, standby.root_server_id);
      const templateHost = candidates.find((c) => c.root_server_id === standby.root_server_id) ?? candidates[0]!;
      return {
        server: standby.postgresql_server,
        root: standby.root_server,
        templateHost,
        standby,
        text: `${what}: standby ${standby.database_name} on ${standby.root_server ? `root server ${standby.root_server_id}` : `PostgreSQL server ${standby.postgresql_server_id}`} (the least filled healthy host holding a ready standby of the package)`,
      };
    }
  }
  try {
    const decision = await place(ctx.db, {
      candidates,
      what,
      exceptSubscription: sub.id,
      reserve: (tx, c) =>
        tx.subscription
          .update({
            where: { id: sub.id },
            data: { postgresql_server_id: c.postgresql_server_id, root_server_id: c.root_server_id, placed_at: new Date() },
          })
          .then(() => undefined),
    });
    const c = decision.candidate;
    const [server, root] = await Promise.all([
      ctx.db.postgresqlServer.findUniqueOrThrow({ where: { id: c.postgresql_server_id } }),
      c.root_server_id === null ? null : ctx.db.rootServer.findUniqueOrThrow({ where: { id: c.root_server_id } }),
    ]);
    return { server, root, templateHost: c, standby: null, text: decision.text };
  } catch (err) {
    if (err instanceof NoRoomError) {
      await tellOperators(ctx, {
        title: `[ALERT] No Odoo host fits ${what}`,
        message: `${err.message}. Add a host to the pool, uncordon one, or raise a host's capacity.`,
      });
    }
    throw err;
  }
}

const record = (ctx: Ctx, id: number, postgresql_server_id: number, root_server_id: number | null) =>
  ctx.db.subscription.update({ where: { id }, data: { postgresql_server_id, root_server_id, placed_at: new Date() } });

/** Where an earlier deployment placed the subscription (null: never placed, the template's servers then). */
export async function recordedPlace(ctx: Pick<Ctx, 'db'>, sub: Subscription) {
  if (!sub.placed_at || sub.postgresql_server_id === null) return null;
  const [server, root] = await Promise.all([
    ctx.db.postgresqlServer.findUniqueOrThrow({ where: { id: sub.postgresql_server_id } }),
    sub.root_server_id === null ? null : ctx.db.rootServer.findUniqueOrThrow({ where: { id: sub.root_server_id } }),
  ]);
  return { server, root, where: serverWhere(server) };
}
