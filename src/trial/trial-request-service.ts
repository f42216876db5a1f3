// Trial requests (svc.subscription.trial.request): the REST resource, the state
// actions cancel and reset_to_new, and the creation shared by the API and the verified signup.
// (email, trial_package_id) is unique in the database; tracked fields go to the chatter.
import type { AppContext } from '../context.js';
import type { DbTx } from '../core/db.js';
import { ConflictError, NotFoundError } from '../core/errors.js';
import { jsonSafe, type ListParams, listPage, searchWhere, uniqueConflict } from '../core/records.js';
import { conditionalWrite, type Precondition } from '../core/conditional-write.js';
import { postMessage, trackChanges, trackingOf, type Author, type RecordRef } from '../core/chatter.js';
import { normalizeEmail } from '../partners/index.js';
import type { TrialRequest } from '../generated/prisma/client.js';
import type { CompanySize, TrialRequestState } from '../generated/prisma/enums.js';
import { trialJobs } from './trial-job-specs.js';
import { trialRequestModel } from './trial-models.js';

/** Company sizes as the spec and the API write them, and as the Prisma enum names them. */
export const COMPANY_SIZES = ['1-5', '6-10', '11-30', '30-100', '100+'] as const;
export type CompanySizeValue = (typeof COMPANY_SIZES)[number];
const SIZE_TO_DB: Record<CompanySizeValue, CompanySize> = {
  '1-5': 's1_5',
  '6-10': 's6_10',
  '11-30': 's11_30',
  '30-100': 's30_100',
  '100+': 's100p',
};
const SIZE_FROM_DB = Object.fromEntries(Object.entries(SIZE_TO_DB).map(([k, v]) => [v, k])) as Record<CompanySize, CompanySizeValue>;
const companySizeToDb = (size: CompanySizeValue): CompanySize => SIZE_TO_DB[size];
export const companySizeFromDb = (size: CompanySize): CompanySizeValue => SIZE_FROM_DB[size];
export const onTrialRequest = (id: number): RecordRef => ({ model_name: 'svc.subscription.trial.request', rec_id: id });

/** The API representation: company size as the spec writes it, links to partner and subscription. */
export function trialRequestView(row: TrialRequest) {
  return {
    ...jsonSafe(row),
    company_size: companySizeFromDb(row.company_size),
    links: {
      partner: row.partner_id ? `/api/v1/partners/${row.partner_id}` : null,
      subscription: row.subscription_id ? `/api/v1/subscriptions/${row.subscription_id}` : null,
    },
  };
}

const view = (r: TrialRequest) => ({ ...r, company_size: companySizeFromDb(r.company_size) });

/** The tracking message of tracked-field changes (company sizes as the spec writes them), not yet written. */
export function trialRequestTracking(before: TrialRequest | null, after: TrialRequest, author: Author | null) {
  return trackingOf(onTrialRequest(after.id), trialRequestModel.tracked, before && view(before), view(after), author);
}

/** Records tracked-field changes, with company sizes written as the spec writes them. */
export function trackTrialRequest(tx: DbTx, before: TrialRequest | null, after: TrialRequest, author: Author | null) {
  return trackChanges(tx, onTrialRequest(after.id), trialRequestModel.tracked, before && view(before), view(after), author);
}

export interface NewTrialRequest {
  name: string;
  company_name: string;
  email: string;
  mobile: string;
  company_size: CompanySizeValue;
  trial_package_id: number;
  database_template_id?: number | null;
  notes?: string | null;
}

/** Inserts a trial request inside `tx`; a duplicate (email, trial package) raises Prisma's P2002. */
export async function insertTrialRequest(tx: DbTx, data: NewTrialRequest, author: Author | null) {
  const created = await tx.trialRequest.create({
    data: { ...data, email: normalizeEmail(data.email), company_size: companySizeToDb(data.company_size) },
  });
  await trackTrialRequest(tx, null, created, author);
  return created;
}

/** Locks the request row for the rest of the transaction and returns it. */
export async function lockTrialRequest(tx: DbTx, id: number): Promise<TrialRequest> {
  const locked = await tx.$queryRaw<{ id: number }[]>`SELECT id FROM trial_requests WHERE id = ${id} FOR UPDATE`;
  if (locked.length === 0) throw new NotFoundError('Trial request');
  return tx.trialRequest.findUniqueOrThrow({ where: { id } });
}

/**
 * After a request is created: when its package has Auto Run Subscription, queue its processing.
 * A queue that cannot be reached leaves the request New with the reason in its chatter.
 */
export async function queueAutoProcessing(ctx: Pick<AppContext, 'db' | 'queues' | 'log'>, request: TrialRequest): Promise<string | null> {
  const pkg = await ctx.db.trialPackage.findUnique({ where: { id: request.trial_package_id } });
  if (!pkg?.auto_run_subscription) return null;
  try {
    return await ctx.queues.enqueue(trialJobs.process_trial_request, { trial_request_id: request.id, user_id: null });
  } catch (err) {
    ctx.log.error({ err, trial_request_id: request.id }, 'could not queue trial request processing');
    await postMessage(ctx.db, {
      model_name: 'svc.subscription.trial.request',
      rec_id: request.id,
      body: `Automatic processing could not be queued: ${(err as Error).message}. Use the action create_subscription.`,
      message_type: 'notification',
      subtype_xmlid: 'mail.mt_alert',
    });
    return null;
  }
}

/** The state actions besides processing. */
const TRIAL_REQUEST_TRANSITIONS = {
  cancel: { from: 'new', to: 'cancelled' },
  reset_to_new: { from: 'cancelled', to: 'new' },
} as const satisfies Record<string, { from: TrialRequestState; to: TrialRequestState }>;
export type TrialRequestTransition = keyof typeof TRIAL_REQUEST_TRANSITIONS;

/** Runs cancel or reset_to_new inside `tx`: row locked, state checked (409), change tracked. */
export async function transitionTrialRequest(tx: DbTx, id: number, action: TrialRequestTransition, author: Author | null) {
  const { from, to } = TRIAL_REQUEST_TRANSITIONS[action];
  const before = await lockTrialRequest(tx, id);
  if (before.state !== from) throw new ConflictError(`Trial request ${id} is ${before.state}; ${action} needs ${from}`);
  const after = await tx.trialRequest.update({ where: { id }, data: { state: to } });
  await trackTrialRequest(tx, before, after, author);
  return after;
}

type Data = Record<string, unknown>;

export function createTrialRequestService(ctx: Pick<AppContext, 'db' | 'secretBox' | 'queues' | 'log'>) {
  const { db } = ctx;

  const lockable = (id: number) => ({ table: trialRequestModel.table, id, notFound: () => new NotFoundError('Trial request') });

  async function getRow(id: number) {
    const row = await db.trialRequest.findUnique({ where: { id } });
    if (!row) throw new NotFoundError('Trial request');
    return row;
  }

  async function runAction(id: number, action: TrialRequestTransition, author: Author | null) {
    return trialRequestView(await db.$transaction((tx) => transitionTrialRequest(tx, id, action, author)));
  }

  return {
    async list(query: ListParams & Data) {
      const { limit, offset, cursor, sort, q, company_size, ...where } = query;
      if (company_size) where.company_size = companySizeToDb(company_size as CompanySizeValue);
      return listPage(
        ctx,
        db.trialRequest,
        { ...where, ...searchWhere(trialRequestModel.search, q) },
        { limit, offset, cursor },
        { table: trialRequestModel.table, resource: trialRequestModel.resource, sort: sort ?? 'id', view: trialRequestView },
      );
    },

    get: async (id: number) => trialRequestView(await getRow(id)),

    async create(data: Data, author: Author | null) {
      const request = data as unknown as NewTrialRequest;
      const created = await db
        .$transaction((tx) => insertTrialRequest(tx, request, author))
        .catch(async (err) => {
          // (email, trial package) is unique: name the request that already has them.
          const values = { email: normalizeEmail(request.email), trial_package_id: request.trial_package_id };
          throw (await uniqueConflict(db, trialRequestModel, err, values)) ?? err;
        });
      await queueAutoProcessing(ctx, created);
      return trialRequestView(created);
    },

    async update(id: number, data: Data, author: Author | null, precondition?: Precondition) {
      const patch: Data = { ...data };
      if (typeof patch.email === 'string') patch.email = normalizeEmail(patch.email);
      if (patch.company_size) patch.company_size = companySizeToDb(patch.company_size as CompanySizeValue);
      const row = await conditionalWrite(db, lockable(id), precondition, (lock) =>
        db.$transaction(async (tx) => {
          await lock(tx);
          const before = await tx.trialRequest.findUniqueOrThrow({ where: { id } });
          const after = await tx.trialRequest.update({ where: { id }, data: patch });
          await trackTrialRequest(tx, before, after, author);
          return after;
        }),
      );
      return trialRequestView(row);
    },

    async remove(id: number, precondition?: Precondition) {
      await conditionalWrite(db, lockable(id), precondition, (lock) =>
        db.$transaction(async (tx) => {
          await lock(tx);
          await tx.trialRequest.delete({ where: { id } });
        }),
      );
    },

    cancel: (id: number, author: Author | null) => runAction(id, 'cancel', author),
    reset_to_new: (id: number, author: Author | null) => runAction(id, 'reset_to_new', author),
  };
}
