// A suspended instance that has svc's addon (odoo-addons/svc_instance, installed by template build)
// is not closed: its database stays open, marked svc.suspended with the reason and whom to contact,
// and the addon answers every web request with a plain page saying so, every RPC call with an
// error, and runs none of its scheduled actions. Why not close it and answer from the proxy: the
// page then needs nothing but the instance (any address, customer domains included, RPC answered
// in RPC's own form), and the reason is the subscription's. An instance without the addon (a
// template made before it, or not by svc's Odoo) is closed to connections as before.
import type { AppContext } from '../context.js';
import type { Db, DbTx } from '../core/db.js';
import { writeActionLog } from '../core/action-log.js';
import { setSuspension, type Suspension } from '../instances/index.js';
import type { Subscription } from '../generated/prisma/client.js';
import type { SuspendReason } from '../generated/prisma/enums.js';
import { actorFields, onSubscription, type Actor } from './subscription-audit.js';
import { onInstance } from './subscription-database.js';

/** The reason as the customer reads it on the page. */
export function suspensionReason(sub: Pick<Subscription, 'trial_end_date'>, reason: SuspendReason): string {
  switch (reason) {
    case 'trial_expired':
      return `Its trial ended${sub.trial_end_date ? ` on ${sub.trial_end_date.toISOString().slice(0, 10)}` : ''}`;
    case 'over_limit':
      return 'It has been over the limits of its package (users, records or storage) for longer than the grace period';
    case 'manual':
      return 'Its provider suspended it';
  }
}

/** The support_contact setting: whom customers contact (svc.contact). */
export async function supportContact(db: Db | DbTx): Promise<string | null> {
  const settings = await db.settings.findUnique({ where: { id: 1 }, select: { support_contact: true } });
  return settings?.support_contact ?? null;
}

type Deps = Pick<AppContext, 'db' | 'secretBox' | 'config'>;

/**
 * Writes the suspension into the instance (or lifts it: null) when svc's addon is installed there,
 * with an action-log row `operation: …`; answers what was done, or null when the addon is not
 * installed (nothing written: the caller closes the database as before).
 */
export async function markSuspension(
  deps: Deps,
  sub: Subscription,
  suspension: Suspension | null,
  actor: Actor,
  operation: string,
  tx?: DbTx,
): Promise<string | null> {
  const written = await onInstance(deps, sub, (query) => setSuspension(query, suspension), tx);
  if (!written) return null;
  const what = suspension
    ? `svc.suspended = True, svc.suspension_reason = ${JSON.stringify(suspension.reason)}, svc.contact = ${JSON.stringify(suspension.contact)}`
    : 'svc.suspended and svc.suspension_reason removed';
  const done = suspension
    ? `Database ${sub.database_name} left open: svc's addon answers its suspension page`
    : `Database ${sub.database_name}: svc's addon no longer answers the suspension page`;
  await writeActionLog(tx ?? deps.db, {
    ...onSubscription(sub.id),
    action_type: 'database',
    operation,
    input_text: `${what} (ir_config_parameter of ${sub.database_name})`,
    output_text: done,
    ...actorFields(actor),
  });
  return done;
}
