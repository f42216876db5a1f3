// The parts a move's job is made of, besides its copy (move-copy.ts): its chatter and action log,
// the freeze of the source database, the maintenance flag, and taking away what a move left: what a
// failed run made on the target, and after the keep period the old copy. A move between two hosts
// of one PostgreSQL server (`sharesDatabase`) leaves the database where it is: its old copy is the
// old host's filestore only, and the database is never dropped.
import type { AppContext } from '../context.js';
import { authorOfUser } from '../core/chatter.js';
import { UserError } from '../core/errors.js';
import type { SubscriptionMove } from '../generated/prisma/client.js';
import {
  createFilestores,
  dropDatabaseAndItsRole,
  endSessions,
  onServer,
  type Query,
  removeTenantCredentials,
  runOnOdooHost,
  setMaintenance,
  tenantRoleName,
  writeTenantCredentials,
} from '../instances/index.js';
import { basePathOf } from '../servers/index.js';
import { odooLayout } from '../odoo/index.js';
import { findDatabase, quoteIdent } from '../postgresql/index.js';
import { databaseStep, postAlert, postNotice } from '../subscriptions/index.js';
import type { MoveEnds } from './move-checks.js';

export type Audit = { user_id: number | null; job_id: string };

/** Whether a move goes between two hosts of one PostgreSQL server (the database is not copied). */
export const sharesDatabase = (move: Pick<SubscriptionMove, 'from_postgresql_server_id' | 'to_postgresql_server_id'>) =>
  move.from_postgresql_server_id === move.to_postgresql_server_id;

export function createMoveParts(ctx: AppContext) {
  const { db } = ctx;
  const filestores = createFilestores(ctx);

  /** A notice in the subscription's chatter (an alert when something went wrong), by whoever asked. */
  const note = async (subscriptionId: number, body: string, userId: number | null, alert = false) =>
    (alert ? postAlert : postNotice)(db, subscriptionId, body, await authorOfUser(db, userId));

  /** One step of the move in the subscription's action log. */
  const logged = <T>(move: SubscriptionMove, audit: Audit, input: string, work: () => Promise<T>) =>
    databaseStep(db, move.subscription_id, { ...audit, operation: move.is_back ? 'move_back' : 'move' }, input, work);

  async function endsOf(move: SubscriptionMove): Promise<MoveEnds> {
    const [fromPg, fromHost, toPg, toHost] = await Promise.all([
      db.postgresqlServer.findUniqueOrThrow({ where: { id: move.from_postgresql_server_id } }),
      db.rootServer.findUniqueOrThrow({ where: { id: move.from_root_server_id } }),
      db.postgresqlServer.findUniqueOrThrow({ where: { id: move.to_postgresql_server_id } }),
      db.rootServer.findUniqueOrThrow({ where: { id: move.to_root_server_id } }),
    ]);
    return { from: { pg: fromPg, host: fromHost }, to: { pg: toPg, host: toHost } };
  }

  const maintenance = (host: MoveEnds['from']['host'], name: string, on: boolean, audit: Audit) =>
    runOnOdooHost(
      ctx,
      host,
      { ...audit, operation: 'move' },
      setMaintenance(odooLayout(basePathOf(ctx.config, host), host.odoo_http_port!), name, on),
      2 * 60_000,
    );

  /** Work on the source database, once it is known to be the subscription's own (cluster and oid). */
  async function onSource<T>(move: SubscriptionMove, ends: MoveEnds, work: (q: Query) => Promise<T>) {
    const sub = await db.subscription.findUniqueOrThrow({ where: { id: move.subscription_id } });
    return onServer(ctx.secretBox, ends.from.pg, async (q) => {
      const found = await findDatabase(q, move.database_name);
      const own =
        found &&
        found.oid === (move.from_database_oid ?? sub.database_oid) &&
        found.systemIdentifier === (move.from_system_identifier ?? sub.database_system_identifier);
      if (!own)
        throw new UserError(
          `Database ${move.database_name} on ${ends.from.pg.ip}:${ends.from.pg.port} is not the subscription's own: nothing was done`,
        );
      return work(q);
    });
  }

  const setSource = (move: SubscriptionMove, ends: MoveEnds, audit: Audit, options: string, terminate: boolean) => {
    const alter = `ALTER DATABASE ${quoteIdent(move.database_name)} WITH ${options}`;
    return logged(move, audit, terminate ? `${alter}; end its sessions` : alter, () =>
      onSource(move, ends, async (q) => {
        await q(alter);
        if (!terminate) return options;
        return `${options}; ${await endSessions(q, move.database_name)} session(s) ended`;
      }),
    );
  };

  /** The role of a database that stays where it is, and its password (sealed), as the subscription records them. */
  async function recordedRole(move: SubscriptionMove) {
    const sub = await db.subscription.findUniqueOrThrow({ where: { id: move.subscription_id } });
    if (!sub.database_role || !sub.database_role_password)
      throw new UserError(`Database ${move.database_name} has no role of its own recorded: another host could not serve it`);
    return { role: sub.database_role, sealed: sub.database_role_password };
  }

  /** Where the old host's Odoo finds the database's role: written back when a move between two hosts of one server is undone. */
  async function restoreSourceCredentials(move: SubscriptionMove, ends: MoveEnds, audit: Audit) {
    const { role, sealed } = await recordedRole(move);
    const password = await ctx.secretBox.reveal(sealed);
    await writeTenantCredentials(ctx, ends.from.host, move.database_name, { role, password: password! }, { ...audit, operation: 'move' });
  }

  /**
   * Takes away what a run made on the target (database, filestore: only when it made them, and never
   * a database a subscription records as its own, nor a database both hosts share) and opens the
   * source again.
   */
  async function undo(move: SubscriptionMove, ends: MoveEnds, audit: Audit, madeTarget: boolean) {
    const done: string[] = [];
    const attempt = async (what: string, work: () => Promise<unknown>) => {
      try {
        await work();
      } catch (err) {
        done.push(`${what} failed: ${(err as Error).message}`);
      }
    };
    const drop = `DROP DATABASE ${quoteIdent(move.database_name)} WITH (FORCE)`;
    if (madeTarget && !sharesDatabase(move)) {
      await attempt('Dropping the copy on the target', () =>
        logged(move, audit, `${drop} -- on ${ends.to.pg.ip}:${ends.to.pg.port}`, () =>
          onServer(ctx.secretBox, ends.to.pg, async (q) => {
            const found = await findDatabase(q, move.database_name);
            if (!found) return 'none there';
            const owned = await db.subscription.count({
              where: { database_system_identifier: found.systemIdentifier, database_oid: found.oid },
            });
            if (owned > 0) return 'left: a subscription records it as its own';
            await q(drop);
            await q(`DROP ROLE IF EXISTS ${quoteIdent(tenantRoleName(found))}`);
            return 'dropped';
          }),
        ),
      );
    }
    if (madeTarget) {
      await attempt('Removing the filestore copy', () =>
        filestores.remove(ends.to.host, move.database_name, { ...audit, operation: 'move' }),
      );
      await attempt("Removing the copy's credentials file", () =>
        removeTenantCredentials(ctx, ends.to.host, move.database_name, { ...audit, operation: 'move' }),
      );
    }
    if (sharesDatabase(move)) {
      await attempt("Writing the database's credentials file on the old host again", () => restoreSourceCredentials(move, ends, audit));
    }
    await attempt('Opening the database again', () => setSource(move, ends, audit, 'ALLOW_CONNECTIONS true CONNECTION LIMIT -1', false));
    await attempt('Clearing the maintenance flag', () => maintenance(ends.from.host, move.database_name, false, audit));
    return done;
  }

  /**
   * Drops a done move's old copy: its database by identity (never one a subscription records as its
   * own, and none when the move left the database where it was), its filestore, credentials file and
   * maintenance flag on the old host (never while the instance lives on that host again).
   */
  async function dropOldCopy(move: SubscriptionMove, audit: Audit) {
    const ends = await endsOf(move);
    if (!sharesDatabase(move)) {
      const drop = `DROP DATABASE ${quoteIdent(move.database_name)} WITH (FORCE)`;
      await logged(move, audit, `${drop} -- the old copy on ${ends.from.pg.ip}:${ends.from.pg.port}`, () =>
        onServer(ctx.secretBox, ends.from.pg, async (q) => {
          const found = await findDatabase(q, move.database_name);
          if (!found) return 'already gone';
          if (found.oid !== move.from_database_oid || found.systemIdentifier !== move.from_system_identifier) {
            return `left: the database named ${move.database_name} there now is not the old copy`;
          }
          const owned = await db.subscription.count({
            where: { database_system_identifier: found.systemIdentifier, database_oid: found.oid },
          });
          if (owned > 0) return 'left: a subscription records it as its own';
          await dropDatabaseAndItsRole(q, move.database_name);
          return 'dropped';
        }),
      );
    }
    const sub = await db.subscription.findUnique({ where: { id: move.subscription_id } });
    const livesThere = sub?.root_server_id === move.from_root_server_id && sub.database_name === move.database_name;
    if (!livesThere) {
      await filestores.remove(ends.from.host, move.database_name, { ...audit, operation: 'move' });
      await removeTenantCredentials(ctx, ends.from.host, move.database_name, { ...audit, operation: 'move' });
      await maintenance(ends.from.host, move.database_name, false, audit);
    }
    await db.subscriptionMove.update({ where: { id: move.id }, data: { old_dropped_at: new Date() } });
    const what = sharesDatabase(move)
      ? `The old filestore of ${move.database_name} on root server ${ends.from.host.id}`
      : `The old copy of ${move.database_name} on PostgreSQL server ${ends.from.pg.id}`;
    await note(move.subscription_id, `${what} was ${livesThere ? 'left: the instance lives there again' : 'dropped'}.`, audit.user_id);
  }

  /** A move back: the copy the earlier move kept is stale (the instance changed since): dropped first. */
  async function dropKept(move: SubscriptionMove, audit: Audit) {
    const earlier = await db.subscriptionMove.findFirst({
      where: { subscription_id: move.subscription_id, state: 'done', old_dropped_at: null, id: { lt: move.id } },
      orderBy: { id: 'desc' },
    });
    if (earlier) await dropOldCopy(earlier, audit);
  }

  return { note, logged, endsOf, maintenance, setSource, recordedRole, undo, dropOldCopy, dropKept };
}
