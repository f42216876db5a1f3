// The test run's own clean-up (test/helpers/cluster-cleanup.ts, run by the global teardown of
// `npm test` and `npm run test:odoo`): what a run's svc database recorded as made on the cluster
// goes, with the run's svc database; what another run made, or what was there before, stays.
import { afterAll, expect, it } from 'vitest';
import { installationPrefix } from '../src/instances/standby-pool.js';
import { clusterSnapshot, dropWhatWasMade } from './helpers/cluster-cleanup.js';
import { createTestContext, type TestContext } from './helpers/context.js';
import { adminQuery } from './helpers/pg.js';

const tag = Math.random().toString(36).slice(2, 8);
const names = {
  hostRole: `odoo_cleanup${tag}`,
  tenantRole: `svc_db_cleanup${tag}`,
  tenantDb: `acme_cleanup_${tag}`,
  safetyCopy: `acme_cleanup_${tag}_safety`,
  templateCopy: `svcrb_cleanup_${tag}`,
  before: `cleanup_before_${tag}`,
  beside: `cleanup_beside_${tag}`,
  besideRole: `odoo_beside${tag}`,
};
let ctx: TestContext | undefined;
let standby = '';

afterAll(async () => {
  await ctx?.cleanup(); // its database is gone already (FORCE ended its connections): Redis keys and files
  for (const db of [names.before, names.beside, names.tenantDb, names.safetyCopy, names.templateCopy, standby].filter(Boolean))
    await adminQuery(`DROP DATABASE IF EXISTS "${db}" WITH (FORCE)`);
  for (const role of [names.hostRole, names.tenantRole, names.besideRole]) await adminQuery(`DROP ROLE IF EXISTS "${role}"`);
});

const databases = async () => new Set((await adminQuery<{ datname: string }>('SELECT datname FROM pg_database')).map((r) => r.datname));
const roles = async () => new Set((await adminQuery<{ rolname: string }>('SELECT rolname FROM pg_roles')).map((r) => r.rolname));

it('drops the run’s databases and roles found through its records (also unrecorded standbys and a host role’s copies), and nothing else', async () => {
  await adminQuery(`CREATE DATABASE "${names.before}"`);
  const before = await clusterSnapshot();
  ctx = await createTestContext();
  const svcDb = ctx.dbName;

  // What the run made: a host's role and a copy it owns (a safety copy svc records nowhere), a
  // customer database with its own role, a standby not recorded yet (a crash between CREATE and INSERT).
  await adminQuery(`CREATE ROLE "${names.hostRole}" LOGIN CREATEDB`);
  await adminQuery(`CREATE ROLE "${names.tenantRole}" LOGIN`);
  await adminQuery(`CREATE DATABASE "${names.tenantDb}" OWNER "${names.tenantRole}"`);
  await adminQuery(`CREATE DATABASE "${names.safetyCopy}" OWNER "${names.hostRole}"`);
  standby = `${await installationPrefix(ctx.db)}7_1`;
  await adminQuery(`CREATE DATABASE "${standby}"`);
  await ctx.db.rootServer.create({ data: { name: 'host', ip: '127.0.0.1', odoo_db_user: names.hostRole } });
  const partner = await ctx.db.partner.create({ data: { name: 'Acme', email: 'acme@example.com' } });
  await ctx.db.subscription.create({
    data: { name: 'Acme', partner_id: partner.id, database_name: names.tenantDb, database_role: names.tenantRole },
  });
  // A template update's safety copy left recorded (owned by the shared tests' role, as in the suite).
  await adminQuery(`CREATE DATABASE "${names.templateCopy}"`);
  const pg = await ctx.db.postgresqlServer.create({ data: { name: 'local', ip: '127.0.0.1', port: 5432, username: 'postgres' } });
  await ctx.db.databaseTemplate.create({
    data: { name: 'tpl', postgresql_server_id: pg.id, template_db_name: `tpl_cleanup_${tag}`, update_safety_copy: names.templateCopy },
  });
  // What a run beside this one made (its records are its own), after this one began.
  await adminQuery(`CREATE ROLE "${names.besideRole}" LOGIN`);
  await adminQuery(`CREATE DATABASE "${names.beside}" OWNER "${names.besideRole}"`);

  expect(await dropWhatWasMade([svcDb], before)).toEqual([]);

  const dbs = await databases();
  for (const gone of [svcDb, names.tenantDb, names.safetyCopy, names.templateCopy, standby]) expect(dbs.has(gone), gone).toBe(false);
  for (const kept of [names.before, names.beside]) expect(dbs.has(kept), kept).toBe(true);
  const rs = await roles();
  for (const gone of [names.hostRole, names.tenantRole]) expect(rs.has(gone), gone).toBe(false);
  expect(rs.has(names.besideRole)).toBe(true);
});
