// A template is the database svc accepted, not whatever has its name now (issue 46, the template
// swap): a tenant that copied a customer's database and renamed its copy into the template's name
// handed its administrator to every later customer. On the real PostgreSQL: check records the
// template's identity, every copy (deployment, standby refill), check and update refuse another
// database renamed in, with an alert on the template, and accept_database takes a replacement.
import { afterAll, describe, expect, it } from 'vitest';
import { createStandbyPool } from '../src/instances/standby-pool.js';
import { request, waitForJob } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';
import { act, databaseRow, useLifecycle } from './helpers/lifecycle.js';
import { adminQuery } from './helpers/pg.js';
import { createTrialPackage } from './helpers/trial.js';

const t = useTestApp({ workers: true });
const fx = useLifecycle(t);

afterAll(async () => {
  await t.ctx?.db.trialPackage.updateMany({ data: { standby_pool_size: 0 } });
  if (t.ctx) await createStandbyPool(t.ctx).maintain();
});

const templateUrl = () => `/api/v1/database-templates/${fx.templateId}`;
const post = (url: string) => request(t.app, t.as.operator, { method: 'POST', url });
const oidOf = async (name: string) =>
  (await adminQuery<{ oid: string }>('SELECT oid::text AS oid FROM pg_database WHERE datname = $1', [name]))[0]?.oid;

async function templateMessages() {
  const res = await request(t.app, t.as.user, { method: 'GET', url: `${templateUrl()}/messages?limit=200` });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().items as { body: string; subtype_xmlid: string }[];
}

/** A subscription on the template, deployed: answers the deployment job. */
async function deploy(name: string) {
  const partner = await fx.partner();
  const created = await request(t.app, t.as.operator, {
    method: 'POST',
    url: '/api/v1/subscriptions',
    payload: { name, partner_id: partner.id, database_template_id: fx.templateId, database_name: name },
  });
  expect(created.statusCode, created.body).toBe(201);
  const id = created.json().id as number;
  expect((await act(t, id, 'confirm')).statusCode).toBe(200);
  const res = await act(t, id, 'deploy');
  expect(res.statusCode, res.body).toBe(202);
  return { id, job: await waitForJob(t.app, t.as.user, res.json().job_id) };
}

describe('template identity', () => {
  it('a copy renamed into the template’s name is refused by deployments, the standby pool, check and update; accept_database takes it', async () => {
    // check accepts the template and records who it is.
    const checked = await post(`${templateUrl()}/actions/check`);
    expect(checked.statusCode, checked.body).toBe(200);
    const realOid = await oidOf(fx.templateDb);
    expect(checked.json()).toMatchObject({ oid: Number(realOid) });
    const record = await request(t.app, t.as.user, { method: 'GET', url: templateUrl() });
    expect(record.json()).toMatchObject({ template_oid: Number(realOid), template_system_identifier: expect.stringMatching(/^\d+$/) });

    // Tenant B's database, copied by tenant A, then the template renamed aside and the copy renamed in.
    const victim = await fx.deployed();
    const forged = `${t.ctx.dbName}_forged`;
    await adminQuery(`CREATE DATABASE "${forged}" OWNER svc_test_tenant TEMPLATE "${victim.database_name}"`);
    await adminQuery(`ALTER DATABASE "${fx.templateDb}" RENAME TO "${t.ctx.dbName}_aside"`);
    await adminQuery(`ALTER DATABASE "${forged}" RENAME TO "${fx.templateDb}"`);
    const forgedOid = await oidOf(fx.templateDb);
    try {
      const next = await deploy(`${t.ctx.dbName}_next`);
      expect(next.job.state).toBe('failed');
      expect(next.job.error).toContain('is not the database this template was built or checked as');
      expect(await databaseRow(`${t.ctx.dbName}_next`)).toBeNull();

      const pkg = await createTrialPackage(t.ctx, { database_template_id: fx.templateId, standby_pool_size: 1 });
      const run = await createStandbyPool(t.ctx).maintain();
      expect(run.created).toEqual([]);
      expect(JSON.stringify(run.failed)).toContain('is not the database this template was built or checked as');
      await t.ctx.db.trialPackage.update({ where: { id: pkg.id }, data: { standby_pool_size: 0 } });

      const check = await post(`${templateUrl()}/actions/check`);
      expect(check.statusCode, check.body).toBe(400);
      expect(check.json().error.message).toContain(`oid ${forgedOid}`);

      // update (the host's Odoo would run -u all in it) is refused before a job is queued.
      const host = await t.ctx.db.rootServer.create({
        data: {
          name: 'odoo host',
          ip: '127.0.0.1',
          state: 'confirmed',
          odoo_state: 'running',
          odoo_http_port: 18998,
          odoo_version: { create: { name: `t-${Date.now()}`, source_url: 'file:///srv/odoo.tar.gz', source_sha256: 'a'.repeat(64) } },
          odoo_postgresql_server: { connect: { id: fx.serverId } },
          odoo_db_user: 'svc_test_tenant',
        },
      });
      await t.ctx.db.databaseTemplate.update({ where: { id: fx.templateId }, data: { root_server_id: host.id } });
      const update = await post(`${templateUrl()}/actions/update`);
      await t.ctx.db.databaseTemplate.update({ where: { id: fx.templateId }, data: { root_server_id: null } });
      expect(update.statusCode, update.body).toBe(400);
      expect(update.json().error.message).toContain('is not the database this template was built or checked as');

      // One alert on the template, however often it was met.
      const alerts = (await templateMessages()).filter((m) => m.subtype_xmlid === 'mail.mt_alert');
      expect(alerts).toHaveLength(1);
      expect(alerts[0]!.body).toContain(`recorded: oid ${realOid}`);
      // The template record is as it was.
      expect((await request(t.app, t.as.user, { method: 'GET', url: templateUrl() })).json()).toMatchObject({
        template_oid: Number(realOid),
      });

      // An operator who deliberately replaced the template database accepts it.
      const accepted = await post(`${templateUrl()}/actions/accept_database`);
      expect(accepted.statusCode, accepted.body).toBe(200);
      expect((await request(t.app, t.as.user, { method: 'GET', url: templateUrl() })).json()).toMatchObject({
        template_oid: Number(forgedOid),
      });
      expect((await post(`${templateUrl()}/actions/check`)).statusCode).toBe(200);
    } finally {
      await adminQuery(`ALTER DATABASE "${fx.templateDb}" RENAME TO "${forged}"`);
      await adminQuery(`ALTER DATABASE "${t.ctx.dbName}_aside" RENAME TO "${fx.templateDb}"`);
      await t.ctx.db.databaseTemplate.update({
        where: { id: fx.templateId },
        data: { template_oid: BigInt(realOid!), template_system_identifier: record.json().template_system_identifier },
      });
    }
  });

  it('a template with no recorded identity (made before the check) gets it from its first copy; a new name forgets it', async () => {
    await t.ctx.db.databaseTemplate.update({
      where: { id: fx.templateId },
      data: { template_oid: null, template_system_identifier: null },
    });
    await fx.deployed();
    const after = await t.ctx.db.databaseTemplate.findUniqueOrThrow({ where: { id: fx.templateId } });
    expect(String(after.template_oid)).toBe(await oidOf(fx.templateDb));
    expect((await templateMessages()).some((m) => m.body.includes('identity recorded on first use'))).toBe(true);

    // Another database under the template's record is another template: its identity is recorded anew.
    const renamed = await request(t.app, t.as.operator, {
      method: 'PATCH',
      url: templateUrl(),
      payload: { template_db_name: `${t.ctx.dbName}_other` },
    });
    expect(renamed.statusCode, renamed.body).toBe(200);
    expect(renamed.json()).toMatchObject({ template_oid: null, template_system_identifier: null });
    const back = await request(t.app, t.as.operator, { method: 'PATCH', url: templateUrl(), payload: { template_db_name: fx.templateDb } });
    expect(back.statusCode, back.body).toBe(200);
  });
});
