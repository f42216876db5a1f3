// A backup, restore or drop of a subscription's database claims the subscription first
// (`operation`, set under the row lock from the states it needs), so only one runs at a time and
// the state does not change meanwhile; the claim is released at the end, on failure too, and only
// by the job that holds it.
import type { Db, DbTx } from '../core/db.js';
import { ConflictError, NotFoundError } from '../core/errors.js';
import type { Subscription } from '../generated/prisma/client.js';
import type { SubscriptionOperation, SubscriptionState } from '../generated/prisma/enums.js';
import { assertOwnDatabase } from './subscription-database.js';
import { assertIdle, assertState, lockSubscription } from './subscription-service.js';

/** An operation on the database the deployment created (a deployment claims in subscription-deployment.ts). */
type DatabaseOperation = Exclude<SubscriptionOperation, 'deploy'>;

/** The states each operation may start from: the database exists (a cancelled one keeps it until dropped). */
const OPERABLE_STATES: Record<DatabaseOperation, readonly SubscriptionState[]> = {
  backup: ['running', 'suspended', 'cancelled'],
  restore: ['running'],
  drop_database: ['suspended', 'cancelled'],
  move: ['running'],
};

/** The checks an operation starts with, at the API (a quick 409/400) and again when its job claims the row. */
function assertOperable(sub: Subscription, operation: DatabaseOperation) {
  assertState(sub, OPERABLE_STATES[operation], operation);
  assertIdle(sub, operation);
  if (sub.database_dropped_at) {
    throw new ConflictError(`The database of subscription ${sub.id} was dropped on ${sub.database_dropped_at.toISOString()}`);
  }
  assertOwnDatabase(sub);
}

/** The API's check before the job is queued; answers the subscription. */
export async function checkOperable(db: Db, id: number, operation: DatabaseOperation): Promise<Subscription> {
  const sub = await db.subscription.findUnique({ where: { id } });
  if (!sub) throw new NotFoundError('Subscription');
  assertOperable(sub, operation);
  return sub;
}

/** The job's claim, with `extra` fields set in the same update. */
export function claimSubscription(db: Db, id: number, operation: DatabaseOperation, jobId: string | null, extra = {}) {
  return db.$transaction(async (tx) => {
    const before = await lockSubscription(tx, id);
    assertOperable(before, operation);
    return tx.subscription.update({ where: { id }, data: { operation, operation_job_id: jobId, ...extra } });
  });
}

/** Ends the claim of `jobId` (and only its own). */
export const releaseClaim = (tx: Db | DbTx, id: number, jobId: string | null) =>
  tx.subscription.updateMany({ where: { id, operation_job_id: jobId }, data: { operation: null, operation_job_id: null } });
