// Subscriptions (svc.subscription): the REST resource and the state methods.
// States: draft → confirmed → deploying → running ⇄ suspended, with failed and cancelled. A state
// method locks the row, checks the state it starts from and records the change in the chatter, so
// two concurrent calls cannot both move the same subscription. While a remote operation (backup,
// restore, drop_database) holds a subscription (`operation`), its state does not change.
import type { AppContext } from '../context.js';
import type { Config } from '../core/config.js';
import type { Db, DbTx } from '../core/db.js';
import { ConflictError, NotFoundError, ValidationError } from '../core/errors.js';
import { createRecordService } from '../core/records.js';
import type { Precondition } from '../core/conditional-write.js';
import { postMessages, trackChanges, trackingOf, type Author } from '../core/chatter.js';
import type { Subscription, TrialPackage } from '../generated/prisma/client.js';
import type { SubscriptionState } from '../generated/prisma/enums.js';
import { onSubscription } from './subscription-audit.js';
import { subscriptionJobs } from './subscription-job-specs.js';
import { changesInstance, queueInstanceSync } from './subscription-instance-sync.js';
import { subscriptionModel } from './subscription-models.js';
import { refuseNoRetention } from './subscription-retention.js';
import { STANDBY_PREFIX } from '../instances/index.js';
import { assertPackageModules } from '../odoo/index.js';

type Data = Record<string, unknown>;

/** The state methods and the states each may start from. */
const SUBSCRIPTION_TRANSITIONS = {
  confirm: { from: ['draft'], to: 'confirmed' },
  cancel: { from: ['draft', 'confirmed', 'running', 'suspended', 'failed'], to: 'cancelled' },
  reset_to_draft: { from: ['cancelled', 'failed'], to: 'draft' },
} as const satisfies Record<string, { from: readonly SubscriptionState[]; to: SubscriptionState }>;
export type SubscriptionTransition = keyof typeof SUBSCRIPTION_TRANSITIONS;

/** A deployment may start from these states (a failed one can be deployed again). */
export const DEPLOYABLE_STATES: readonly SubscriptionState[] = ['confirmed', 'failed'];
/**
 * Where the database is (its name, and the template that says its server) must not change while it
 * is being created or while a database the deployment created exists: every database operation
 * finds it there, and moving the name would point them at somebody else's database.
 */
function databaseBound(sub: Subscription): boolean {
  return sub.state === 'deploying' || sub.database_created_at !== null;
}

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

/** No other remote operation may start, and the state may not change, while one holds the subscription. */
export function assertIdle(sub: Subscription, action: string) {
  if (sub.operation) {
    throw new ConflictError(
      `Subscription ${sub.id} is ${sub.state} with ${sub.operation} running (job ${sub.operation_job_id}); ${action} must wait until it ends`,
    );
  }
}

/** The address of the customer's instance (SUBSCRIPTION_URL); null without a database. */
export function subscriptionUrl(
  config: Pick<Config, 'SUBSCRIPTION_URL'>,
  sub: { database_name: string | null; database_dropped_at: unknown },
) {
  if (!sub.database_name || sub.database_dropped_at) return null;
  return config.SUBSCRIPTION_URL.replaceAll('{database_name}', sub.database_name);
}

/** Moves a subscription to a new state inside `tx`, tracked in its chatter. */
export async function setSubscriptionState(
  tx: DbTx,
  before: Subscription,
  state: SubscriptionState,
  author: Author | null,
  extra: Data = {},
) {
  const after = await tx.subscription.update({ where: { id: before.id }, data: { ...extra, state } });
  await trackChanges(tx, onSubscription(before.id), subscriptionModel.tracked, before, after, author);
  return after;
}

/** Runs one of the state methods of SUBSCRIPTION_TRANSITIONS inside `tx`. */
export async function transitionSubscription(tx: DbTx, id: number, action: SubscriptionTransition, author: Author | null) {
  const { from, to } = SUBSCRIPTION_TRANSITIONS[action];
  const before = await lockSubscription(tx, id);
  assertState(before, from, action);
  assertIdle(before, action);
  return setSubscriptionState(tx, before, to, author);
}

/** A database name PostgreSQL accepts unquoted: company slug and subscription id. */
function databaseNameFor(companyName: string, id: number): string {
  const slug = companyName
    .normalize('NFKD')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '')
    .slice(0, 40);
  // svc_standby_… is the standby pool's namespace: a company named "SVC Standby 1" gets db_svc_standby_1_<id>.
  const base = slug === '' ? 'db' : /^[a-z]/.test(slug) && !`${slug}_`.startsWith(STANDBY_PREFIX) ? slug : `db_${slug}`;
  return `${base}_${id}`;
}

const DAY_MS = 86_400_000;

/** The modules and the template of a subscription as it will be written. */
const packagesOf = (sub: Data) => ({
  packages: (sub.packages as string[] | undefined) ?? [],
  database_template_id: (sub.database_template_id as number | null | undefined) ?? null,
});

/**
 * The id the next subscription will have, taken from its sequence outside any transaction (a
 * number a rolled-back transaction leaves unused is a gap, nothing more): the row is then written
 * with its database name in one INSERT.
 */
export async function reserveSubscriptionId(db: Db | DbTx): Promise<number> {
  const [row] = await db.$queryRaw<{ id: number }[]>`SELECT nextval(pg_get_serial_sequence('subscriptions', 'id'))::int AS id`;
  return row!.id;
}

/**
 * Creates a confirmed trial subscription for `partner` from what the trial package supplies
 * (packages, limits, trial duration, grace period, model limits, backup retention): one INSERT and
 * its chatter (created as a draft, then confirmed) in two more statements, so a caller's
 * transaction stays short. `id`: one reserveSubscriptionId gave, else one is taken here.
 */
export async function createTrialSubscription(
  tx: DbTx,
  input: { partnerId: number; companyName: string; pkg: TrialPackage; databaseTemplateId: number; author: Author | null; id?: number },
) {
  const { pkg } = input;
  const id = input.id ?? (await reserveSubscriptionId(tx));
  const trialEnd = new Date(Date.now() + pkg.trial_duration_days * DAY_MS);
  const created = await tx.subscription.create({
    data: {
      id,
      name: `${input.companyName} (trial)`,
      partner_id: input.partnerId,
      is_trial: true,
      state: 'confirmed',
      packages: pkg.packages,
      user_limit: pkg.user_limit,
      storage_limit_gb: pkg.storage_limit_gb,
      stage_limit: pkg.stage_limit,
      trial_duration_days: pkg.trial_duration_days,
      grace_period_days: pkg.grace_period_days,
      model_limits: pkg.model_limits ?? {},
      backup_keep_daily: pkg.backup_keep_daily,
      backup_keep_weekly: pkg.backup_keep_weekly,
      backup_keep_monthly: pkg.backup_keep_monthly,
      trial_end_date: trialEnd,
      grace_end_date: new Date(trialEnd.getTime() + pkg.grace_period_days * DAY_MS),
      database_template_id: input.databaseTemplateId,
      database_name: databaseNameFor(input.companyName, id),
    },
  });
  const draft = { ...created, state: 'draft' as const };
  const track = (before: Subscription | null, after: Subscription) =>
    trackingOf(onSubscription(id), subscriptionModel.tracked, before, after, input.author);
  await postMessages(tx, [track(null, draft), track(draft, created)]);
  return created;
}

/** A date as stored (Date) or as sent (ISO string), in milliseconds; null when unset. */
const time = (v: unknown) => (v === null || v === undefined ? null : v instanceof Date ? v.getTime() : Date.parse(String(v)));

/**
 * The rules of a PATCH, on the locked row (the lifecycle claims rows with conditional updates
 * meanwhile): a live database stays where it is, a new trial end gets its own reminder, and the
 * grace period does not end before the trial, and some backups are kept.
 */
async function prepareSubscriptionUpdate(tx: DbTx, row: Record<string, unknown>, data: Data): Promise<Data> {
  const before = row as unknown as Subscription;
  refuseNoRetention(row, data);
  const moves: string[] = (['database_name', 'database_template_id'] as const).filter((f) => f in data && data[f] !== before[f]);
  // Its modules are those its instance was deployed with: svc installs none into a live database.
  if (Array.isArray(data.packages) && [...data.packages].sort().join() !== [...before.packages].sort().join()) moves.push('packages');
  if (moves.length > 0 && databaseBound(before)) {
    throw new ConflictError(`The database of subscription ${before.id} exists: ${moves.join(' and ')} cannot change until it is dropped`, {
      fields: moves.map((field) => ({ field, message: 'the database exists' })),
    });
  }
  if (moves.length > 0) await assertPackageModules(tx, packagesOf({ ...before, ...data }));
  const next: Data = { ...data };
  if (changesInstance(before, data)) next.instance_sync_pending_at = new Date();
  if ('trial_end_date' in data && time(before.trial_end_date) !== time(data.trial_end_date)) next.trial_reminder_sent_at = null;
  const trialEnd = time('trial_end_date' in data ? data.trial_end_date : before.trial_end_date);
  const graceEnd = time('grace_end_date' in data ? data.grace_end_date : before.grace_end_date);
  if (trialEnd !== null && graceEnd !== null && graceEnd < trialEnd) {
    throw new ValidationError('grace_end_date cannot be before trial_end_date', [
      { field: 'grace_end_date', message: 'must not be before trial_end_date' },
    ]);
  }
  return next;
}

export function createSubscriptionService(ctx: Pick<AppContext, 'db' | 'secretBox' | 'queues' | 'config' | 'log'>) {
  const records = createRecordService(ctx, subscriptionModel, {
    prepareUpdate: prepareSubscriptionUpdate,
    async prepareCreate(tx, data) {
      refuseNoRetention(null, data);
      await assertPackageModules(tx, packagesOf(data));
      return data;
    },
  });
  /** The answer: the row and the instance's address. */
  const withUrl = (out: Data) => ({
    ...out,
    url: subscriptionUrl(ctx.config, out as { database_name: string | null; database_dropped_at: unknown }),
  });
  const view = (row: Subscription) => withUrl(records.toOutput(row));

  const run = (id: number, action: SubscriptionTransition, author: Author | null) =>
    ctx.db.$transaction((tx) => transitionSubscription(tx, id, action, author)).then(view);

  return {
    ...records,
    view,
    async list(query: Parameters<typeof records.list>[0]) {
      const page = await records.list(query);
      return { ...page, items: page.items.map(withUrl) };
    },
    get: async (id: number) => withUrl(await records.get(id)),
    create: async (data: Data, author: Author | null) => withUrl(await records.create(data, author)),

    async update(id: number, data: Data, author: Author | null = null, precondition?: Precondition) {
      const out = await records.update(id, data, author, precondition);
      if (out.instance_sync_pending_at && out.state === 'running') await queueInstanceSync(ctx, id);
      return withUrl(out);
    },

    confirm: (id: number, author: Author | null) => run(id, 'confirm', author),
    cancel: (id: number, author: Author | null) => run(id, 'cancel', author),
    reset_to_draft: (id: number, author: Author | null) => run(id, 'reset_to_draft', author),

    /** Queues the deployment job (the job itself moves the state); answers its public id. */
    async deploy(id: number, userId: number | null): Promise<string> {
      const sub = await ctx.db.subscription.findUnique({ where: { id } });
      if (!sub) throw new NotFoundError('Subscription');
      assertState(sub, DEPLOYABLE_STATES, 'deploy');
      return ctx.queues.enqueue(subscriptionJobs.deploy_subscription, { subscription_id: id, user_id: userId });
    },
  };
}
