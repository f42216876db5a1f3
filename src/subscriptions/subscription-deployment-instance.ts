// The instance a deployment makes (subscription-deployment.ts runs these steps): what an earlier
// attempt left removed, the place chosen, the database (a standby renamed, or a copy of the
// template) with the customer's identity, login and package limits inside it, its role of its own,
// the filestore beside it, and the customer's first sign-in.
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
import type { Partner } from '../generated/prisma/client.js';
import { signInAsCustomer } from '../odoo/index.js';
import { findDatabase, quoteIdent, sameDatabase } from '../postgresql/index.js';
import { forgetDatabase, leftoverOf, removeLeftovers } from './subscription-deployment-cleanup.js';
import { type Ctx, type Run, type Source, step } from './subscription-deployment-run.js';
import { placeSubscription, recordedPlace } from './subscription-placement.js';
import { supportContact } from './subscription-suspension-page.js';

/** An earlier attempt that died after making its database: what it made is removed first (where that attempt placed it). */
export async function removeEarlierAttempt(run: Run, template: Source) {
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
export async function placeInstance(run: Run, template: Source) {
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
export async function makeInstance(run: Run, source: Source, standby: Standby | null, password: string) {
  const [database, files] = await Promise.allSettled([makeDatabase(run, source, standby, password), makeFilestore(run, source, standby)]);
  const failure = [database, files].find((o) => o.status === 'rejected');
  if (standby) await settleStandby(run, standby, failure?.reason as Error | undefined);
  if (failure) throw failure.reason;
  return (database as PromiseFulfilledResult<{ limitsReadAt: Date; uid: number }>).value;
}

/** Only a customer who can sign in makes the subscription running: through the host's Odoo, as the mail will tell. */
export async function signIn(run: Run, host: NonNullable<Source['root']>, source: Source, uid: number, password: string) {
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

function identityText(database: string, url: string, standby: boolean) {
  return standby
    ? `web.base.url = ${url} and a new database.create_date in ${database}`
    : `new identity of ${database}: database.secret, database.uuid, database.create_date, web.base.url = ${url}; enterprise code and expiration removed`;
}

function customerOf(partner: Partner, passwordHash: string) {
  return { email: partner.email, name: partner.name, companyName: partner.company_name || partner.name, passwordHash };
}
