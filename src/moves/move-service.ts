// move and move_back (DESIGN §20, docs/moves.md): a running subscription's database and filestore
// go to another Odoo host and its PostgreSQL server. The filestore is copied while the instance
// runs; then a freeze (the instance shows its maintenance page, the database takes no new session
// but the administrator's), the database copied whole and the files added since, the records
// switched in one transaction, and the instance answers on its new host. The old copy stays closed
// for MOVE_KEEP_DAYS. A failure before the switch leaves the instance where it was, open again.
import type { Job } from 'bullmq';
import type { AppContext } from '../context.js';
import { authorOfUser } from '../core/chatter.js';
import { ConflictError, NotFoundError, UserError } from '../core/errors.js';
import { publicJobId } from '../core/queue.js';
import { createDomainVerification, dnsTargetOf, hostAddresses } from '../domains/index.js';
import type { SubscriptionMove } from '../generated/prisma/client.js';
import {
  basePathOf,
  createFilestores,
  dropDatabaseAndItsRole,
  handOverToTenantRole,
  newRolePassword,
  onServer,
  type Query,
  removeTenantCredentials,
  runOnOdooHost,
  tenantRoleName,
  writeTenantCredentials,
} from '../instances/index.js';
import { odooLayout } from '../odoo/index.js';
import { findDatabase, quoteIdent } from '../postgresql/index.js';
import { setMaintenance } from '../rollouts/index.js';
import { createDomainLookup } from '../settings/index.js';
import { databaseStep, lockSubscription, postAlert, postNotice } from '../subscriptions/index.js';
import { checkMove, type MoveEnds, type Target } from './move-checks.js';
import { copyDatabase, createTargetDatabase, sendFilestore } from './move-copy.js';
import { moveJobs } from './move-job-specs.js';

type Payload = { move_id: number; user_id: number | null };
type Audit = { user_id: number | null; job_id: string };

const DAY_MS = 86_400_000;
const claimOf = (moveId: number) => `move:${moveId}`;

export function createMoveService(ctx: AppContext) {
  const { db } = ctx;
  const filestores = createFilestores(ctx);
  const domains = createDomainVerification(ctx);
  const lookup = createDomainLookup(ctx);

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
        const { rows } = await q(
          'SELECT count(pg_catalog.pg_terminate_backend(pid))::int AS n FROM pg_catalog.pg_stat_activity WHERE datname = $1 AND pid <> pg_catalog.pg_backend_pid()',
          [move.database_name],
        );
        return `${options}; ${rows[0]!.n} session(s) ended`;
      }),
    );
  };

  /**
   * Takes away what a run made on the target (database, filestore: only when it made them, and never
   * a database a subscription records as its own) and opens the source again.
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
    if (madeTarget) {
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
      await attempt('Removing the filestore copy', () =>
        filestores.remove(ends.to.host, move.database_name, { ...audit, operation: 'move' }),
      );
      await attempt("Removing the copy's credentials file", () =>
        removeTenantCredentials(ctx, ends.to.host, move.database_name, { ...audit, operation: 'move' }),
      );
    }
    await attempt('Opening the database again', () => setSource(move, ends, audit, 'ALLOW_CONNECTIONS true CONNECTION LIMIT -1', false));
    await attempt('Clearing the maintenance flag', () => maintenance(ends.from.host, move.database_name, false, audit));
    return done;
  }

  /** A move back: the copy the earlier move kept is stale (the instance changed since): dropped first. */
  async function dropKept(move: SubscriptionMove, audit: Audit) {
    const earlier = await db.subscriptionMove.findFirst({
      where: { subscription_id: move.subscription_id, state: 'done', old_dropped_at: null, id: { lt: move.id } },
      orderBy: { id: 'desc' },
    });
    if (earlier) await dropOldCopy(earlier, audit);
  }

  /**
   * The empty copy on the target gets a role of its own (instances' tenant-role.ts) before anything is
   * restored into it, so the restore writes every object as that role; the target host's Odoo finds
   * it in the copy's credentials file. The subscription records it at the switch.
   */
  async function ownRoleOf(move: SubscriptionMove, ends: MoveEnds, from: string, audit: Audit) {
    const found = await onServer(ctx.secretBox, ends.to.pg, (q) => findDatabase(q, move.database_name));
    if (!found) throw new UserError(`The copy ${move.database_name} is not on ${ends.to.pg.ip}:${ends.to.pg.port}`);
    const password = newRolePassword();
    const role = tenantRoleName(found);
    await logged(move, audit, `${move.database_name} owned by its own role ${role} -- on ${ends.to.pg.ip}:${ends.to.pg.port}`, () =>
      handOverToTenantRole(ctx.secretBox, ends.to.pg, { name: move.database_name, ...found }, from, password),
    );
    await writeTenantCredentials(ctx, ends.to.host, move.database_name, { role, password }, { ...audit, operation: 'move' });
    return { role, sealed: await ctx.secretBox.encrypt(password) };
  }

  async function switchOver(move: SubscriptionMove, ends: MoveEnds, frozenAt: number, own: { role: string; sealed: string }) {
    const identity = await onServer(ctx.secretBox, ends.to.pg, (q) => findDatabase(q, move.database_name));
    if (!identity) throw new UserError(`The copy ${move.database_name} is not on ${ends.to.pg.ip}:${ends.to.pg.port}`);
    return db.$transaction(async (tx) => {
      const before = await lockSubscription(tx, move.subscription_id);
      if (before.operation_job_id !== claimOf(move.id))
        throw new UserError(`Subscription ${before.id} is no longer held by move ${move.id}`);
      await tx.subscription.update({
        where: { id: before.id },
        data: {
          postgresql_server_id: ends.to.pg.id,
          root_server_id: ends.to.host.id,
          database_system_identifier: identity.systemIdentifier,
          database_oid: identity.oid,
          database_role: own.role,
          database_role_password: own.sealed,
        },
      });
      return tx.subscriptionMove.update({
        where: { id: move.id },
        data: {
          step: 'switched',
          switched_at: new Date(),
          freeze_seconds: (Date.now() - frozenAt) / 1000,
          from_system_identifier: before.database_system_identifier,
          from_database_oid: before.database_oid,
        },
      });
    });
  }

  /** After the switch: the old copy closed, the domains sent to the new host, the claim ended. Each is told, none undoes the move. */
  async function finish(move: SubscriptionMove, ends: MoveEnds, audit: Audit, started: number) {
    const problems: string[] = [];
    await setSource(move, ends, audit, 'ALLOW_CONNECTIONS false CONNECTION LIMIT 0', true).catch((err: Error) =>
      problems.push(`The old copy could not be closed: ${err.message}`),
    );
    let dnsTarget = `A/AAAA: the addresses of ${ends.to.host.ip}`;
    dnsTarget = await hostAddresses(lookup, ends.to.host, {
      model_name: 'svc.root.server',
      rec_id: ends.to.host.id,
      user_id: audit.user_id,
    })
      .then(dnsTargetOf)
      .catch(() => dnsTarget);
    const author = await authorOfUser(db, audit.user_id);
    const rehomed = await domains
      .rehome(move.subscription_id, dnsTarget, { userId: audit.user_id, jobId: audit.job_id, author })
      .catch((err: Error) => [`Its domains could not be moved: ${err.message}`]);
    const keepUntil = new Date(Date.now() + ctx.config.MOVE_KEEP_DAYS * DAY_MS);
    const seconds = (Date.now() - started) / 1000;
    const done = await db.$transaction(async (tx) => {
      await tx.subscription.updateMany({
        where: { id: move.subscription_id, operation_job_id: claimOf(move.id) },
        data: { operation: null, operation_job_id: null },
      });
      return tx.subscriptionMove.update({
        where: { id: move.id },
        data: { state: 'done', step: 'done', keep_until: keepUntil, seconds: move.seconds ?? seconds, error: problems.join(' ') || null },
      });
    });
    const body = [
      `Moved to root server ${ends.to.host.id} and PostgreSQL server ${ends.to.pg.id} (closed for ${done.freeze_seconds!.toFixed(1)} s).`,
      `The old copy on PostgreSQL server ${ends.from.pg.id} and root server ${ends.from.host.id} is kept closed until ${keepUntil.toISOString().slice(0, 10)} (move_back until then).`,
      ...rehomed,
      ...problems,
    ].join(' ');
    await note(move.subscription_id, body, audit.user_id, problems.length > 0);
    return done;
  }

  /** Drops a done move's old copy (database by identity, filestore, maintenance flag). */
  async function dropOldCopy(move: SubscriptionMove, audit: Audit) {
    const ends = await endsOf(move);
    const drop = `DROP DATABASE ${quoteIdent(move.database_name)} WITH (FORCE)`;
    await logged(move, audit, `${drop} -- the old copy on ${ends.from.pg.ip}:${ends.from.pg.port}`, () =>
      onServer(ctx.secretBox, ends.from.pg, async (q) => {
        const found = await findDatabase(q, move.database_name);
        if (!found) return 'already gone';
        if (found.oid !== move.from_database_oid || found.systemIdentifier !== move.from_system_identifier) {
          return `left: the database named ${move.database_name} there now is not the old copy`;
        }
        await dropDatabaseAndItsRole(q, move.database_name);
        return 'dropped';
      }),
    );
    await filestores.remove(ends.from.host, move.database_name, { ...audit, operation: 'move' });
    await removeTenantCredentials(ctx, ends.from.host, move.database_name, { ...audit, operation: 'move' });
    await maintenance(ends.from.host, move.database_name, false, audit);
    await db.subscriptionMove.update({ where: { id: move.id }, data: { old_dropped_at: new Date() } });
    await note(
      move.subscription_id,
      `The old copy of ${move.database_name} on PostgreSQL server ${ends.from.pg.id} was dropped.`,
      audit.user_id,
    );
  }

  /** Records the move and claims the subscription for it (nothing else runs on it meanwhile), then queues the job. */
  async function start(id: number, target: Target, userId: number | null, back: SubscriptionMove | null) {
    const { sub, ends } = await checkMove(ctx, id, target, userId, back);
    const move = await db.$transaction(async (tx) => {
      const locked = await lockSubscription(tx, id);
      if (locked.state !== 'running' || locked.operation)
        throw new ConflictError(`Subscription ${id} changed meanwhile (${locked.state}${locked.operation ? `, ${locked.operation}` : ''})`);
      const row = await tx.subscriptionMove.create({
        data: {
          subscription_id: id,
          is_back: back !== null,
          database_name: sub.database_name,
          from_postgresql_server_id: ends.from.pg.id,
          from_root_server_id: ends.from.host.id,
          to_postgresql_server_id: ends.to.pg.id,
          to_root_server_id: ends.to.host.id,
        },
      });
      await tx.subscription.update({ where: { id }, data: { operation: 'move', operation_job_id: claimOf(row.id) } });
      return row;
    });
    await note(id, `${back ? 'Move back' : 'Move'} to root server ${ends.to.host.id} (PostgreSQL server ${ends.to.pg.id}) queued.`, userId);
    return ctx.queues.enqueue(moveJobs.subscription_move, { move_id: move.id, user_id: userId });
  }

  const service = {
    request: (id: number, target: Target, userId: number | null) => start(id, target, userId, null),

    /** Back to where the last move took it from, while that move's old copy is kept. */
    async requestBack(id: number, userId: number | null) {
      const last = await db.subscriptionMove.findFirst({ where: { subscription_id: id }, orderBy: { id: 'desc' } });
      if (!last) {
        if (!(await db.subscription.findUnique({ where: { id }, select: { id: true } }))) throw new NotFoundError('Subscription');
        throw new ConflictError(`Subscription ${id} was never moved: there is nothing to move back to`);
      }
      if (last.state !== 'done' || last.old_dropped_at) {
        throw new ConflictError(
          `The last move of subscription ${id} is ${last.old_dropped_at ? 'past its keep period (its old copy was dropped)' : last.state}: there is nothing to move back to`,
        );
      }
      return start(id, { root_server_id: last.from_root_server_id }, userId, last);
    },

    async list(id: number) {
      if (!(await db.subscription.findUnique({ where: { id }, select: { id: true } }))) throw new NotFoundError('Subscription');
      return db.subscriptionMove.findMany({ where: { subscription_id: id }, orderBy: { id: 'desc' } });
    },

    async run(payload: Payload, job: Job) {
      let move = await db.subscriptionMove.findUnique({ where: { id: payload.move_id } });
      if (move?.state !== 'moving') return { move_id: payload.move_id, state: move?.state ?? 'gone' };
      const audit = { user_id: payload.user_id, job_id: publicJobId(job.queueName, job.id!) };
      const ends = await endsOf(move);
      const started = Date.now();
      const step = async (name: string, percent: number) => {
        await job.updateProgress({ step: name, percent });
        move = await db.subscriptionMove.update({ where: { id: move!.id }, data: { step: name, job_id: audit.job_id } });
      };
      if (!move.switched_at) {
        // Whether the target's database and filestore are this move's own (a run before a crash may have made them).
        let madeTarget = move.step !== 'queued';
        try {
          if (madeTarget) await undo(move, ends, audit, true);
          if (move.is_back) await dropKept(move, audit);
          await step('copy', 5);
          const role = { user: ends.to.host.odoo_db_user!, password: ends.to.host.odoo_db_password };
          madeTarget = false;
          const taken = await onServer(ctx.secretBox, ends.to.pg, (q) => findDatabase(q, move!.database_name));
          if (taken) throw new UserError(`PostgreSQL server ${ends.to.pg.id} already has a database named ${move.database_name}`);
          madeTarget = true;
          await logged(
            move,
            audit,
            `CREATE DATABASE ${quoteIdent(move.database_name)} OWNER ${quoteIdent(role.user)} -- on ${ends.to.pg.ip}:${ends.to.pg.port}`,
            () => createTargetDatabase(ctx, ends.from.pg, ends.to.pg, move!.database_name, role.user),
          );
          const own = await ownRoleOf(move, ends, role.user, audit);
          const restoreAs = { user: own.role, password: own.sealed };
          await logged(move, audit, `filestore of ${move.database_name}: first pass to root server ${ends.to.host.id}`, () =>
            sendFilestore(ctx, ends.from.host, ends.to.host, move!.database_name, audit),
          );
          await step('freeze', 40);
          const frozenAt = Date.now();
          await maintenance(ends.from.host, move.database_name, true, audit);
          await setSource(move, ends, audit, 'ALLOW_CONNECTIONS true CONNECTION LIMIT 0', true);
          await logged(
            move,
            audit,
            `pg_dump -Fc ${move.database_name} | pg_restore --no-owner -d ${move.database_name} (as ${restoreAs.user} on ${ends.to.pg.ip}:${ends.to.pg.port})`,
            () => copyDatabase(ctx, ends.from.pg, ends.to.pg, restoreAs, move!.database_name),
          );
          await logged(move, audit, `filestore of ${move.database_name}: last pass to root server ${ends.to.host.id}`, () =>
            sendFilestore(ctx, ends.from.host, ends.to.host, move!.database_name, audit),
          );
          await step('switch', 90);
          move = await switchOver(move, ends, frozenAt, own);
        } catch (err) {
          const message = (err as Error).message.slice(-4000);
          const left = await undo(move, ends, audit, madeTarget);
          await db.$transaction([
            db.subscriptionMove.update({
              where: { id: move.id },
              data: { state: 'failed', error: message, seconds: (Date.now() - started) / 1000 },
            }),
            db.subscription.updateMany({
              where: { id: move.subscription_id, operation_job_id: claimOf(move.id) },
              data: { operation: null, operation_job_id: null },
            }),
          ]);
          await note(
            move.subscription_id,
            `Move to root server ${ends.to.host.id} failed at ${move.step}; the instance stays where it was. ${message}${left.length ? ` ${left.join(' ')}` : ''}`,
            payload.user_id,
            true,
          );
          throw err;
        }
      }
      const done = await finish(move, ends, audit, started);
      return {
        move_id: done.id,
        state: done.state,
        postgresql_server_id: ends.to.pg.id,
        root_server_id: ends.to.host.id,
        freeze_seconds: done.freeze_seconds,
        seconds: done.seconds,
        keep_until: done.keep_until?.toISOString() ?? null,
      };
    },

    /**
     * Every few minutes: a move still `moving` is queued again (a no-op while its job waits or runs:
     * its id is the move's; it runs again when Redis lost it, so the subscription is never left
     * claimed), and the old copies past their keep period are dropped.
     */
    async sweep(job: Job) {
      const audit = { user_id: null, job_id: publicJobId(job.queueName, job.id!) };
      const moving = await db.subscriptionMove.findMany({ where: { state: 'moving' }, select: { id: true } });
      for (const m of moving) await ctx.queues.enqueue(moveJobs.subscription_move, { move_id: m.id, user_id: null });
      const due = await db.subscriptionMove.findMany({ where: { state: 'done', old_dropped_at: null, keep_until: { lte: new Date() } } });
      const dropped: string[] = [];
      for (const move of due) {
        await dropOldCopy(move, audit);
        dropped.push(`${move.database_name}@${move.from_postgresql_server_id}`);
      }
      return { requeued: moving.map((m) => m.id), dropped };
    },
  };
  return service;
}
