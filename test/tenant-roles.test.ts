// One PostgreSQL role per customer database on an Odoo host svc set up (instances' tenant-role.ts),
// on real parts: the Odoo-shaped template on the real PostgreSQL owned by the "host's role" (the
// tests' tenant role standing in for it), the real sshd as the host (its credentials directory
// under ODOO_BASE_PATH). A copy and a standby are handed to roles of their own, the host's Odoo finds
// the credentials in a file only root and odoo read, and the role goes with the database.
import { execFileSync } from 'node:child_process';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import { request, waitForJob } from './helpers/api.js';
import { act, get } from './helpers/lifecycle.js';
import { useOdooHost } from './helpers/odoo-host.js';
import { queryIn, TENANT_ROLE, tenantUrl } from './helpers/odoo-template.js';
import { createTrialPackage, processedTrial } from './helpers/trial.js';
import { createStandbyPool } from '../src/instances/standby-pool.js';
import { convertTenants } from '../src/odoo/odoo-tenant-roles.js';
import { adminQuery } from './helpers/pg.js';

const f = useOdooHost({ 'ab/logo': 'logo bytes' });
const { t } = f;

/** The database's owner and what kind of role it is; the owners of its objects; who else may connect. */
async function ownership(database: string) {
  const [db] = await adminQuery<{ owner: string; rolsuper: boolean; rolcreatedb: boolean; rolcreaterole: boolean; rolcanlogin: boolean }>(
    `SELECT r.rolname AS owner, r.rolsuper, r.rolcreatedb, r.rolcreaterole, r.rolcanlogin
       FROM pg_database d JOIN pg_roles r ON r.oid = d.datdba WHERE d.datname = $1`,
    [database],
  );
  const objects = await queryIn<{ owner: string }>(
    database,
    `SELECT DISTINCT pg_get_userbyid(c.relowner) AS owner FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = 'public'`,
  );
  const [{ connect }] = (await adminQuery<{ connect: boolean }>('SELECT has_database_privilege($1, $2, $3) AS connect', [
    TENANT_ROLE,
    database,
    'CONNECT',
  ])) as [{ connect: boolean }];
  return { ...db!, objectOwners: objects.map((o) => o.owner), hostRoleConnects: connect };
}

const credentialsFile = (database: string) => path.join(f.base, 'config', 'tenant-roles', database);

describe('a customer database on an Odoo host svc set up', () => {
  beforeAll(async () => {
    // The host's Odoo user (setup_odoo makes it the same way; its group reads the credentials files).
    execFileSync('sh', [
      '-c',
      'id odoo >/dev/null 2>&1 || useradd --system --user-group --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin odoo',
    ]);
    // The host runs Odoo with its own role, which owns the template (the tests' tenant role stands in for it).
    await t.ctx.db.rootServer.update({ where: { id: f.rootServerId }, data: { odoo_db_user: TENANT_ROLE } });
  });

  it('is owned by a role of its own that owns nothing else; Odoo finds its credentials in a file only root and odoo read', async () => {
    const [a, b] = [await f.fx.deployed(), await f.fx.deployed()];
    const [oa, ob] = [await ownership(a.database_name), await ownership(b.database_name)];
    const stored = await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: a.id } });
    expect(stored.database_role).toBe(`svc_db_${stored.database_oid}`);
    expect(oa).toEqual({
      owner: stored.database_role,
      rolsuper: false,
      rolcreatedb: false,
      rolcreaterole: false,
      rolcanlogin: true,
      objectOwners: [stored.database_role],
      hostRoleConnects: false,
    });
    expect(ob.owner).not.toBe(oa.owner);
    // As its role, the tenant (Odoo installing a module, a restore into a copy) creates objects in its schema public.
    const asRole = new pg.Client({ connectionString: tenantUrl(a.database_name, oa.owner) });
    await asRole.connect();
    try {
      await asRole.query('CREATE TABLE public.svc_probe (id int)');
    } finally {
      await asRole.end();
    }
    const owned = await adminQuery<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_shdepend s JOIN pg_roles r ON r.oid = s.refobjid WHERE r.rolname = $1 AND s.deptype = 'o' AND s.dbid = 0",
      [oa.owner],
    );
    expect(owned[0]!.n, 'its database only, among shared objects').toBe(1);

    const file = credentialsFile(a.database_name);
    const info = await stat(file);
    expect((info.mode & 0o777).toString(8)).toBe('640');
    expect((await stat(path.dirname(file))).mode & 0o777).toBe(0o750);
    const written = JSON.parse(await readFile(file, 'utf8'));
    expect(written).toEqual({ user: oa.owner, password: await t.ctx.secretBox.reveal(stored.database_role_password) });
    expect(written.password).toMatch(/^[A-Za-z0-9_-]{32}$/);
    // PostgreSQL keeps only a verifier of it; svc keeps it encrypted; neither the action log nor the chatter shows it.
    const [auth] = await adminQuery<{ rolpassword: string }>('SELECT rolpassword FROM pg_authid WHERE rolname = $1', [oa.owner]);
    expect(auth!.rolpassword).toMatch(/^SCRAM-SHA-256\$/);
    expect(stored.database_role_password).not.toContain(written.password);
    const logged = await t.ctx.db.actionLog.findMany({ where: { output_text: { contains: written.password } } });
    const loggedIn = await t.ctx.db.actionLog.findMany({ where: { input_text: { contains: written.password } } });
    expect([...logged, ...loggedIn]).toEqual([]);
    expect((await request(t.app, t.as.admin, { method: 'GET', url: `/api/v1/subscriptions/${a.id}` })).body).not.toContain(
      written.password,
    );

    // Rotated: a new password in PostgreSQL, in the file and (encrypted) on the record; never in the answer.
    const rotated = await request(t.app, t.as.operator, {
      method: 'POST',
      url: `/api/v1/subscriptions/${a.id}/actions/rotate_database_role`,
    });
    expect(rotated.statusCode, rotated.body).toBe(200);
    const rewritten = JSON.parse(await readFile(file, 'utf8'));
    expect(rewritten.user).toBe(oa.owner);
    expect(rewritten.password).not.toBe(written.password);
    expect(rotated.body).not.toContain(rewritten.password);
    const after = await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: a.id } });
    expect(await t.ctx.secretBox.reveal(after.database_role_password)).toBe(rewritten.password);
    const [authAfter] = await adminQuery<{ rolpassword: string }>('SELECT rolpassword FROM pg_authid WHERE rolname = $1', [oa.owner]);
    expect(authAfter!.rolpassword).toMatch(/^SCRAM-SHA-256\$/);
    expect(authAfter!.rolpassword).not.toBe(auth!.rolpassword);

    // Dropped with its database: the role and the file go, the other tenant's stay.
    expect((await act(t, a.id, 'cancel')).statusCode).toBe(200);
    const drop = await request(t.app, t.as.admin, {
      method: 'POST',
      url: `/api/v1/subscriptions/${a.id}/actions/drop_database`,
      payload: { skip_backup: true },
    });
    expect(drop.statusCode, drop.body).toBe(202);
    const dropped = await waitForJob(t.app, t.as.admin, drop.json().job_id);
    expect(dropped.state, dropped.error).toBe('completed');
    expect(await adminQuery('SELECT 1 FROM pg_roles WHERE rolname = $1', [oa.owner])).toEqual([]);
    await expect(stat(file)).rejects.toThrow(/ENOENT/);
    await stat(credentialsFile(b.database_name));
    expect(await adminQuery('SELECT 1 FROM pg_roles WHERE rolname = $1', [ob.owner])).toHaveLength(1);
    expect((await get(t, a.id)).state).toBe('cancelled');
  });

  it('a deployment that fails after the hand-over leaves neither the database nor its role nor its file', async () => {
    // The customer's e-mail cannot be a login: the login step fails after the role was made.
    const partner = await f.fx.partner();
    await queryIn(f.fx.templateDb, `ALTER TABLE res_users ADD CONSTRAINT svc_test_no_login CHECK (login NOT LIKE '%@%') NOT VALID`);
    try {
      const res = await request(t.app, t.as.operator, {
        method: 'POST',
        url: '/api/v1/subscriptions',
        payload: { name: 'Fails', partner_id: partner.id, database_template_id: f.fx.templateId, database_name: `${t.ctx.dbName}_fail` },
      });
      const id = res.json().id as number;
      expect((await act(t, id, 'confirm')).statusCode).toBe(200);
      const job = await waitForJob(t.app, t.as.user, (await act(t, id, 'deploy')).json().job_id, 120_000);
      expect(job.state).toBe('failed');
      expect(await adminQuery('SELECT 1 FROM pg_database WHERE datname = $1', [`${t.ctx.dbName}_fail`])).toEqual([]);
      // The role its tenant_role step made (named in that step's row) is gone too.
      const [made] = await t.ctx.db.actionLog.findMany({
        where: { model_name: 'svc.subscription', rec_id: id, input_text: { contains: 'owned by its own role' } },
      });
      const role = /own role (svc_db_\d+)/.exec(made!.input_text)![1];
      expect(made!.status).toBe('success');
      expect(await adminQuery('SELECT 1 FROM pg_roles WHERE rolname = $1', [role])).toEqual([]);
      await expect(stat(credentialsFile(`${t.ctx.dbName}_fail`))).rejects.toThrow(/ENOENT/);
      const stored = await t.ctx.db.subscription.findUniqueOrThrow({ where: { id } });
      expect([stored.database_role, stored.database_role_password]).toEqual([null, null]);
    } finally {
      await queryIn(f.fx.templateDb, 'ALTER TABLE res_users DROP CONSTRAINT IF EXISTS svc_test_no_login');
    }
  });

  it("a standby is its own NOLOGIN role's until a trial takes it; then that role logs in and the file is written", async () => {
    const pkg = await createTrialPackage(t.ctx, { database_template_id: f.fx.templateId, standby_pool_size: 1 });
    try {
      await createStandbyPool(t.ctx).maintain();
      const [standby] = await t.ctx.db.standbyDatabase.findMany({ where: { trial_package_id: pkg.id, state: 'ready' } });
      const held = await ownership(standby!.database_name);
      expect(held).toMatchObject({ owner: `svc_db_${standby!.oid}`, rolcanlogin: false, hostRoleConnects: false });
      expect(held.objectOwners).toEqual([held.owner]);
      await expect(stat(credentialsFile(standby!.database_name))).rejects.toThrow(/ENOENT/);

      const { subscription_id, deployment_job_id } = await processedTrial(t, pkg.id);
      const job = await waitForJob(t.app, t.as.user, deployment_job_id);
      expect(job.state, job.error).toBe('completed');
      expect(job.result.standby).toBe(standby!.database_name);
      const sub = await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: subscription_id } });
      expect(sub.database_role).toBe(held.owner);
      expect(await ownership(sub.database_name!)).toMatchObject({ owner: held.owner, rolcanlogin: true });
      expect(JSON.parse(await readFile(credentialsFile(sub.database_name!), 'utf8')).user).toBe(held.owner);
    } finally {
      await t.ctx.db.trialPackage.update({ where: { id: pkg.id }, data: { standby_pool_size: 0 } });
      await createStandbyPool(t.ctx).maintain();
    }
  });

  it("setup_odoo's conversion hands a tenant deployed before roles of their own from the host's role to its own", async () => {
    // Deployed as before: no role of the host recorded, so the copy stays the template owner's.
    await t.ctx.db.rootServer.update({ where: { id: f.rootServerId }, data: { odoo_db_user: null } });
    const old = await f.fx.deployed();
    await t.ctx.db.rootServer.update({ where: { id: f.rootServerId }, data: { odoo_db_user: TENANT_ROLE } });
    expect((await ownership(old.database_name)).owner).toBe(TENANT_ROLE);
    const none = await request(t.app, t.as.operator, {
      method: 'POST',
      url: `/api/v1/subscriptions/${old.id}/actions/rotate_database_role`,
    });
    expect(none.statusCode, none.body).toBe(409);

    const host = await t.ctx.db.rootServer.findUniqueOrThrow({ where: { id: f.rootServerId } });
    const template = await t.ctx.db.databaseTemplate.findUniqueOrThrow({
      where: { id: f.fx.templateId },
      include: { postgresql_server: true },
    });
    const result = await convertTenants(t.ctx, host, template.postgresql_server, TENANT_ROLE, { user_id: null });
    expect(result).toEqual({ converted: [old.database_name], failed: [] });
    const stored = await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: old.id } });
    const after = await ownership(old.database_name);
    expect(after).toMatchObject({
      owner: stored.database_role,
      rolcanlogin: true,
      objectOwners: [stored.database_role],
      hostRoleConnects: false,
    });
    expect(JSON.parse(await readFile(credentialsFile(old.database_name), 'utf8')).user).toBe(stored.database_role);
    // svc works inside it as its role now (the package limits written again, say).
    const patched = await request(t.app, t.as.operator, {
      method: 'PATCH',
      url: `/api/v1/subscriptions/${old.id}`,
      payload: { user_limit: 9 },
    });
    expect(patched.statusCode, patched.body).toBe(200);
    await expect
      .poll(
        async () => (await queryIn(old.database_name, "SELECT value FROM ir_config_parameter WHERE key = 'svc.user_limit'"))[0]?.value,
        {
          timeout: 30_000,
        },
      )
      .toBe('9');
    // Run again, nothing is left to convert.
    expect(await convertTenants(t.ctx, host, template.postgresql_server, TENANT_ROLE, { user_id: null })).toEqual({
      converted: [],
      failed: [],
    });
  });
});
