// What svc writes into an instance for its addon (odoo-addons/svc_instance): the support contact
// with the package (svc.contact), and the suspension. An instance whose addon is installed stays
// open while suspended, marked svc.suspended with the reason and the contact (its addon answers the
// page); one without the addon is closed to connections as before. Real PostgreSQL, Odoo-shaped
// tenant databases (the addon's own behaviour is tested inside Odoo: test-odoo/odoo-addon.test.ts).
import { describe, expect, it } from 'vitest';
import { request } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';
import { act, databaseRow, useLifecycle } from './helpers/lifecycle.js';
import { configParameters, queryIn, TENANT_ROLE } from './helpers/odoo-template.js';
import { createSuspensionService } from '../src/subscriptions/index.js';
import { createUsageRound } from '../src/usage/usage-round.js';
import { messages } from './helpers/lifecycle.js';

const t = useTestApp({ workers: true });
const fx = useLifecycle(t);

const setContact = (support_contact: string | null) =>
  request(t.app, t.as.admin, { method: 'PATCH', url: '/api/v1/settings', payload: { support_contact } });

/** Odoo's module table in the tenant's database, owned by its role as Odoo makes it, with svc's addon `state`. */
async function installAddon(database: string, state = 'installed') {
  await queryIn(
    database,
    `CREATE TABLE IF NOT EXISTS ir_module_module (id serial PRIMARY KEY, name varchar NOT NULL, state varchar);
     ALTER TABLE ir_module_module OWNER TO "${TENANT_ROLE}"`,
  );
  await queryIn(database, 'INSERT INTO ir_module_module (name, state) VALUES ($1, $2), ($3, $4)', [
    'base',
    'installed',
    'svc_instance',
    state,
  ]);
}

const svcParams = async (database: string) =>
  Object.fromEntries(Object.entries(await configParameters(database)).filter(([k]) => k.startsWith('svc.')));

describe("svc's addon parameters", () => {
  it('support_contact: one line of text, written into instances with the package as svc.contact', async () => {
    for (const bad of ['', 'a\nb', 'x'.repeat(201)]) expect((await setContact(bad)).statusCode).toBe(400);
    expect((await setContact('help@example.com')).statusCode).toBe(200);
    const sub = await fx.deployed();
    expect(await svcParams(sub.database_name)).toMatchObject({ 'svc.contact': 'help@example.com', 'svc.user_limit': expect.any(String) });
  });

  it('an instance with the addon stays open while suspended, marked with the reason and the contact; reactivation lifts the mark', async () => {
    expect((await setContact('Acme support, +1 555 0100')).statusCode).toBe(200);
    const sub = await fx.deployed();
    await installAddon(sub.database_name);

    const res = await act(t, sub.id, 'suspend');
    expect(res.statusCode, res.body).toBe(200);
    expect(await databaseRow(sub.database_name)).toMatchObject({ datallowconn: true });
    expect(await svcParams(sub.database_name)).toMatchObject({
      'svc.suspended': 'True',
      'svc.suspension_reason': 'Its provider suspended it',
      'svc.contact': 'Acme support, +1 555 0100',
    });
    const log = await t.ctx.db.actionLog.findMany({ where: { model_name: 'svc.subscription', rec_id: sub.id }, orderBy: { id: 'asc' } });
    expect(log.map((l) => l.input_text)).toContainEqual(
      expect.stringMatching(/^suspend: svc\.suspended = True, svc\.suspension_reason = "Its provider suspended it"/),
    );

    const back = await act(t, sub.id, 'reactivate');
    expect(back.statusCode, back.body).toBe(200);
    const after = await svcParams(sub.database_name);
    expect(after['svc.suspended']).toBeUndefined();
    expect(after['svc.suspension_reason']).toBeUndefined();
    expect(await databaseRow(sub.database_name)).toMatchObject({ datallowconn: true, datconnlimit: -1 });
  });

  it('an instance without the addon (or with it not installed) is closed while suspended, as before', async () => {
    const sub = await fx.deployed();
    await installAddon(sub.database_name, 'uninstalled');
    expect((await act(t, sub.id, 'suspend')).statusCode).toBe(200);
    expect(await databaseRow(sub.database_name)).toMatchObject({ datallowconn: false, datconnlimit: 0 });
    expect((await act(t, sub.id, 'reactivate')).statusCode).toBe(200);
    expect(await databaseRow(sub.database_name)).toMatchObject({ datallowconn: true });
    expect((await svcParams(sub.database_name))['svc.suspended']).toBeUndefined();
  });

  it('over its limits, then its trial ends while suspended: the page says the new reason', async () => {
    const sub = await fx.deployed({ is_trial: true, trial_end_date: new Date(Date.now() + 86_400_000).toISOString() });
    await installAddon(sub.database_name);
    const suspension = createSuspensionService(t.ctx);
    const actor = { userId: null, jobId: null };
    await t.ctx.db.subscription.update({ where: { id: sub.id }, data: { usage_state: 'exceeded', usage_exceeded_since: new Date() } });
    expect(await suspension.suspendOverLimit(sub.id, actor)).toMatchObject({ state: 'suspended', suspend_reason: 'over_limit' });
    expect((await svcParams(sub.database_name))['svc.suspension_reason']).toMatch(/^It has been over the limits of its package/);

    await t.ctx.db.subscription.update({ where: { id: sub.id }, data: { trial_end_date: new Date('2026-01-02T00:00:00Z') } });
    expect(await suspension.expireTrial(sub.id, actor)).toMatchObject({ suspend_reason: 'trial_expired' });
    expect(await svcParams(sub.database_name)).toMatchObject({
      'svc.suspended': 'True',
      'svc.suspension_reason': 'Its trial ended on 2026-01-02',
    });
  });

  it("parameters changed inside the instance (a tenant's SQL) are put back by the next usage round, with an alert in the chatter", async () => {
    const sub = await fx.deployed({ user_limit: 3, model_limits: { 'res.partner': 100 } });
    await queryIn(sub.database_name, "UPDATE ir_config_parameter SET value = '999' WHERE key = 'svc.user_limit'");
    await queryIn(sub.database_name, "DELETE FROM ir_config_parameter WHERE key = 'svc.model_limits'");
    await createUsageRound(t.ctx).collect({ userId: null, jobId: null });
    expect(await svcParams(sub.database_name)).toMatchObject({ 'svc.user_limit': '3', 'svc.model_limits': '{"res.partner":100}' });
    const alerts = (await messages(t, sub.id)).filter((m) => m.subtype_xmlid === 'mail.mt_alert').map((m) => m.body);
    expect(alerts).toContainEqual(
      expect.stringContaining('svc.user_limit (found "999"), svc.model_limits (found missing) were changed inside database'),
    );
    // Nothing changed since: the next round says nothing.
    await createUsageRound(t.ctx).collect({ userId: null, jobId: null });
    expect((await messages(t, sub.id)).filter((m) => m.subtype_xmlid === 'mail.mt_alert')).toHaveLength(alerts.length);
  });
});
