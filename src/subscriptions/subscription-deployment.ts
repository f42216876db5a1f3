// Deployment of a subscription: a customer instance, not just a copy of the template. The database
// is a ready standby of the trial's package when there is one (renamed, so the trial is ready at
// once), else a copy of the template (CREATE DATABASE ... TEMPLATE). Then, each a step of the job's
// progress and of the action log: a new identity (a copy only; a standby has its own), the
// customer's login with a password of its own, the package limits as config parameters, and the
// filestore on the template's Odoo host. A deployment that fails removes what it made
// (subscription-deployment-cleanup.ts). The state goes deploying → running (the ready mail, a
// trial's trial_ready or a paid subscription's ready, tells the password, which is stored nowhere)
// or failed with the error in the chatter and on the trial request(s) it came from. Each step's
// action-log row starts with "deploy: ", so that a search of the log finds the deployment's rows.
import type { AppContext } from '../context.js';
import { runLoggedStep, writeActionLog } from '../core/action-log.js';
import { authorOfUser, postMessage, type Author } from '../core/chatter.js';
import type { DbTx } from '../core/db.js';
import { ConflictError, UserError } from '../core/errors.js';
import type { Partner, Subscription } from '../generated/prisma/client.js';
import {
  createFilestores,
  copyTemplate,
  LONG_STATEMENT_TIMEOUT,
  onServer,
  renameMadeDatabase,
  serverWhere,
  type MadeDatabase,
  type Query,
  assertOdooDatabase,
  setAddressAndDate,
  setCustomerLogin,
  setIdentity,
  setPackageLimits,
  hashOdooPassword,
  insideTenant,
  newPassword,
  tenantRoleOf,
  giveTenantRole,
  hasTenantRoles,
  newRolePassword,
  tenantRoleName,
  writeTenantCredentials,
  STANDBY_REFILL_DELAY_MS,
  standbyHandedOver,
  standbyLost,
  type Standby,
  standbyJobs,
} from '../instances/index.js';
import { assertTemplateHasPackages, hostsOdoo, signInAsCustomer } from '../odoo/index.js';
import { findDatabase, quoteIdent, sameDatabase } from '../postgresql/index.js';
import { actorFields, onSubscription, postAlert, postNotice, type Actor } from './subscription-audit.js';
import { forgetDatabase, leftoverOf, removeLeftovers, removeMade, type Made } from './subscription-deployment-cleanup.js';
import { createLifecycleMail } from './subscription-mail.js';
import { assertState, DEPLOYABLE_STATES, lockSubscription, setSubscriptionState, subscriptionUrl } from './subscription-service.js';
import { queueInstanceSync } from './subscription-instance-sync.js';
import { supportContact } from './subscription-suspension-page.js';
import { placeSubscription, recordedPlace } from './subscription-placement.js';

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
  | 'placing'
  | 'taking_standby'
  | 'creating_database'
  | 'tenant_role'
  | 'identity'
  | 'customer_login'
  | 'package_limits'
  | 'filestore'
  | 'signing_in'
  | 'recording'
  | 'trial_ready_mail'
  | 'ready_mail'
  | 'done';

type Ctx = Pick<AppContext, 'db' | 'secretBox' | 'mailer' | 'config' | 'log' | 'queues'>;

/** One deployment under way: what its steps share. */
interface Run {
  ctx: Ctx;
  /** The subscription as claimed (deploying, its database_name set). */
  sub: Subscription;
  databaseName: string;
  author: Author | null;
  audit: ReturnType<typeof actorFields>;
  report: (progress: { step: DeploymentStep }) => Promise<unknown>;
  made: Made;
  /** A failure outside any step gets an action-log row of its own. */
  stepsStarted: number;
}

/** What the instance is made from, and for whom. */
type Source = Awaited<ReturnType<typeof sourceOf>>;

export async function deploySubscription(
  ctx: Ctx,
  subscriptionId: number,
  actor: Actor,
  report: (progress: { step: DeploymentStep }) => Promise<unknown> = async () => {},
): Promise<DeploymentResult> {
  const author = await authorOfUser(ctx.db, actor.userId);
  const sub = await claimDeployment(ctx, subscriptionId, author, actor.jobId);
  const made: Made = { database: null, filestoreOn: null, credentialsOn: null };
  const run: Run = { ctx, sub, databaseName: sub.database_name!, author, audit: actorFields(actor), report, made, stepsStarted: 0 };
  try {
    await report({ step: 'connecting' });
    const template = await sourceOf(ctx, sub);
    await removeEarlierAttempt(run, template);
    const { source, standby } = await placeInstance(run, template);
    const password = newPassword();
    const { limitsReadAt, uid } = await makeInstance(run, source, standby, password);
    if (hostsOdoo(source.root)) await signIn(run, source.root, source, uid, password);
    await report({ step: 'recording' });
    const running = await markRunning(run, source, standby, limitsReadAt);
    if (running.instance_sync_pending_at) await queueInstanceSync(ctx, sub.id);
    await sendReadyMail(run, password);
    await report({ step: 'done' });
    return {
      subscription_id: sub.id,
      database_name: run.databaseName,
      template_db_name: source.template.template_db_name,
      postgresql_server_id: source.server.id,
      standby: standby?.database_name ?? null,
    };
  } catch (err) {
    await failDeployment(run, (err as Error).message);
    throw err;
  }
}

/**
 * Only one deployment at a time, and only from a deployable state. The claim records the job, so a
 * job Redis lost is found and failed (subscription-lost-jobs.ts) instead of deploying for ever.
 */
function claimDeployment(ctx: Ctx, subscriptionId: number, author: Author | null, jobId: string | null) {
  return ctx.db.$transaction(async (tx) => {
    const before = await lockSubscription(tx, subscriptionId);
    assertState(before, DEPLOYABLE_STATES, 'deploy');
    return setSubscriptionState(tx, before, 'deploying', author, {
      database_name: before.database_name ?? `sub_${before.id}`,
      operation: 'deploy',
      operation_job_id: jobId,
    });
  });
}

/** The template with its PostgreSQL server and Odoo host, the customer, and the instance's address. */
async function sourceOf(ctx: Ctx, sub: Subscription) {
  const template = sub.database_template_id
    ? await ctx.db.databaseTemplate.findUnique({
        where: { id: sub.database_template_id },
        include: { postgresql_server: true, root_server: true },
      })
    : null;
  if (!template) throw new UserError('The subscription has no database template to deploy from');
  // Packages are apps: a template known to lack the subscription's modules deploys nothing (nor do its standbys).
  assertTemplateHasPackages(template, sub.packages);
  const server = template.postgresql_server;
  const partner = await ctx.db.partner.findUniqueOrThrow({ where: { id: sub.partner_id } });
  const url = subscriptionUrl(ctx.config, { database_name: sub.database_name, database_dropped_at: null })!;
  return { template, server, root: template.root_server, where: serverWhere(server), partner, url };
}

/** One step: the job's progress, an action-log row written before it starts, its outcome. */
async function step<T>(run: Run, name: DeploymentStep, input: string, work: () => Promise<T>, output?: (r: T) => string) {
  run.stepsStarted++;
  await run.report({ step: name });
  const entry = { ...onSubscription(run.sub.id), action_type: 'deployment' as const, operation: 'deploy', input_text: input, ...run.audit };
  return runLoggedStep(run.ctx.db, entry, work, output);
}

/** An earlier attempt that died after making its database: what it made is removed first (where that attempt placed it). */
async function removeEarlierAttempt(run: Run, template: Source) {
  const leftover = leftoverOf(run.sub);
  if (!leftover) return;
  const source = (await recordedPlace(run.ctx, run.sub)) ?? template;
  await step(run, 'removing_leftovers', `remove what an earlier attempt made: database ${run.databaseName} on ${source.where}`, () =>
    removeLeftovers(run.ctx, source, leftover, run.audit),
  );
  await forgetDatabase(run.ctx, run.sub.id);
}

/**
 * Where the instance goes (subscription-placement.ts): a ready standby on a healthy host, else the
 * host placement picks, recorded on the subscription. The choice and why are this step's output.
 */
async function placeInstance(run: Run, template: Source) {
  const placed = await step(
    run,
    'placing',
    `choose the host of ${run.databaseName} among those with template ${template.template.template_db_name} ready`,
    () => placeSubscription(run.ctx, run.sub, template.template.id),
    (p) => p.text,
  );
  // The template as it is on the chosen host: its own there, or its copy (src/pools), which is what is copied.
  const source = {
    ...template,
    template: placed.templateHost.template,
    server: placed.server,
    root: placed.root,
    where: serverWhere(placed.server),
    templateHost: placed.templateHost,
  };
  return { source, standby: placed.standby };
}

/**
 * The database and the filestore, made side by side (neither waits for the other); a taken standby
 * is then handed over or marked lost. Answers when the package limits were read.
 */
async function makeInstance(run: Run, source: Source, standby: Standby | null, password: string) {
  const [database, files] = await Promise.allSettled([makeDatabase(run, source, standby, password), makeFilestore(run, source, standby)]);
  const failure = [database, files].find((o) => o.status === 'rejected');
  if (standby) await settleStandby(run, standby, failure?.reason as Error | undefined);
  if (failure) throw failure.reason;
  return (database as PromiseFulfilledResult<{ limitsReadAt: Date; uid: number }>).value;
}

/** Only a customer who can sign in makes the subscription running: through the host's Odoo, as the mail will tell. */
async function signIn(run: Run, host: NonNullable<Source['root']>, source: Source, uid: number, password: string) {
  const who = { database: run.databaseName, login: source.partner.email, password, uid };
  await step(
    run,
    'signing_in',
    `sign in to ${run.databaseName} as ${who.login} through Odoo on root server ${host.id}`,
    () => signInAsCustomer(run.ctx, host, who, { user_id: run.audit.user_id, job_id: run.audit.job_id }),
    (out) => out,
  );
}

/** The database (a standby renamed, or a copy of the template), then the instance inside it. */
async function makeDatabase(run: Run, source: Source, standby: Standby | null, password: string) {
  const { ctx, databaseName } = run;
  const { template, server, where, partner, url } = source;
  if (standby) {
    const from: MadeDatabase = { name: standby.database_name, systemIdentifier: standby.system_identifier!, oid: standby.oid! };
    await step(
      run,
      'taking_standby',
      `ALTER DATABASE ${quoteIdent(from.name)} RENAME TO ${quoteIdent(databaseName)} -- standby, on ${where}`,
      async () => {
        // Recorded before the rename: a crash right after it leaves a database the next attempt finds and removes.
        await record(run, { ...from, name: databaseName });
        try {
          await onServer(ctx.secretBox, server, (query) => renameMadeDatabase(query, from, databaseName));
        } catch (err) {
          if (await stillStandby(ctx, server, from)) {
            run.made.database = null;
            await forgetDatabase(ctx, run.sub.id);
          }
          throw err;
        }
      },
    );
  } else {
    const copy = (query: Query) => copyTemplate(ctx.db, query, template, databaseName, where);
    await step(
      run,
      'creating_database',
      `CREATE DATABASE ${quoteIdent(databaseName)} TEMPLATE ${quoteIdent(template.template_db_name)} -- on ${where}`,
      async () => record(run, await onServer(ctx.secretBox, server, copy, { timeout: LONG_STATEMENT_TIMEOUT })),
      () => 'Database created',
    );
  }
  const tenantRole = hasTenantRoles(template) ? await giveRole(run, source, standby) : tenantRoleOf(template);
  let limitsReadAt = new Date();
  let uid = 0;
  await insideTenant(
    ctx.secretBox,
    server,
    databaseName,
    async (query) => {
      await step(run, 'identity', identityText(databaseName, url, standby !== null), async () => {
        await assertOdooDatabase(query, `Database ${databaseName} (from template ${template.template_db_name})`);
        await (standby ? setAddressAndDate(query, url) : setIdentity(query, { url }));
      });
      ({ uid } = await step(
        run,
        'customer_login',
        `the administrator of ${databaseName} becomes ${partner.email}, with a new password`,
        async () => setCustomerLogin(query, customerOf(partner, await hashOdooPassword(password))),
        () => "Customer login set; the template's API keys, devices and tokens removed",
      ));
      limitsReadAt = new Date();
      const latest = await ctx.db.subscription.findUniqueOrThrow({ where: { id: run.sub.id } });
      const contact = await supportContact(ctx.db);
      await step(run, 'package_limits', `svc.* config parameters of ${databaseName}`, () => setPackageLimits(query, latest, contact));
    },
    {
      role: tenantRole,
      deadlineMs: ctx.config.TENANT_DEADLINE_SECONDS * 1000,
      what: `Database ${databaseName} of subscription ${run.sub.id}`,
      identity: run.made.database!,
    },
  );
  return { limitsReadAt, uid };
}

/**
 * On an Odoo host svc set up, the database gets a role of its own (instances' tenant-role.ts): a
 * copy is handed over to it, a standby's role (handed over when it was made) may now log in; the
 * host's Odoo finds it in the database's credentials file. Recorded (the password encrypted) before
 * it exists, so a failure or a crash finds and removes it with the database.
 */
async function giveRole(run: Run, source: Source, standby: Standby | null) {
  const { ctx, databaseName } = run;
  const made = run.made.database!;
  const host = standby ? standby.root_server : source.root;
  const from = source.template.owner_role ?? source.root!.odoo_db_user!;
  const role = tenantRoleName(made);
  const password = newRolePassword();
  const sealed = await ctx.secretBox.encrypt(password);
  await ctx.db.subscription.update({ where: { id: run.sub.id }, data: { database_role: role, database_role_password: sealed } });
  await step(
    run,
    'tenant_role',
    `${databaseName} and everything in it owned by its own role ${role} (from ${from}); its credentials for Odoo on root server ${host?.id}`,
    async () => {
      await giveTenantRole(ctx.secretBox, source.server, made, from, password);
      if (host) {
        run.made.credentialsOn = host;
        await writeTenantCredentials(ctx, host, databaseName, { role, password }, { ...run.audit, operation: 'deploy' });
      }
    },
    () => `Owned by ${role}`,
  );
  return { role, password: sealed };
}

/** Whether the standby is still under its own name (not renamed); true only when that is known. */
const stillStandby = (ctx: Ctx, server: Source['server'], standby: MadeDatabase) =>
  onServer(ctx.secretBox, server, async (query) => {
    const found = await findDatabase(query, standby.name);
    return found !== null && sameDatabase(found, standby);
  }).catch(() => false);

/** The database exists: recorded at once, so that whatever happens next it is found and removed again. */
async function record(run: Run, database: MadeDatabase) {
  run.made.database = database;
  await run.ctx.db.subscription.update({
    where: { id: run.sub.id },
    data: { database_system_identifier: database.systemIdentifier, database_oid: database.oid },
  });
}

/** The filestore on the Odoo host: the standby's renamed, or a copy of the template's. */
async function makeFilestore(run: Run, source: Source, standby: Standby | null) {
  const { databaseName } = run;
  const audit = { ...run.audit, operation: 'deploy' };
  const root = standby ? standby.root_server : source.root;
  if (!root) return;
  const filestores = createFilestores(run.ctx);
  const [text, work] = standby
    ? [
        `filestore of ${databaseName}: standby ${standby.database_name}'s, renamed on root server ${root.id}`,
        () => filestores.rename(root, standby.database_name, databaseName, audit),
      ]
    : [
        `filestore of ${databaseName} from ${source.template.template_db_name} on root server ${root.id}`,
        () => filestores.copy(root, source.template.template_db_name, databaseName, audit),
      ];
  const made = async () => {
    const out = await work();
    run.made.filestoreOn = root;
    return out;
  };
  await step(run, 'filestore', text, made, (out) => out);
}

/** The taken standby now belongs to the subscription, or is lost; the pool makes a new one a little later. */
async function settleStandby(run: Run, standby: Standby, failure: Error | undefined) {
  const { ctx, sub } = run;
  if (failure) await standbyLost(ctx.db, standby.id, `taking it for subscription ${sub.id} failed: ${failure.message}`);
  else await standbyHandedOver(ctx.db, standby.id);
  // One delayed run for a whole burst of takes.
  await ctx.queues
    .enqueue(standbyJobs.maintain_standby_pool, { user_id: null }, { delay: STANDBY_REFILL_DELAY_MS })
    .catch((err) => ctx.log.warn({ err }, 'standby pool refill not queued (the next scheduled run refills it)'));
}

/** running, told in the chatter; a database made again (after a drop) starts open and unsuspended. */
function markRunning(run: Run, source: Source, standby: Standby | null, limitsReadAt: Date) {
  const { ctx, sub, databaseName, author } = run;
  return ctx.db.$transaction(async (tx) => {
    const before = await lockSubscription(tx, sub.id);
    // Ended meanwhile (its job recorded as lost, and what it made removed): it does not come back.
    if (!holdsDeployment(before, sub.operation_job_id)) {
      throw new ConflictError(
        `Subscription ${sub.id} is no longer deploying with this job (it is ${before.state}): the deployment ended meanwhile`,
      );
    }
    // A change of the package fields after they were written stays pending (and is written next).
    const pending =
      before.instance_sync_pending_at && before.instance_sync_pending_at > limitsReadAt ? before.instance_sync_pending_at : null;
    const after = await setSubscriptionState(tx, before, 'running', author, {
      database_dropped_at: null,
      database_created_at: new Date(),
      // Where it lives from now on (a move changes it): the servers its database was made on.
      postgresql_server_id: standby ? standby.postgresql_server_id : source.server.id,
      root_server_id: standby ? standby.root_server_id : (source.root?.id ?? null),
      suspended_at: null,
      suspend_reason: null,
      instance_sync_pending_at: pending,
      operation: null,
      operation_job_id: null,
    });
    const how = standby ? `taken from standby ${standby.database_name}` : `created from template ${source.template.template_db_name}`;
    await postNotice(tx, sub.id, `Database ${databaseName} ${how} on ${source.server.ip}:${source.server.port}.`, author);
    return after;
  });
}

/** The ready mail (trial_ready, or ready when paid): done whatever it does (a failure is in the chatter, retried with a new password). */
async function sendReadyMail(run: Run, password: string) {
  await run.report({ step: run.sub.is_trial ? 'trial_ready_mail' : 'ready_mail' });
  // Both: whichever is due (convert_to_paid may have come during the deployment).
  await createLifecycleMail(run.ctx)
    .sendDue({ subscriptionId: run.sub.id, mails: ['trial_ready', 'ready'], password })
    .catch((err) => run.ctx.log.warn({ err, subscription_id: run.sub.id }, 'ready mail not sent'));
}

/** What it made is removed; failed, with the reason in the chatter (and the action log when no step says it). */
async function failDeployment(run: Run, message: string) {
  const { ctx, sub, author } = run;
  const now = await ctx.db.subscription.findUniqueOrThrow({ where: { id: sub.id } });
  // Ended meanwhile (the sweep removed what it made; a new deployment may own the name now): only
  // its database goes, by the identity it made (never another's by name).
  const made = holdsDeployment(now, sub.operation_job_id) ? run.made : { ...run.made, filestoreOn: null, credentialsOn: null };
  const removed = await removeMade(ctx, sub, made, run.audit);
  await ctx.db.$transaction(async (tx) => {
    await markDeploymentFailed(tx, sub.id, message, author, sub.operation_job_id);
    await postAlert(tx, sub.id, `Deployment failed: ${message}${removed ? `\n${removed}` : ''}`, author);
    if (run.stepsStarted === 0) {
      await writeActionLog(tx, {
        ...onSubscription(sub.id),
        action_type: 'deployment',
        status: 'failure',
        input_text: `deploy ${run.databaseName}`,
        output_text: message,
        ...run.audit,
      });
    }
  });
}

function identityText(database: string, url: string, standby: boolean) {
  return standby
    ? `web.base.url = ${url} and a new database.create_date in ${database}`
    : `new identity of ${database}: database.secret, database.uuid, database.create_date, web.base.url = ${url}; enterprise code and expiration removed`;
}

function customerOf(partner: Partner, passwordHash: string) {
  return { email: partner.email, name: partner.name, companyName: partner.company_name || partner.name, passwordHash };
}

/** Whether the deployment of `jobId` still holds the subscription (one claimed before jobs were recorded: any). */
function holdsDeployment(sub: Subscription, jobId: string | null) {
  if (sub.state !== 'deploying') return false;
  return sub.operation === null || (sub.operation === 'deploy' && sub.operation_job_id === jobId);
}

/**
 * A deployment that did not end: the subscription goes `failed` (from `deploying` by this job's
 * deployment only), its claim ends, and the trial request(s) it came from are told. Used on an
 * error, when the job was interrupted and when Redis lost it.
 */
export async function markDeploymentFailed(tx: DbTx, subscriptionId: number, message: string, author: Author | null, jobId: string | null) {
  const sub = await lockSubscription(tx, subscriptionId);
  if (!holdsDeployment(sub, jobId)) return;
  await setSubscriptionState(tx, sub, 'failed', author, { operation: null, operation_job_id: null });
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
