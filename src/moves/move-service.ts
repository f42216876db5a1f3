// move and move_back (DESIGN §20, docs/moves.md): a running subscription's database and filestore
// go to another Odoo host and its PostgreSQL server. The filestore is copied while the instance
// runs; then a freeze (the instance shows its maintenance page, the database takes no new session
// but the administrator's), the files added and removed since, the database copied whole, the
// records switched in one transaction, and the instance answers on its new host. The old copy stays
// closed for MOVE_KEEP_DAYS. A failure before the switch leaves the instance where it was, open
// again. Between two hosts of one PostgreSQL server the database is not copied: the new host gets
// its role's credentials in the freeze, the old one loses them, and it opens again after the switch.
import type { Job } from 'bullmq';
import type { AppContext } from '../context.js';
import { authorOfUser } from '../core/chatter.js';
import { ConflictError, NotFoundError, UserError } from '../core/errors.js';
import type { JobPayload } from '../core/jobs.js';
import { publicJobId } from '../core/queue.js';
import { createDomainVerification, dnsTargetOf, hostAddresses } from '../domains/index.js';
import type { SubscriptionMove } from '../generated/prisma/client.js';
import {
  handOverToTenantRole,
  newRolePassword,
  onServer,
  removeTenantCredentials,
  tenantRoleName,
  writeTenantCredentials,
} from '../instances/index.js';
import { findDatabase, quoteIdent } from '../postgresql/index.js';
import { createDomainLookup } from '../settings/index.js';
import { lockSubscription } from '../subscriptions/index.js';
import { checkMove, type MoveEnds, type Target } from './move-checks.js';
import { type Audit, createMoveParts, sharesDatabase } from './move-parts.js';
import { copyDatabase, createTargetDatabase, sendFilestore } from './move-copy.js';
import { moveJobs } from './move-job-specs.js';

type Payload = JobPayload<typeof moveJobs.subscription_move>;

/** One run of a move's job: what its steps share (the move as last recorded). */
interface MoveRun {
  move: SubscriptionMove;
  audit: Audit;
  ends: MoveEnds;
  started: number;
  job: Job;
}

const DAY_MS = 86_400_000;
const claimOf = (moveId: number) => `move:${moveId}`;

export function createMoveService(ctx: AppContext) {
  const { db } = ctx;
  const { note, logged, endsOf, maintenance, setSource, recordedRole, undo, dropOldCopy, dropKept } = createMoveParts(ctx);
  const domains = createDomainVerification(ctx);
  const lookup = createDomainLookup(ctx);

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

  /** The empty database on the target, owned by a role of its own; `made` is told once it exists (this move's to undo). */
  async function copyTarget(move: SubscriptionMove, ends: MoveEnds, audit: Audit, made: () => void) {
    const hostRole = ends.to.host.odoo_db_user!;
    const taken = await onServer(ctx.secretBox, ends.to.pg, (q) => findDatabase(q, move.database_name));
    if (taken) throw new UserError(`PostgreSQL server ${ends.to.pg.id} already has a database named ${move.database_name}`);
    made();
    await logged(
      move,
      audit,
      `CREATE DATABASE ${quoteIdent(move.database_name)} OWNER ${quoteIdent(hostRole)} -- on ${ends.to.pg.ip}:${ends.to.pg.port}`,
      () => createTargetDatabase(ctx, ends.from.pg, ends.to.pg, move.database_name, hostRole),
    );
    return ownRoleOf(move, ends, hostRole, audit);
  }

  /**
   * Two hosts of one server, in the freeze (the database closed): the old host's Odoo no longer
   * finds the database's role (nor lists it: none of its crons runs there), the new one's does. The
   * database itself stays as it is; it opens again after the switch.
   */
  async function handOverHost(move: SubscriptionMove, ends: MoveEnds, own: { role: string; sealed: string }, audit: Audit) {
    const password = (await ctx.secretBox.reveal(own.sealed))!;
    await removeTenantCredentials(ctx, ends.from.host, move.database_name, { ...audit, operation: 'move' });
    await writeTenantCredentials(ctx, ends.to.host, move.database_name, { role: own.role, password }, { ...audit, operation: 'move' });
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
    const shared = sharesDatabase(move);
    if (shared) {
      // The same database, served by the new host now. Not opened: the move stays unfinished and the sweep finishes it.
      await setSource(move, ends, audit, 'ALLOW_CONNECTIONS true CONNECTION LIMIT -1', false).catch(async (err: Error) => {
        const body = `Moved to root server ${ends.to.host.id}, but its database could not be opened again: ${err.message} The move is finished at the next look (every 10 minutes).`;
        await note(move.subscription_id, body, audit.user_id, true);
        throw err;
      });
    } else {
      await setSource(move, ends, audit, 'ALLOW_CONNECTIONS false CONNECTION LIMIT 0', true).catch((err: Error) =>
        problems.push(`The old copy could not be closed: ${err.message}`),
      );
    }
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
      shared
        ? `The database stays where it was; its old filestore on root server ${ends.from.host.id} is kept until ${keepUntil.toISOString().slice(0, 10)} (move_back until then).`
        : `The old copy on PostgreSQL server ${ends.from.pg.id} and root server ${ends.from.host.id} is kept closed until ${keepUntil.toISOString().slice(0, 10)} (move_back until then).`,
      ...rehomed,
      ...problems,
    ].join(' ');
    await note(move.subscription_id, body, audit.user_id, problems.length > 0);
    return done;
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

  /** The job's progress and the move's step, recorded. */
  async function progress(r: MoveRun, step: string, percent: number) {
    await r.job.updateProgress({ step, percent });
    r.move = await db.subscriptionMove.update({ where: { id: r.move.id }, data: { step, job_id: r.audit.job_id } });
  }

  /** The filestore copied while the instance runs: the pass in the freeze then sends only what is new. */
  const firstPass = (r: MoveRun) =>
    logged(r.move, r.audit, `filestore of ${r.move.database_name}: first pass to root server ${r.ends.to.host.id}`, () =>
      sendFilestore(ctx, r.ends.from.host, r.ends.to.host, r.move.database_name, r.audit),
    );

  /** The maintenance page on, the source database closed to all but its administrator; answers when. */
  async function freeze(r: MoveRun) {
    const frozenAt = Date.now();
    await maintenance(r.ends.from.host, r.move.database_name, true, r.audit);
    await setSource(r.move, r.ends, r.audit, 'ALLOW_CONNECTIONS true CONNECTION LIMIT 0', true);
    return frozenAt;
  }

  /** In the freeze, the files before the database: the target's Odoo cannot have written any of its own yet. */
  const lastPass = (r: MoveRun) =>
    logged(
      r.move,
      r.audit,
      `filestore of ${r.move.database_name}: last pass to root server ${r.ends.to.host.id}, and what the old one removed`,
      () => sendFilestore(ctx, r.ends.from.host, r.ends.to.host, r.move.database_name, r.audit, { mirror: true }),
    );

  /** The database to the new host: its credentials only when both hosts share it, else the whole database copied. */
  async function moveDatabase(r: MoveRun, own: { role: string; sealed: string }) {
    const { move, ends, audit } = r;
    if (sharesDatabase(move)) return handOverHost(move, ends, own, audit);
    await logged(
      move,
      audit,
      `pg_dump -Fc ${move.database_name} | pg_restore --no-owner -d ${move.database_name} (as ${own.role} on ${ends.to.pg.ip}:${ends.to.pg.port})`,
      () => copyDatabase(ctx, ends.from.pg, ends.to.pg, { user: own.role, password: own.sealed }, move.database_name),
    );
  }

  /** A failure before the switch: what this run made goes, the source opens again, the move is failed and told. */
  async function failMove(r: MoveRun, err: Error, madeTarget: boolean) {
    const { move, ends, audit } = r;
    const message = err.message.slice(-4000);
    const left = await undo(move, ends, audit, madeTarget);
    await db.$transaction([
      db.subscriptionMove.update({
        where: { id: move.id },
        data: { state: 'failed', error: message, seconds: (Date.now() - r.started) / 1000 },
      }),
      db.subscription.updateMany({
        where: { id: move.subscription_id, operation_job_id: claimOf(move.id) },
        data: { operation: null, operation_job_id: null },
      }),
    ]);
    await note(
      move.subscription_id,
      `Move to root server ${ends.to.host.id} failed at ${move.step}; the instance stays where it was. ${message}${left.length ? ` ${left.join(' ')}` : ''}`,
      audit.user_id,
      true,
    );
  }

  /** Everything before the switch, from the start (what an earlier run made on the target goes first). */
  async function untilSwitched(r: MoveRun) {
    // Whether the target's database and filestore are this move's own (a run before a crash may have made them).
    let madeTarget = r.move.step !== 'queued';
    try {
      if (madeTarget) await undo(r.move, r.ends, r.audit, true);
      if (r.move.is_back) await dropKept(r.move, r.audit);
      await progress(r, 'copy', 5);
      madeTarget = sharesDatabase(r.move);
      const own = madeTarget ? await recordedRole(r.move) : await copyTarget(r.move, r.ends, r.audit, () => (madeTarget = true));
      await firstPass(r);
      await progress(r, 'freeze', 40);
      const frozenAt = await freeze(r);
      await lastPass(r);
      await moveDatabase(r, own);
      await progress(r, 'switch', 90);
      r.move = await switchOver(r.move, r.ends, frozenAt, own);
    } catch (err) {
      await failMove(r, err as Error, madeTarget);
      throw err;
    }
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

    /** The move's job: copy, freeze, switch (unless done before a crash), then finish. */
    async run(payload: Payload, job: Job) {
      const move = await db.subscriptionMove.findUnique({ where: { id: payload.move_id } });
      if (move?.state !== 'moving') return { move_id: payload.move_id, state: move?.state ?? 'gone' };
      const audit = { user_id: payload.user_id, job_id: publicJobId(job.queueName, job.id!) };
      const r: MoveRun = { move, audit, ends: await endsOf(move), started: Date.now(), job };
      if (!move.switched_at) await untilSwitched(r);
      const done = await finish(r.move, r.ends, audit, r.started);
      return {
        move_id: done.id,
        state: done.state,
        postgresql_server_id: r.ends.to.pg.id,
        root_server_id: r.ends.to.host.id,
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
