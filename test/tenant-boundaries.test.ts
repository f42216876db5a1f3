// A tenant's database is hostile input. Its Odoo administrator runs any SQL as the role that owns
// its tables, so rules, views, triggers and column defaults in there are the tenant's code: none of
// it may ever run with the service's rights. On real parts: tenant databases owned by an ordinary
// role (as Odoo's on a real host), the tenant's objects made as that role, the service's real paths
// (deployment, standby pool, sync_instance, web.base.url, suspension, the usage round).
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { applyBaseUrl } from '../src/domains/tenant-base-url.js';
import { createStandbyPool, installationPrefix } from '../src/instances/standby-pool.js';
import { deploySubscription } from '../src/subscriptions/subscription-deployment.js';
import { createUsageRound } from '../src/usage/usage-round.js';
import { request, waitForJob } from './helpers/api.js';
import { withConfig } from './helpers/app.js';
import { useOdooHost } from './helpers/odoo-host.js';
import { act, databaseRow, get, messages } from './helpers/lifecycle.js';
import { configParameters, queryIn, tenantUrl } from './helpers/odoo-template.js';
import { adminQuery } from './helpers/pg.js';
import { createTrialPackage } from './helpers/trial.js';

const f = useOdooHost({ 'ab/logo': 'logo bytes' });
const { t } = f;

/** Runs SQL in a database as the tenant would: as the role that owns its tables. */
async function asTenant(database: string, sql: string) {
  const client = new pg.Client({ connectionString: tenantUrl(database) });
  await client.connect();
  try {
    return (await client.query(sql)).rows;
  } finally {
    await client.end();
  }
}

/**
 * A spy the tenant plants: a function that records who runs it, whether as a superuser, and
 * whether it could read a file of the server (PG_VERSION in the data directory), into spy_log.
 */
const SPY = `
  CREATE TABLE public.spy_log (who text, superuser text, read_server_file boolean);
  CREATE FUNCTION public.spy() RETURNS integer LANGUAGE plpgsql AS $$
  DECLARE leaked text;
  BEGIN
    BEGIN leaked := pg_catalog.pg_read_file('PG_VERSION'); EXCEPTION WHEN others THEN leaked := NULL; END;
    INSERT INTO public.spy_log VALUES (current_user, current_setting('is_superuser'), leaked IS NOT NULL);
    RETURN NULL;
  END $$;`;

const spyLog = (database: string) =>
  queryIn<{ who: string; superuser: string; read_server_file: boolean }>(database, 'SELECT * FROM spy_log');

const operatorPatch = (id: number, payload: object) =>
  request(t.app, t.as.operator, { method: 'PATCH', url: `/api/v1/subscriptions/${id}`, payload });

/** Waits until sync_instance wrote the pending package limits. */
async function synced(id: number) {
  await expect
    .poll(async () => (await t.ctx.db.subscription.findUniqueOrThrow({ where: { id } })).instance_sync_pending_at, { timeout: 30_000 })
    .toBeNull();
}

describe('tenant code never runs with the service’s rights', () => {
  it('a column default of the tenant’s runs, in deployment, the standby pool and sync_instance, as the tenant role only', async () => {
    // A hostile template: every new config parameter calls the spy (as a tenant would plant it after its copy).
    // (database.uuid removed, so that every new identity inserts it.)
    await asTenant(
      f.fx.templateDb,
      `${SPY} ALTER TABLE public.ir_config_parameter ALTER COLUMN create_uid SET DEFAULT public.spy();
       DELETE FROM public.ir_config_parameter WHERE key = 'database.uuid';`,
    );
    try {
      const direct = await f.fx.deployed({ user_limit: 5 });
      const pkg = await createTrialPackage(t.ctx, { database_template_id: f.fx.templateId, standby_pool_size: 1 });
      await createStandbyPool(t.ctx).maintain();
      const standby = await t.ctx.db.standbyDatabase.findFirstOrThrow({ where: { trial_package_id: pkg.id, state: 'ready' } });
      await t.ctx.db.trialPackage.update({ where: { id: pkg.id }, data: { standby_pool_size: 0 } });

      expect(await operatorPatch(direct.id, { user_limit: 7 })).toMatchObject({ statusCode: 200 });
      await synced(direct.id);
      expect((await configParameters(direct.database_name))['svc.user_limit']).toBe('7');

      for (const database of [direct.database_name, standby.database_name]) {
        const log = await spyLog(database);
        expect(log.length).toBeGreaterThan(0); // the service's writes did run it
        for (const row of log) expect(row).toEqual({ who: 'svc_test_tenant', superuser: 'off', read_server_file: false });
      }
      // A new parameter written by the sync ran it too, as the tenant.
      expect((await spyLog(direct.database_name)).length).toBeGreaterThan((await spyLog(f.fx.templateDb)).length);
    } finally {
      await asTenant(
        f.fx.templateDb,
        `ALTER TABLE public.ir_config_parameter ALTER COLUMN create_uid DROP DEFAULT; DROP FUNCTION public.spy(); DROP TABLE public.spy_log;
         INSERT INTO public.ir_config_parameter (key, value) VALUES ('database.uuid', 'template-uuid');`,
      );
    }
  });

  it('a rule or trigger on a table the service writes: the write is refused naming it, and the rule never runs', async () => {
    const sub = await f.fx.deployed();
    await asTenant(
      sub.database_name,
      `${SPY}
       CREATE RULE spy_on_update AS ON UPDATE TO public.ir_config_parameter DO ALSO SELECT public.spy();
       CREATE RULE spy_on_delete AS ON DELETE TO public.ir_config_parameter DO ALSO SELECT public.spy();
       CREATE FUNCTION public.spy_trigger() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM public.spy(); RETURN NEW; END $$;
       CREATE TRIGGER spy_users BEFORE UPDATE ON public.res_users FOR EACH ROW EXECUTE FUNCTION public.spy_trigger();`,
    );
    // sync_instance (a PATCH of the package) ...
    expect(await operatorPatch(sub.id, { user_limit: 9 })).toMatchObject({ statusCode: 200 });
    await expect
      .poll(async () => (await messages(t, sub.id)).some((m) => /could not be written.*ir_config_parameter has rules/s.test(m.body)), {
        timeout: 30_000,
      })
      .toBe(true);
    // ... the base URL a domain sets ...
    await expect(applyBaseUrl(t.ctx, sub.id, { userId: null, jobId: null, author: null })).rejects.toThrow(/ir_config_parameter has rules/);
    // ... a ready mail sent again (a new password on res_users, which has a trigger) ...
    await t.ctx.db.subscription.update({ where: { id: sub.id }, data: { is_trial: true, trial_ready_sent_at: null } });
    const lifecycle = await request(t.app, t.as.operator, { method: 'POST', url: '/api/v1/settings/actions/run_trial_lifecycle' });
    await waitForJob(t.app, t.as.user, lifecycle.json().job_id);
    // ... and suspension and reactivation, which touch the database only from outside.
    expect((await act(t, sub.id, 'suspend')).statusCode).toBe(200);
    expect((await act(t, sub.id, 'reactivate')).statusCode).toBe(200);

    expect(await spyLog(sub.database_name)).toEqual([]);
    expect((await configParameters(sub.database_name))['svc.user_limit']).not.toBe('9');
  });

  it('res_users turned into a view: the usage round counts nothing from it, and the view never runs as a superuser', async () => {
    const sub = await f.fx.deployed({ user_limit: 3 });
    await asTenant(
      sub.database_name,
      `${SPY}
       ALTER TABLE public.res_users RENAME TO res_users_real;
       CREATE VIEW public.res_users AS SELECT * FROM public.res_users_real WHERE public.spy() IS NULL AND false;`,
    );
    const result = await createUsageRound(t.ctx).collect({ userId: null, jobId: null });
    expect(result.missing[sub.id]?.active_users).toMatch(/res_users not an ordinary table/);
    expect((await get(t, sub.id)).usage).toMatchObject({ active_users: null });
    expect((await spyLog(sub.database_name)).filter((r) => r.superuser !== 'off')).toEqual([]);
  });
});

describe('a tenant cannot hold the service or dodge its limits', () => {
  it('a tenant holding a lock delays only its own measure, by its deadline; withheld round after round, it counts as exceeded', async () => {
    const other = await f.fx.deployed({ user_limit: 10 });
    const locker = await f.fx.deployed({ user_limit: 1 });
    const hold = new pg.Client({ connectionString: tenantUrl(locker.database_name) });
    await hold.connect();
    try {
      // The tenant locks its users while it adds more than its package allows.
      await hold.query('BEGIN; LOCK TABLE public.res_users IN ACCESS EXCLUSIVE MODE');
      await withConfig(t, { TENANT_DEADLINE_SECONDS: 2 }, async () => {
        for (let round = 1; round <= 3; round++) {
          const result = await createUsageRound(t.ctx).collect({ userId: null, jobId: null });
          expect(result.missing[locker.id]?.active_users).toMatch(/not done within 2 s/);
          expect(result.missing[other.id]).toBeUndefined();
          const after = await get(t, locker.id);
          expect(after.usage_state).toBe(round < 3 ? 'ok' : 'exceeded');
        }
      });
      expect((await get(t, other.id)).usage).toMatchObject({ active_users: 1 });
      const told = await messages(t, locker.id);
      expect(told.some((m) => /could not be counted in 3 rounds in a row/.test(m.body))).toBe(true);
    } finally {
      await hold.end();
    }
    // Counted again: the streak ends.
    await createUsageRound(t.ctx).collect({ userId: null, jobId: null });
    expect((await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: locker.id } })).usage_withheld_rounds).toBe(0);
  });

  it('a count the operator’s set-up prevents (a database owned by a superuser) is never held against the tenant', async () => {
    const sub = await f.fx.deployed({ user_limit: 1 });
    await adminQuery(`ALTER DATABASE "${sub.database_name}" OWNER TO postgres`);
    for (let round = 1; round <= 3; round++) {
      const result = await createUsageRound(t.ctx).collect({ userId: null, jobId: null });
      expect(result.missing[sub.id]?.active_users).toMatch(/role postgres is a superuser/);
    }
    const after = await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: sub.id } });
    expect({ state: after.usage_state, rounds: after.usage_withheld_rounds }).toEqual({ state: 'ok', rounds: 0 });
  });
});

describe('copies for a new owner', () => {
  it('carry none of the template’s API keys, devices, second factor or tokens', async () => {
    await asTenant(
      f.fx.templateDb,
      `CREATE TABLE public.res_users_apikeys (id serial PRIMARY KEY, name varchar NOT NULL, user_id integer NOT NULL,
         scope varchar, index varchar(8) NOT NULL, key varchar NOT NULL, create_date timestamp, expiration_date timestamp);
       INSERT INTO public.res_users_apikeys (name, user_id, scope, index, key) VALUES ('template key', 2, 'rpc', 'abcd1234', 'hash');
       CREATE TABLE public.res_device_log (id serial PRIMARY KEY, session_identifier varchar NOT NULL, user_id integer);
       INSERT INTO public.res_device_log (session_identifier, user_id) VALUES ('template-session', 2), ('other-user', 1);
       ALTER TABLE public.res_users ADD COLUMN totp_secret varchar, ADD COLUMN oauth_access_token varchar;
       UPDATE public.res_users SET totp_secret = 'JBSWY3DPEHPK3PXP', oauth_access_token = 'token' WHERE id = 2;`,
    );
    try {
      const sub = await f.fx.deployed();
      expect(await queryIn(sub.database_name, 'SELECT * FROM res_users_apikeys')).toEqual([]);
      expect(await queryIn(sub.database_name, 'SELECT session_identifier FROM res_device_log')).toEqual([
        { session_identifier: 'other-user' },
      ]);
      expect(await queryIn(sub.database_name, 'SELECT totp_secret, oauth_access_token FROM res_users WHERE id = 2')).toEqual([
        { totp_secret: null, oauth_access_token: null },
      ]);
    } finally {
      await asTenant(
        f.fx.templateDb,
        'DROP TABLE public.res_users_apikeys, public.res_device_log; ALTER TABLE public.res_users DROP COLUMN totp_secret, DROP COLUMN oauth_access_token;',
      );
    }
  });

  it('a database owned by a superuser is never worked in: the deployment refuses it before copying', async () => {
    const patched = await request(t.app, t.as.operator, {
      method: 'PATCH',
      url: `/api/v1/database-templates/${f.fx.templateId}`,
      payload: { owner_role: 'postgres' },
    });
    expect(patched.statusCode, patched.body).toBe(200);
    try {
      const partner = await f.fx.partner();
      const res = await request(t.app, t.as.operator, {
        method: 'POST',
        url: '/api/v1/subscriptions',
        payload: { name: 'Refused', partner_id: partner.id, database_template_id: f.fx.templateId, database_name: `${t.ctx.dbName}_su` },
      });
      const id = res.json().id as number;
      expect((await act(t, id, 'confirm')).statusCode).toBe(200);
      const job = await waitForJob(t.app, t.as.user, (await act(t, id, 'deploy')).json().job_id);
      expect(job.state).toBe('failed');
      expect(job.error).toMatch(/role postgres is a superuser/);
      expect(await databaseRow(`${t.ctx.dbName}_su`)).toBeNull();
    } finally {
      await request(t.app, t.as.operator, {
        method: 'PATCH',
        url: `/api/v1/database-templates/${f.fx.templateId}`,
        payload: { owner_role: null },
      });
    }
  });
});

describe('the standby pool’s names and identities', () => {
  it('a company named like a standby never gets a name in the pool’s namespace', async () => {
    const partner = await f.fx.partner();
    const pkg = await createTrialPackage(t.ctx, { database_template_id: f.fx.templateId });
    const created = await request(t.app, t.as.operator, {
      method: 'POST',
      url: '/api/v1/trial-requests',
      payload: {
        name: 'Visitor',
        company_name: 'SVC Standby 1',
        email: partner.email,
        mobile: '+49 170 1234567',
        company_size: '1-5',
        trial_package_id: pkg.id,
      },
    });
    const processed = await request(t.app, t.as.operator, {
      method: 'POST',
      url: `/api/v1/trial-requests/${created.json().id}/actions/create_subscription`,
    });
    const sub = await get(t, processed.json().subscription_id);
    expect(sub.database_name).toMatch(/^db_svc_standby_1_\d+$/);
  });

  /**
   * A database under a standby's name with no identity recorded for the standby, but recorded as a
   * subscription's (an old customer's that ended up under the name), with files under that name.
   */
  async function customerUnderStandbyName(run: (name: string) => Promise<void>) {
    const pkg = await createTrialPackage(t.ctx, { database_template_id: f.fx.templateId });
    const name = `${await installationPrefix(t.ctx.db)}${pkg.id}_${Date.now()}`;
    await adminQuery(`CREATE DATABASE "${name}"`);
    try {
      const [{ oid, cluster }] = (await adminQuery<{ oid: string; cluster: string }>(
        `SELECT d.oid::text AS oid, (SELECT system_identifier::text FROM pg_control_system()) AS cluster FROM pg_database d WHERE datname = $1`,
        [name],
      )) as [{ oid: string; cluster: string }];
      const customer = await f.fx.deployed();
      await t.ctx.db.subscription.update({
        where: { id: customer.id },
        data: { database_system_identifier: cluster, database_oid: BigInt(oid) },
      });
      await mkdir(f.filestore(name), { recursive: true });
      await writeFile(path.join(f.filestore(name), 'customer-file'), 'the customer’s');
      await t.ctx.db.standbyDatabase.create({
        data: {
          trial_package_id: pkg.id,
          database_template_id: f.fx.templateId,
          template_version: new Date(),
          postgresql_server_id: f.fx.serverId,
          root_server_id: f.rootServerId,
          database_name: name,
          state: 'creating',
        },
      });
      await run(name);
    } finally {
      await adminQuery(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    }
  }

  it('a standby left without an identity is never dropped by name when a subscription is recorded as that database', async () => {
    await customerUnderStandbyName(async (name) => {
      await createStandbyPool(t.ctx).maintain();
      expect(await databaseRow(name)).not.toBeNull();
    });
  });

  it('nor are the files under its name removed: they are that database’s', async () => {
    await customerUnderStandbyName(async (name) => {
      await createStandbyPool(t.ctx).maintain();
      expect(await readFile(path.join(f.filestore(name), 'customer-file'), 'utf8')).toBe('the customer’s');
    });
  });

  it('a deployment that dies right after renaming its standby leaves a database the next attempt removes', async () => {
    const pkg = await createTrialPackage(t.ctx, { database_template_id: f.fx.templateId, standby_pool_size: 1 });
    await createStandbyPool(t.ctx).maintain();
    await t.ctx.db.trialPackage.update({ where: { id: pkg.id }, data: { standby_pool_size: 0 } });
    const partner = await f.fx.partner();
    const request_ = await t.ctx.db.trialRequest.create({
      data: {
        name: 'Crash',
        company_name: 'Crash Co',
        email: partner.email,
        mobile: '+49 170 1234567',
        company_size: 's1_5',
        trial_package_id: pkg.id,
        partner_id: partner.id,
      },
    });
    const sub = await t.ctx.db.subscription.create({
      data: {
        name: 'Crash',
        partner_id: partner.id,
        is_trial: true,
        state: 'confirmed',
        database_template_id: f.fx.templateId,
        database_name: `${t.ctx.dbName}_crash`,
      },
    });
    await t.ctx.db.trialRequest.update({ where: { id: request_.id }, data: { subscription_id: sub.id } });
    // The worker "dies" at the first step after the rename: it never goes on.
    const died = new Promise<void>((resolve) => {
      void deploySubscription(t.ctx, sub.id, { userId: null, jobId: null }, async ({ step }) => {
        if (step !== 'identity') return;
        resolve();
        await new Promise(() => {});
      });
    });
    await died;
    expect(await databaseRow(`${t.ctx.dbName}_crash`)).not.toBeNull();
    // What crash recovery does with an interrupted deployment, then deploy again.
    await t.ctx.db.subscription.update({ where: { id: sub.id }, data: { state: 'failed' } });
    const job = await waitForJob(t.app, t.as.user, (await act(t, sub.id, 'deploy')).json().job_id);
    expect(job.state, job.error).toBe('completed');
    expect((await get(t, sub.id)).state).toBe('running');
  });
});

describe('copying a template', () => {
  it('ends the sessions on the template first (its Odoo reconnects): a copy never waits for them', async () => {
    const odoo = new pg.Client({ connectionString: tenantUrl(f.fx.templateDb) });
    odoo.on('error', () => {});
    await odoo.connect();
    const ended = new Promise<void>((resolve) => odoo.on('end', () => resolve()));
    const sub = await f.fx.deployed();
    expect(sub.state).toBe('running');
    await ended;
  });
});

describe('the action log', () => {
  it('shows a user no rows of the standby pool (operators only)', async () => {
    const pkg = await createTrialPackage(t.ctx, { database_template_id: f.fx.templateId, standby_pool_size: 1 });
    await createStandbyPool(t.ctx).maintain();
    await t.ctx.db.trialPackage.update({ where: { id: pkg.id }, data: { standby_pool_size: 0 } });
    const list = (caller: typeof t.as.user, query: string) =>
      request(t.app, caller, { method: 'GET', url: `/api/v1/action-logs?${query}` }).then((r) => r.json().items as { id: number }[]);
    const standbyRows = await list(t.as.operator, 'model_name=svc.standby.database&limit=200');
    expect(standbyRows.length).toBeGreaterThan(0);
    expect(await list(t.as.user, 'model_name=svc.standby.database')).toEqual([]);
    const seen = (await list(t.as.user, 'limit=200')).map((r) => r.id);
    expect(seen.filter((id) => standbyRows.some((r) => r.id === id))).toEqual([]);
    expect(seen.length).toBeGreaterThan(0);
    const one = await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/action-logs/${standbyRows[0]!.id}` });
    expect(one.statusCode).toBe(404);
  });
});

describe('customer domains', () => {
  it('a domain that is another subscription’s own address: 409', async () => {
    const partner = await f.fx.partner();
    const other = await request(t.app, t.as.operator, {
      method: 'POST',
      url: '/api/v1/subscriptions',
      payload: { name: 'Other', partner_id: partner.id, database_template_id: f.fx.templateId, database_name: 'othertenant' },
    });
    const mine = await f.fx.deployed();
    const res = await request(t.app, t.as.operator, {
      method: 'POST',
      url: '/api/v1/domains',
      payload: { subscription_id: mine.id, hostname: 'othertenant.odoo.test' },
    });
    expect(res.statusCode, res.body).toBe(409);
    expect(res.json().error.message).toMatch(new RegExp(`address of subscription ${other.json().id}`));
  });
});
