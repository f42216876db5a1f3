// rotate_database_role: a new password for the subscription's own PostgreSQL role (instances'
// tenant-role.ts), set in PostgreSQL and in the credentials file the host's Odoo reads; Odoo's new
// connections use it at once, the open ones keep working. The new password is recorded (encrypted)
// first, so svc always knows the one PostgreSQL may have; a step that fails puts the old one back.
import type { AppContext } from '../context.js';
import { ConflictError, NotFoundError } from '../core/errors.js';
import { loadPlacement, newRolePassword, onServer, writeTenantCredentials } from '../instances/index.js';
import { quoteIdent, scramVerifier } from '../postgresql/index.js';
import { type Actor, actorFields, databaseStep, postNotice } from './subscription-audit.js';
import type { Author } from '../core/chatter.js';

type Ctx = Pick<AppContext, 'db' | 'secretBox' | 'config'>;

export async function rotateDatabaseRole(ctx: Ctx, id: number, actor: Actor, author: Author | null) {
  const sub = await ctx.db.subscription.findUnique({ where: { id } });
  if (!sub) throw new NotFoundError('Subscription');
  if (!sub.database_role || !sub.database_created_at || !sub.database_name) {
    throw new ConflictError(`Subscription ${id} has no database with a role of its own (only an Odoo host svc set up gives one)`);
  }
  if (sub.operation) throw new ConflictError(`Subscription ${id} is busy with ${sub.operation}: rotate its role's password afterwards`);
  const { pg, host } = await loadPlacement(ctx.db, id);
  const role = sub.database_role;
  const old = await ctx.secretBox.reveal(sub.database_role_password);
  const password = newRolePassword();
  const setPassword = (value: string | null) =>
    onServer(ctx.secretBox, pg, (q) =>
      q(`ALTER ROLE ${quoteIdent(role)} PASSWORD ${value === null ? 'NULL' : `'${scramVerifier(value)}'`}`),
    );
  const audit = { ...actorFields(actor), operation: 'rotate_database_role' };

  await ctx.db.subscription.update({ where: { id }, data: { database_role_password: await ctx.secretBox.encrypt(password) } });
  try {
    await databaseStep(ctx.db, id, audit, `ALTER ROLE ${quoteIdent(role)} PASSWORD '********'`, () =>
      setPassword(password).then(() => 'done'),
    );
    if (host) {
      try {
        await writeTenantCredentials(ctx, host, sub.database_name, { role, password }, audit);
      } catch (err) {
        await setPassword(old);
        throw err;
      }
    }
  } catch (err) {
    await ctx.db.subscription.update({ where: { id }, data: { database_role_password: sub.database_role_password } });
    throw err;
  }
  await postNotice(ctx.db, id, `The password of database ${sub.database_name}'s role ${role} was changed.`, author);
  return ctx.db.subscription.findUniqueOrThrow({ where: { id } });
}
