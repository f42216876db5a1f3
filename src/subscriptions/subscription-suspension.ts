// The immediate lifecycle actions: suspend, reactivate, extend_trial, convert_to_paid,
// and the trial expiry the lifecycle job applies. Each runs under the subscription's row lock and
// checks where it starts from; the remote change (who may connect to the database) is made inside
// that transaction, so a failure (PostgreSQL unreachable: 400) leaves the state as it was, and two
// concurrent calls cannot both move the subscription.
import type { AppContext } from '../context.js';
import type { DbTx } from '../core/db.js';
import { UserError } from '../core/errors.js';
import { trackChanges, type Author } from '../core/chatter.js';
import type { Subscription } from '../generated/prisma/client.js';
import type { SubscriptionState, SuspendReason } from '../generated/prisma/enums.js';
import { onSubscription, postNotice, type Actor } from './subscription-audit.js';
import { setConnections } from './subscription-database.js';
import { changesInstance, queueInstanceSync } from './subscription-instance-sync.js';
import { subscriptionModel } from './subscription-models.js';
import { markSuspension, supportContact, suspensionReason } from './subscription-suspension-page.js';
import { assertIdle, assertState, lockSubscription, setSubscriptionState } from './subscription-service.js';

/** The row lock is held while PostgreSQL answers (connect 10 s, statements 30 s at most). */
export const REMOTE_TX = { timeout: 60_000, maxWait: 10_000 };
const DAY_MS = 86_400_000;

/** What each suspension's action-log row names (all start with "suspend"). */
const SUSPEND_OPERATION: Record<SuspendReason, string> = {
  manual: 'suspend',
  trial_expired: 'suspend (trial expired)',
  over_limit: 'suspend (over its package limits)',
};

/** extend_trial and convert_to_paid: any state but cancelled. */
const LIVE_STATES: readonly SubscriptionState[] = ['draft', 'confirmed', 'deploying', 'running', 'suspended', 'failed'];

const trialEnded = (sub: Subscription, now = Date.now()) => sub.trial_end_date !== null && sub.trial_end_date.getTime() <= now;

export function createSuspensionService(ctx: Pick<AppContext, 'db' | 'secretBox' | 'queues' | 'log' | 'config'>) {
  const { db } = ctx;

  /** Runs `work` under the row lock; a running instance whose package fields changed is then written. */
  async function locked<T extends Subscription | null>(id: number, work: (tx: DbTx, before: Subscription) => Promise<T>): Promise<T> {
    const after = await db.$transaction(async (tx) => work(tx, await lockSubscription(tx, id)), REMOTE_TX);
    if (after?.state === 'running' && after.instance_sync_pending_at) await queueInstanceSync(ctx, id);
    return after;
  }

  /** `data` with the instance marked pending when it changes what the instance holds. */
  const withSync = (before: Subscription, data: Record<string, unknown>) =>
    changesInstance(before, data) ? { ...data, instance_sync_pending_at: new Date() } : data;

  /**
   * An instance with svc's addon stays open and answers its suspension page (see
   * subscription-suspension-page.ts); one without it, or that cannot be written, is closed.
   */
  async function closeOrMark(tx: DbTx, before: Subscription, reason: SuspendReason, actor: Actor) {
    const operation = SUSPEND_OPERATION[reason];
    const suspension = { reason: suspensionReason(before, reason), contact: await supportContact(tx) };
    const marked = await markSuspension(ctx, before, suspension, actor, operation, tx).catch((err: Error) => {
      ctx.log.warn({ err, subscription_id: before.id }, 'the suspension could not be written into the instance: closing it');
      return null;
    });
    return marked ?? (await setConnections(ctx, before, 'closed', actor, operation, tx));
  }

  async function close(tx: DbTx, before: Subscription, reason: SuspendReason, author: Author | null, actor: Actor) {
    const done = await closeOrMark(tx, before, reason, actor);
    const after = await setSubscriptionState(tx, before, 'suspended', author, {
      suspended_at: new Date(),
      suspend_reason: reason,
      trial_expired_sent_at: null,
    });
    const why = {
      trial_expired: `The trial ended (${before.trial_end_date?.toISOString()}): suspended.`,
      over_limit: `Over its package limits since ${before.usage_exceeded_since?.toISOString()}, past the grace period: suspended.`,
      manual: 'Suspended.',
    }[reason];
    await postNotice(tx, before.id, `${why} ${done}.`, author);
    return after;
  }

  /** `operation`: what reopens it, as its action-log row names it. */
  async function reopen(
    tx: DbTx,
    before: Subscription,
    author: Author | null,
    actor: Actor,
    operation: string,
    extra: Record<string, unknown>,
    why: string,
  ) {
    let done = await setConnections(ctx, before, 'open', actor, operation, tx);
    // Its addon's page lifted too (a failure keeps it suspended: the caller may try again).
    const lifted = await markSuspension(ctx, before, null, actor, operation, tx);
    if (lifted) done = `${done}; ${lifted}`;
    const after = await setSubscriptionState(tx, before, 'running', author, {
      suspended_at: null,
      suspend_reason: null,
      trial_expired_sent_at: null,
      ...extra,
    });
    await postNotice(tx, before.id, `${why} ${done}.`, author);
    return after;
  }

  /** A change of fields only (no state, nothing remote), tracked and explained. */
  async function amend(tx: DbTx, before: Subscription, data: Record<string, unknown>, author: Author | null, why: string) {
    const after = await tx.subscription.update({ where: { id: before.id }, data });
    await trackChanges(tx, onSubscription(before.id), subscriptionModel.tracked, before, after, author);
    await postNotice(tx, before.id, why, author);
    return after;
  }

  const expiredTrial = (sub: Subscription) => sub.state === 'suspended' && sub.suspend_reason === 'trial_expired';

  return {
    suspend: (id: number, author: Author, actor: Actor) =>
      locked(id, async (tx, before) => {
        assertState(before, ['running'], 'suspend');
        assertIdle(before, 'suspend');
        return close(tx, before, 'manual', author, actor);
      }),

    reactivate: (id: number, author: Author, actor: Actor) =>
      locked(id, async (tx, before) => {
        assertState(before, ['suspended'], 'reactivate');
        assertIdle(before, 'reactivate');
        // It would be suspended again by the next lifecycle run.
        if (before.is_trial && trialEnded(before)) {
          throw new UserError(
            `The trial of subscription ${id} ended on ${before.trial_end_date!.toISOString()}: use extend_trial or convert_to_paid`,
          );
        }
        return reopen(tx, before, author, actor, 'reactivate', {}, 'Reactivated.');
      }),

    /** Moves the trial end (from the later of now and the current end) and the grace end by the same amount. */
    extendTrial: (id: number, days: number, author: Author, actor: Actor) =>
      locked(id, async (tx, before) => {
        if (!before.is_trial) throw new UserError(`Subscription ${id} is not a trial (is_trial is false): only trials can be extended`);
        assertState(before, LIVE_STATES, 'extend_trial');
        const now = Date.now();
        const end = new Date(Math.max(now, before.trial_end_date?.getTime() ?? now) + days * DAY_MS);
        const grace =
          before.trial_end_date && before.grace_end_date
            ? new Date(before.grace_end_date.getTime() + (end.getTime() - before.trial_end_date.getTime()))
            : new Date(end.getTime() + before.grace_period_days * DAY_MS);
        const data = withSync(before, { trial_end_date: end, grace_end_date: grace, trial_reminder_sent_at: null });
        const why = `Trial extended by ${days} day(s): it ends ${end.toISOString()}, grace until ${grace.toISOString()}.`;
        if (!expiredTrial(before)) return amend(tx, before, data, author, why);
        assertIdle(before, 'extend_trial');
        return reopen(tx, before, author, actor, 'extend_trial (reactivate)', data, `${why} Reactivated.`);
      }),

    convertToPaid: (id: number, author: Author, actor: Actor) =>
      locked(id, async (tx, before) => {
        if (!before.is_trial) throw new UserError(`Subscription ${id} is already paid (is_trial is false)`);
        assertState(before, LIVE_STATES, 'convert_to_paid');
        const why = 'Converted to a paid subscription: the trial dates no longer apply.';
        const data = withSync(before, { is_trial: false });
        if (!expiredTrial(before)) return amend(tx, before, data, author, why);
        assertIdle(before, 'convert_to_paid');
        return reopen(tx, before, author, actor, 'convert_to_paid (reactivate)', data, `${why} Reactivated.`);
      }),

    /**
     * Enforcement of the package limits (usage round): suspends a running subscription still
     * exceeded under the lock; null when it no longer is (or is busy, or not running).
     */
    suspendOverLimit: (id: number, actor: Actor) =>
      locked(id, async (tx, before) => {
        if (before.state !== 'running' || before.operation || before.usage_state !== 'exceeded') return null;
        return close(tx, before, 'over_limit', null, actor);
      }),

    /** An over_limit suspension whose limits now allow its last usage (lifecycle run): running again. */
    liftOverLimit: (id: number, actor: Actor, why: string) =>
      locked(id, async (tx, before) => {
        if (before.state !== 'suspended' || before.suspend_reason !== 'over_limit' || before.operation) return null;
        if (before.is_trial && trialEnded(before)) return null;
        return reopen(tx, before, null, actor, 'reactivate (within its package limits again)', {}, why);
      }),

    /**
     * The trial expiry (lifecycle job): suspends a running trial whose end has passed; one already
     * suspended over its limits becomes an expired trial (its mail, then its drop, follow). Checked
     * again under the lock, so when two runs race, one acts and the other finds nothing to do (null).
     */
    expireTrial: (id: number, actor: Actor) =>
      locked(id, async (tx, before) => {
        if (!before.is_trial || before.operation || !trialEnded(before)) return null;
        if (before.state === 'running') return close(tx, before, 'trial_expired', null, actor);
        if (before.state !== 'suspended' || before.suspend_reason !== 'over_limit') return null;
        // The page of an instance that has svc's addon says the new reason (one closed has no page).
        await markSuspension(
          ctx,
          before,
          { reason: suspensionReason(before, 'trial_expired'), contact: await supportContact(tx) },
          actor,
          SUSPEND_OPERATION.trial_expired,
          tx,
        ).catch((err: Error) => ctx.log.warn({ err, subscription_id: before.id }, 'the suspension page could not be updated'));
        return amend(
          tx,
          before,
          { suspend_reason: 'trial_expired', trial_expired_sent_at: null },
          null,
          `The trial ended (${before.trial_end_date?.toISOString()}) while it was suspended over its limits: it is an expired trial now.`,
        );
      }),
  };
}
