// Subscriptions (svc.subscription, DESIGN §6): the REST resource and the state methods.
// States: draft → confirmed → deploying → running, with failed and cancelled. A state method
// locks the row, checks the state it starts from and records the change in the chatter, so two
// concurrent calls cannot both move the same subscription.
import type { AppContext } from '../context.js';
import type { DbTx } from '../core/db.js';
import { ConflictError, NotFoundError } from '../core/errors.js';
import { createRecordService } from '../core/records.js';
import { trackChanges, type Author } from '../chatter/chatter-service.js';
import type { Subscription, TrialPackage } from '../generated/prisma/client.js';
import type { SubscriptionState } from '../generated/prisma/enums.js';

type Data = Record<string, unknown>;

export const SUBSCRIPTION_MODEL = 'svc.subscription';
export const SUBSCRIPTION_TRACKED = [
  'name',
  'partner_id',
  'state',
  'database_name',
  'database_template_id',
  'backup_server_id',
  'trial_end_date',
  'grace_end_date',
] as const;

/** The state methods and the states each may start from. */
export const SUBSCRIPTION_TRANSITIONS = {
  confirm: { from: ['draft'], to: 'confirmed' },
  cancel: { from: ['draft', 'confirmed', 'running', 'failed'], to: 'cancelled' },
  reset_to_draft: { from: ['cancelled', 'failed'], to: 'draft' },
} as const satisfies Record<string, { from: readonly SubscriptionState[]; to: SubscriptionState }>;
export type SubscriptionTransition = keyof typeof SUBSCRIPTION_TRANSITIONS;

/** A deployment may start from these states (a failed one can be deployed again). */
export const DEPLOYABLE_STATES: readonly SubscriptionState[] = ['confirmed', 'failed'];
/** While the database exists or is being created, its name must not change. */
const DATABASE_BOUND_STATES: readonly SubscriptionState[] = ['deploying', 'running'];

/** Locks the subscription row for the rest of the transaction and returns it. */
export async function lockSubscription(tx: DbTx, id: number): Promise<Subscription> {
  const locked = await tx.$queryRaw<{ id: number }[]>`SELECT id FROM subscriptions WHERE id = ${id} FOR UPDATE`;
  if (locked.length === 0) throw new NotFoundError('Subscription');
  return tx.subscription.findUniqueOrThrow({ where: { id } });
}

export function assertState(sub: Subscription, allowed: readonly SubscriptionState[], action: string) {
  if (!allowed.includes(sub.state)) {
    throw new ConflictError(`Subscription ${sub.id} is ${sub.state}; ${action} needs ${allowed.join(' or ')}`);
  }
}

/** Moves a subscription to a new state inside `tx`, tracked in its chatter. */
export async function setSubscriptionState(tx: DbTx, before: Subscription, state: SubscriptionState, author: Author | null, extra: Data = {}) {
  const after = await tx.subscription.update({ where: { id: before.id }, data: { ...extra, state } });
  await trackChanges(tx, { model_name: SUBSCRIPTION_MODEL, rec_id: before.id }, SUBSCRIPTION_TRACKED, before, after, author);
  return after;
}

/** Runs one of the state methods of SUBSCRIPTION_TRANSITIONS inside `tx`. */
export async function transitionSubscription(tx: DbTx, id: number, action: SubscriptionTransition, author: Author | null) {
  const { from, to } = SUBSCRIPTION_TRANSITIONS[action];
  const before = await lockSubscription(tx, id);
  assertState(before, from, action);
  return setSubscriptionState(tx, before, to, author);
}

/** A database name PostgreSQL accepts unquoted: company slug and subscription id. */
export function databaseNameFor(companyName: string, id: number): string {
  const slug = companyName
    .normalize('NFKD')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '')
    .slice(0, 40);
  const base = slug === '' ? 'db' : /^[a-z]/.test(slug) ? slug : `db_${slug}`;
  return `${base}_${id}`;
}

const DAY_MS = 86_400_000;

/**
 * Creates a confirmed trial subscription for `partner` from what the trial package supplies
 * (spec §4.3): packages, limits, trial duration, grace period, model limits.
 */
export async function createTrialSubscription(
  tx: DbTx,
  input: { partnerId: number; companyName: string; pkg: TrialPackage; databaseTemplateId: number; author: Author | null },
) {
  const { pkg } = input;
  const trialEnd = new Date(Date.now() + pkg.trial_duration_days * DAY_MS);
  const created = await tx.subscription.create({
    data: {
      name: `${input.companyName} (trial)`,
      partner_id: input.partnerId,
      is_trial: true,
      state: 'draft',
      packages: pkg.packages,
      user_limit: pkg.user_limit,
      storage_limit_gb: pkg.storage_limit_gb,
      stage_limit: pkg.stage_limit,
      trial_duration_days: pkg.trial_duration_days,
      grace_period_days: pkg.grace_period_days,
      model_limits: pkg.model_limits ?? {},
      trial_end_date: trialEnd,
      grace_end_date: new Date(trialEnd.getTime() + pkg.grace_period_days * DAY_MS),
      database_template_id: input.databaseTemplateId,
    },
  });
  const named = await tx.subscription.update({
    where: { id: created.id },
    data: { database_name: databaseNameFor(input.companyName, created.id) },
  });
  await trackChanges(tx, { model_name: SUBSCRIPTION_MODEL, rec_id: created.id }, SUBSCRIPTION_TRACKED, null, named, input.author);
  return setSubscriptionState(tx, named, 'confirmed', input.author);
}

export type SubscriptionService = ReturnType<typeof createSubscriptionService>;

export function createSubscriptionService(ctx: Pick<AppContext, 'db' | 'box' | 'queues'>) {
  const records = createRecordService(ctx.db, ctx.box, { modelName: SUBSCRIPTION_MODEL, tracked: SUBSCRIPTION_TRACKED });

  const run = (id: number, action: SubscriptionTransition, author: Author | null) =>
    ctx.db.$transaction((tx) => transitionSubscription(tx, id, action, author)).then(records.toOutput);

  return {
    ...records,

    async update(id: number, data: Data, author: Author | null = null) {
      if ('database_name' in data) {
        const current = await records.getRow(id);
        if (current.database_name !== data.database_name && DATABASE_BOUND_STATES.includes(current.state as SubscriptionState)) {
          throw new ConflictError(`The database name cannot change while the subscription is ${String(current.state)}`);
        }
      }
      return records.update(id, data, author);
    },

    confirm: (id: number, author: Author | null) => run(id, 'confirm', author),
    cancel: (id: number, author: Author | null) => run(id, 'cancel', author),
    reset_to_draft: (id: number, author: Author | null) => run(id, 'reset_to_draft', author),

    /** Queues the deployment job (the job itself moves the state); answers its public id. */
    async deploy(id: number, userId: number | null): Promise<string> {
      const sub = await ctx.db.subscription.findUnique({ where: { id } });
      if (!sub) throw new NotFoundError('Subscription');
      assertState(sub, DEPLOYABLE_STATES, 'deploy');
      return ctx.queues.enqueue('deploy_subscription', { subscription_id: id, user_id: userId });
    },
  };
}
