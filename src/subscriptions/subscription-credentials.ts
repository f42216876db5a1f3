// resend_credentials (operators): a new password for the customer's login, set in the running
// instance, then mailed to the customer, told once as the ready mail's is (the password is stored
// nowhere: the action-log row and the chatter copy of the mail do not hold it). A job that runs at
// most once: run twice, it would set a second password the customer may never read.
import type { AppContext } from '../context.js';
import { startActionLog } from '../core/action-log.js';
import { authorOfUser } from '../core/chatter.js';
import { ConflictError, NotFoundError, UserError } from '../core/errors.js';
import type { Subscription } from '../generated/prisma/client.js';
import { newPassword, setCustomerPassword } from '../instances/index.js';
import { actorFields, onSubscription, postAlert, postNotice, type Actor } from './subscription-audit.js';
import { onInstance } from './subscription-database.js';
import { mailCredentials } from './subscription-mail.js';
import { assertIdle, assertState } from './subscription-service.js';

const OPERATION = 'resend_credentials';

/** Running, not held by a backup, restore or drop, with the database its deployment created. */
function assertCredentialsPossible(sub: Subscription) {
  assertState(sub, ['running'], OPERATION);
  assertIdle(sub, OPERATION);
  if (!sub.database_name || !sub.database_created_at || sub.database_dropped_at) {
    throw new ConflictError(`Subscription ${sub.id} has no database: ${OPERATION} needs the instance its deployment made`);
  }
}

export function createCredentialsOperation(ctx: Pick<AppContext, 'db' | 'secretBox' | 'mailer' | 'config' | 'log'>) {
  const { db } = ctx;

  async function running(id: number) {
    const sub = await db.subscription.findUnique({ where: { id }, include: { partner: { select: { name: true, email: true } } } });
    if (!sub) throw new NotFoundError('Subscription');
    assertCredentialsPossible(sub);
    return sub;
  }

  return {
    /** The API's check before the job is queued (409 from any other state). */
    async checkResend(id: number) {
      await running(id);
    },

    /** The job: checked again, the password set inside the instance, then mailed. */
    async resend(id: number, actor: Actor) {
      const author = await authorOfUser(db, actor.userId);
      const sub = await running(id);
      const login = sub.partner.email;
      const password = newPassword();
      const step = await startActionLog(db, {
        ...onSubscription(id),
        action_type: 'database',
        operation: OPERATION,
        input_text: `a new password for ${login}, the administrator of ${sub.database_name} -- in ${sub.database_name}`,
        ...actorFields(actor),
        secrets: [password],
      });
      try {
        await onInstance(ctx, sub, (query) => setCustomerPassword(query, password));
      } catch (err) {
        const message = `The password of ${login} in ${sub.database_name} could not be set: ${(err as Error).message}`;
        await step.finish('failure', message);
        await postAlert(db, id, `${OPERATION} failed: ${message}. The earlier password still works.`, author);
        throw new UserError(message);
      }
      await step.finish('success', `New password set for ${login}; told only in the mail`);
      const error = await mailCredentials(ctx, sub, password);
      if (error !== null) {
        throw new UserError(
          `A new password is set for ${login} in ${sub.database_name}, but the mail could not be sent (${error}): run ${OPERATION} again`,
        );
      }
      await postNotice(db, id, `A new password for ${login} was set in ${sub.database_name} and mailed to ${login}.`, author);
      return { subscription_id: id, database_name: sub.database_name, login, mailed_to: login };
    },
  };
}
