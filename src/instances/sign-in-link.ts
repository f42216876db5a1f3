// One-time sign-in links into a customer's Odoo (svc's addon: odoo-addons/svc_instance,
// controllers/sign_in.py). The token is 32 random bytes (base64url); only its SHA-256 is written,
// into the instance's own table svc_sign_in_link, with the customer's user (the template's
// administrator the deployment made the customer) and an expiry of SIGN_IN_LINK_MINUTES on the
// database's clock (UTC, as Odoo stores datetimes). The clear token goes only to the visitor's
// browser: never into svc's database, a log or the action log. The addon deletes the row when it
// is used, so it works once; expired rows are deleted here and there.
import { createHash, randomBytes } from 'node:crypto';
import { UserError } from '../core/errors.js';
import { lockTenantTables, type Query } from './tenant-session.js';

/** How long a link holds: the page posts it at once; a visitor without JavaScript clicks within this. */
export const SIGN_IN_LINK_MINUTES = 3;
/** The addon's table (model svc.sign.in.link). */
export const SIGN_IN_LINK_TABLE = 'svc_sign_in_link';

/** A new token and the hash the instance keeps of it. */
export function newSignInToken(): { token: string; hash: string } {
  const token = randomBytes(32).toString('base64url');
  return { token, hash: signInTokenHash(token) };
}

/** What the instance keeps of a token: its SHA-256, hex. */
export const signInTokenHash = (token: string) => createHash('sha256').update(token).digest('hex');

/**
 * Writes the row of a token for the customer's user, in one transaction on the tenant's session
 * (its tables checked to be Odoo's plain ones first). Answers the user it signs in.
 */
export async function storeSignInLink(query: Query, hash: string, minutes = SIGN_IN_LINK_MINUTES): Promise<{ uid: number }> {
  await query('BEGIN');
  try {
    const { rows: present } = await query(`SELECT pg_catalog.to_regclass('public.${SIGN_IN_LINK_TABLE}') IS NOT NULL AS present`);
    if (!present[0]?.present) {
      throw new UserError(`The instance has no ${SIGN_IN_LINK_TABLE} table: its svc_instance addon predates sign-in links (update it)`);
    }
    await lockTenantTables(query, [SIGN_IN_LINK_TABLE, 'res_users', 'ir_model_data'], 'ROW EXCLUSIVE');
    const { rows } = await query(
      `SELECT u.id FROM public.res_users u
        WHERE u.active AND u.id = COALESCE((SELECT res_id FROM public.ir_model_data
                                             WHERE module = 'base' AND name = 'user_admin' AND model = 'res.users'), 2)`,
    );
    const uid = rows[0]?.id as number | undefined;
    if (uid === undefined) throw new UserError('The instance has no active customer user (base.user_admin) to sign in');
    await query(`DELETE FROM public.${SIGN_IN_LINK_TABLE} WHERE expires_at <= (pg_catalog.now() AT TIME ZONE 'UTC')`);
    await query(
      `INSERT INTO public.${SIGN_IN_LINK_TABLE} (token_hash, user_id, expires_at)
       VALUES ($1, $2, (pg_catalog.now() AT TIME ZONE 'UTC') + pg_catalog.make_interval(mins => $3))`,
      [hash, uid, minutes],
    );
    await query('COMMIT');
    return { uid };
  } catch (err) {
    // The error that failed the transaction is the one told; a ROLLBACK that fails too means the
    // connection is gone, and the transaction with it.
    await query('ROLLBACK').catch(() => {});
    throw err;
  }
}
