// Deployment of a subscription: a customer instance, not just a copy of the template. The database
// is a ready standby of the trial's package when there is one (renamed, so the trial is ready at
// once), else a copy of the template (CREATE DATABASE ... TEMPLATE). Then, each a step of the job's
// progress and of the action log: a new identity (a copy only; a standby has its own), the
// customer's login with a password of its own, the package limits as config parameters, and the
// filestore on the template's Odoo host. A deployment that fails removes what it made, so deploy
// again starts clean; what a dead worker made is removed by the next attempt (the database's
// identity is recorded the moment it exists). The state goes deploying → running (the trial_ready
// mail tells the password, which is stored nowhere) or failed with the error in the chatter and on
// the trial request(s) it came from.
import type { AppContext } from '../context.js';
import { runLoggedStep, writeActionLog } from '../core/action-log.js';
import { authorOfUser, postMessage, type Author } from '../core/chatter.js';
import type { DbTx } from '../core/db.js';
import { UserError } from '../core/errors.js';
import type { Partner, RootServer, Subscription } from '../generated/prisma/client.js';
import { createFilestores } from '../instances/filestore.js';
import {
  copyTemplate,
  dropMadeDatabase,
  LONG_STATEMENT_TIMEOUT,
  onServer,
  renameMadeDatabase,
  serverWhere,
  type MadeDatabase,
} from '../instances/instance-database.js';
import {
  assertOdooDatabase,
  hashingRounds,
  setAddressAndDate,
  setCustomerLogin,
  setIdentity,
  setPackageLimits,
} from '../instances/odoo-database.js';
import { earlyHash, newPassword } from '../instances/odoo-password.js';
import { quoteIdent } from '../postgresql/postgresql-connection.js';
import { STANDBY_REFILL_DELAY_MS, standbyHandedOver, standbyLost, takeStandby } from '../instances/standby-pool.js';
import { standbyJobs } from '../instances/standby-job-specs.js';
import { actorFields, onSubscription, postAlert, postNotice, type Actor } from './subscription-audit.js';
import { createLifecycleMail } from './subscription-mail.js';
import { assertState, DEPLOYABLE_STATES, lockSubscription, setSubscriptionState, subscriptionUrl } from './subscription-service.js';
import { queueInstanceSync } from './subscription-instance-sync.js';

export interface DeploymentResult {
  subscription_id: number;
  database_name: string;
  template_db_name: string;
  postgresql_server_id: number;
  /** The standby it took, or null for a copy of the template. */
  standby: string | null;
}

export type DeploymentStep =
  | 'connecting'
  | 'removing_leftovers'
  | 'taking_standby'
  | 'creating_database'
  | 'identity'
  | 'customer_login'
  | 'package_limits'
  | 'filestore'
  | 'recording'
  | 'trial_ready_mail'
  | 'done';

type Ctx = Pick<AppContext, 'db' | 'box' | 'mailer' | 'config' | 'log' | 'queues'>;

/** What a deployment made so far: removed again when it fails. */
interface Made {
  database: MadeDatabase | null;
  filestoreOn: RootServer | null;
}

export async function deploySubscription(
  ctx: Ctx,
  subscriptionId: number,
  actor: Actor,
  report: (progress: { step: DeploymentStep }) => Promise<unknown> = async () => {},
): Promise<DeploymentResult> {
  const author = await authorOfUser(ctx.db, actor.userId);
  const filestores = createFilestores(ctx);
  const audit = actorFields(actor);

  // Claim: only one deployment at a time, and only from a deployable state.
  const sub = await ctx.db.$transaction(async (tx) => {
    const before = await lockSubscription(tx, subscriptionId);
    assertState(before, DEPLOYABLE_STATES, 'deploy');
    return setSubscriptionState(tx, before, 'deploying', author, {
      database_name: before.database_name ?? `sub_${before.id}`,
    });
  });
  const databaseName = sub.database_name!;
  const made: Made = { database: null, filestoreOn: null };
  let stepsStarted = 0;

  /** One step: the job's progress, an action-log row written before it starts, its outcome. */
  async function step<T>(name: DeploymentStep, input: string, work: () => Promise<T>, output?: (r: T) => string) {
    stepsStarted++;
    await report({ step: name });
    const entry = { ...onSubscription(sub.id), action_type: 'deployment' as const, input_text: input, ...audit };
    return runLoggedStep(ctx.db, entry, work, output);
  }

  /** The database exists: recorded at once, so that whatever happens next it is found and removed again. */
  async function record(database: MadeDatabase) {
    made.database = database;
    await ctx.db.subscription.update({
      where: { id: sub.id },
      data: { database_system_identifier: database.systemIdentifier, database_oid: database.oid },
    });
  }

  try {
    await report({ step: 'connecting' });
    const template = sub.database_template_id
      ? await ctx.db.databaseTemplate.findUnique({
          where: { id: sub.database_template_id },
          include: { postgresql_server: true, root_server: true },
        })
      : null;
    if (!template) throw new UserError('The subscription has no database template to deploy from');
    const server = template.postgresql_server;
    const where = serverWhere(server);
    const partner = await ctx.db.partner.findUniqueOrThrow({ where: { id: sub.partner_id } });
    const url = subscriptionUrl(ctx.config, { database_name: databaseName, database_dropped_at: null })!;

    // An earlier attempt that died after making its database (the identity recorded, never running).
    if (sub.database_oid !== null && sub.database_system_identifier) {
      const leftover: MadeDatabase = { name: databaseName, systemIdentifier: sub.database_system_identifier, oid: sub.database_oid };
      await step('removing_leftovers', `remove what an earlier attempt made: database ${databaseName} on ${where}`, async () => {
        await onServer(ctx.box, server, (query) => dropMadeDatabase(query, leftover), { timeout: LONG_STATEMENT_TIMEOUT });
        if (template.root_server) await filestores.remove(template.root_server, databaseName, audit);
      });
      await ctx.db.subscription.update({ where: { id: sub.id }, data: { database_system_identifier: null, database_oid: null } });
    }

    const packageId = sub.is_trial
      ? ((await ctx.db.trialRequest.findFirst({ where: { subscription_id: sub.id }, select: { trial_package_id: true } }))
          ?.trial_package_id ?? null)
      : null;
    const standby = packageId ? await takeStandby(ctx.db, packageId, template.id) : null;
    const password = newPassword();
    const hashFor = earlyHash(password, `${template.id}@${template.updated_at.getTime()}`);
    let limitsReadAt = new Date();

    // The database and the filestore are made side by side: neither waits for the other.
    const database = async () => {
      if (standby) {
        const from: MadeDatabase = { name: standby.database_name, systemIdentifier: standby.system_identifier!, oid: standby.oid! };
        await step(
          'taking_standby',
          `ALTER DATABASE ${quoteIdent(from.name)} RENAME TO ${quoteIdent(databaseName)} -- standby, on ${where}`,
          async () => record(await onServer(ctx.box, server, (query) => renameMadeDatabase(query, from, databaseName))),
        );
      } else {
        await step(
          'creating_database',
          `CREATE DATABASE ${quoteIdent(databaseName)} TEMPLATE ${quoteIdent(template.template_db_name)} -- on ${where}`,
          async () =>
            record(
              await onServer(ctx.box, server, (query) => copyTemplate(ctx.db, query, template.template_db_name, databaseName, where), {
                timeout: LONG_STATEMENT_TIMEOUT,
              }),
            ),
          () => 'Database created',
        );
      }
      await onServer(
        ctx.box,
        server,
        async (query) => {
          await step('identity', identityText(databaseName, url, standby !== null), async () => {
            await assertOdooDatabase(query, `Database ${databaseName} (from template ${template.template_db_name})`);
            await (standby ? setAddressAndDate(query, url) : setIdentity(query, { url }));
          });
          await step('customer_login', `the administrator of ${databaseName} becomes ${partner.email}, with a new password`, async () =>
            setCustomerLogin(query, customerOf(partner, await hashFor(await hashingRounds(query)))),
          );
          limitsReadAt = new Date();
          const latest = await ctx.db.subscription.findUniqueOrThrow({ where: { id: sub.id } });
          await step('package_limits', `svc.* config parameters of ${databaseName}`, () => setPackageLimits(query, latest));
        },
        { database: databaseName },
      );
    };
    const files = async () => {
      const root = standby ? standby.root_server : template.root_server;
      if (!root) return;
      const [text, work] = standby
        ? [
            `filestore of ${databaseName}: standby ${standby.database_name}'s, renamed on root server ${root.id}`,
            () => filestores.rename(root, standby.database_name, databaseName, audit),
          ]
        : [
            `filestore of ${databaseName} from ${template.template_db_name} on root server ${root.id}`,
            () => filestores.copy(root, template.template_db_name, databaseName, audit),
          ];
      await step(
        'filestore',
        text,
        async () => {
          const out = await work();
          made.filestoreOn = root;
          return out;
        },
        (out) => out,
      );
    };
    const failure = (await Promise.allSettled([database(), files()])).find((o) => o.status === 'rejected');
    if (standby) {
      if (failure)
        await standbyLost(ctx.db, standby.id, `taking it for subscription ${sub.id} failed: ${(failure.reason as Error).message}`);
      else await standbyHandedOver(ctx.db, standby.id);
      // The pool makes a new one a little later (one delayed run for a whole burst of takes).
      await ctx.queues
        .enqueue(standbyJobs.maintain_standby_pool, { user_id: null }, { delay: STANDBY_REFILL_DELAY_MS })
        .catch((err) => ctx.log.warn({ err }, 'standby pool refill not queued (the next scheduled run refills it)'));
    }
    if (failure) throw failure.reason;

    const result: DeploymentResult = {
      subscription_id: sub.id,
      database_name: databaseName,
      template_db_name: template.template_db_name,
      postgresql_server_id: server.id,
      standby: standby?.database_name ?? null,
    };
    await report({ step: 'recording' });
    const running = await ctx.db.$transaction(async (tx) => {
      const before = await lockSubscription(tx, sub.id);
      // A change of the package fields after they were written stays pending (and is written next).
      const pending =
        before.instance_sync_pending_at && before.instance_sync_pending_at > limitsReadAt ? before.instance_sync_pending_at : null;
      // A database made again (after a drop) starts open and unsuspended.
      const after = await setSubscriptionState(tx, before, 'running', author, {
        database_dropped_at: null,
        database_created_at: new Date(),
        suspended_at: null,
        suspend_reason: null,
        instance_sync_pending_at: pending,
      });
      const how = standby ? `taken from standby ${standby.database_name}` : `created from template ${template.template_db_name}`;
      await postNotice(tx, sub.id, `Database ${databaseName} ${how} on ${server.ip}:${server.port}.`, author);
      return after;
    });
    if (running.instance_sync_pending_at) await queueInstanceSync(ctx, sub.id);
    // The deployment is done whatever the mail does (a failure is in the chatter, and retried with a new password).
    await report({ step: 'trial_ready_mail' });
    await createLifecycleMail(ctx)
      .sendDue({ subscriptionId: sub.id, mails: ['trial_ready'], password })
      .catch((err) => ctx.log.warn({ err, subscription_id: sub.id }, 'trial_ready mail not sent'));
    await report({ step: 'done' });
    return result;
  } catch (err) {
    const message = (err as Error).message;
    const removed = await removeMade(ctx, sub, made, audit);
    await ctx.db.$transaction(async (tx) => {
      await markDeploymentFailed(tx, sub.id, message, author);
      await postAlert(tx, sub.id, `Deployment failed: ${message}${removed ? `\n${removed}` : ''}`, author);
      // The step's own row says how it failed; a failure outside any step gets one.
      if (stepsStarted === 0) {
        await writeActionLog(tx, {
          ...onSubscription(sub.id),
          action_type: 'deployment',
          status: 'failure',
          input_text: `deploy ${databaseName}`,
          output_text: message,
          ...audit,
        });
      }
    });
    throw err;
  }
}

function identityText(database: string, url: string, standby: boolean) {
  return standby
    ? `web.base.url = ${url} and a new database.create_date in ${database}`
    : `new identity of ${database}: database.secret, database.uuid, database.create_date, web.base.url = ${url}; enterprise code and expiration removed`;
}

function customerOf(partner: Partner, passwordHash: string) {
  return { email: partner.email, name: partner.name, companyName: partner.company_name || partner.name, passwordHash };
}

/** Removes the database and filestore a failed deployment made; answers what it did, for the chatter. */
async function removeMade(ctx: Ctx, sub: Subscription, made: Made, audit: { user_id: number | null; job_id: string | null }) {
  const done: string[] = [];
  if (made.database) {
    const database = made.database;
    try {
      const template = await ctx.db.databaseTemplate.findUniqueOrThrow({
        where: { id: sub.database_template_id! },
        include: { postgresql_server: true },
      });
      await onServer(ctx.box, template.postgresql_server, (query) => dropMadeDatabase(query, database), {
        timeout: LONG_STATEMENT_TIMEOUT,
      });
      await ctx.db.subscription.update({ where: { id: sub.id }, data: { database_system_identifier: null, database_oid: null } });
      done.push(`Database ${database.name} it made was dropped.`);
    } catch (err) {
      done.push(`Database ${database.name} it made could not be dropped (${(err as Error).message}): deploy again removes it first.`);
    }
  }
  if (made.filestoreOn) {
    try {
      await createFilestores(ctx).remove(made.filestoreOn, sub.database_name!, audit);
      done.push('Its filestore was removed.');
    } catch (err) {
      done.push(`Its filestore could not be removed: ${(err as Error).message}`);
    }
  }
  return done.join(' ');
}

/**
 * A deployment that did not end: the subscription goes `failed` (from `deploying` only) and the
 * trial request(s) it came from are told. Used on an error and when the job was interrupted.
 */
export async function markDeploymentFailed(tx: DbTx, subscriptionId: number, message: string, author: Author | null) {
  const sub = await lockSubscription(tx, subscriptionId);
  if (sub.state !== 'deploying') return;
  await setSubscriptionState(tx, sub, 'failed', author);
  const requests = await tx.trialRequest.findMany({ where: { subscription_id: sub.id }, select: { id: true } });
  for (const r of requests) {
    await postMessage(tx, {
      model_name: 'svc.subscription.trial.request',
      rec_id: r.id,
      body: `Deployment of subscription ${sub.id} failed: ${message}`,
      message_type: 'notification',
      subtype_xmlid: 'mail.mt_alert',
    });
  }
}
