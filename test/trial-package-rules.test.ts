// A trial package that cannot deploy is refused when it is written, not when a visitor's trial
// fails: an auto-run package deploys every verified trial from its database template, so
// auto_run_subscription without database_template_id is a 400 naming that field, on create and on
// PATCH (judged on the record as the PATCH would leave it), and changes nothing.
import { beforeAll, describe, expect, it } from 'vitest';
import { request } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';

const t = useTestApp();
let templateId: number;

const call = (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: object) =>
  request(t.app, t.as.operator, { method, url, ...(payload ? { payload } : {}) });

const refusal = {
  code: 'validation_error',
  details: { fields: [{ field: 'body.database_template_id', message: expect.stringContaining('auto_run_subscription') }] },
};

beforeAll(async () => {
  const pg = await call('POST', '/api/v1/postgresql-servers', { ip: '10.0.0.5', username: 'odoo', password: 'pw' });
  const template = await call('POST', '/api/v1/database-templates', {
    name: 'Odoo 18',
    postgresql_server_id: pg.json().id,
    template_db_name: 'odoo18_tpl',
  });
  expect(template.statusCode, template.body).toBe(201);
  templateId = template.json().id;
});

describe('auto-run trial packages', () => {
  it('without a database template are refused on create, naming database_template_id; nothing is created', async () => {
    for (const body of [
      { name: 'CRM', url_string: 'crm-auto', auto_run_subscription: true },
      { name: 'CRM', url_string: 'crm-auto', auto_run_subscription: true, database_template_id: null },
    ]) {
      const res = await call('POST', '/api/v1/trial-packages', body);
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toMatchObject(refusal);
    }
    expect((await call('GET', '/api/v1/trial-packages?url_string=crm-auto')).json().total).toBe(0);
    const created = await call('POST', '/api/v1/trial-packages', {
      name: 'CRM',
      url_string: 'crm-auto',
      auto_run_subscription: true,
      database_template_id: templateId,
    });
    expect(created.statusCode).toBe(201);
  });

  it('a PATCH is judged on the record it would leave: turning auto-run on without a template, or removing the template of one', async () => {
    const manual = (await call('POST', '/api/v1/trial-packages', { name: 'Manual', url_string: 'manual' })).json();
    const onWithout = await call('PATCH', `/api/v1/trial-packages/${manual.id}`, { auto_run_subscription: true });
    expect(onWithout.statusCode).toBe(400);
    expect(onWithout.json().error).toMatchObject(refusal);
    expect((await call('GET', `/api/v1/trial-packages/${manual.id}`)).json().auto_run_subscription).toBe(false);
    const onWith = await call('PATCH', `/api/v1/trial-packages/${manual.id}`, {
      auto_run_subscription: true,
      database_template_id: templateId,
    });
    expect(onWith.statusCode).toBe(200);

    const removeTemplate = await call('PATCH', `/api/v1/trial-packages/${manual.id}`, { database_template_id: null });
    expect(removeTemplate.statusCode).toBe(400);
    expect(removeTemplate.json().error).toMatchObject(refusal);
    expect((await call('GET', `/api/v1/trial-packages/${manual.id}`)).json().database_template_id).toBe(templateId);
    // Other changes of a deployable package, and turning auto-run off, are fine.
    expect((await call('PATCH', `/api/v1/trial-packages/${manual.id}`, { name: 'Manual CRM' })).statusCode).toBe(200);
    expect(
      (await call('PATCH', `/api/v1/trial-packages/${manual.id}`, { auto_run_subscription: false, database_template_id: null })).statusCode,
    ).toBe(200);
  });

  it('nor can deleting the template leave an auto-run package without one (409; the template stays)', async () => {
    const other = await call('POST', '/api/v1/database-templates', {
      name: 'Odoo 18 bis',
      postgresql_server_id: (await call('GET', `/api/v1/database-templates/${templateId}`)).json().postgresql_server_id,
      template_db_name: 'odoo18_bis_tpl',
    });
    const pkg = await call('POST', '/api/v1/trial-packages', {
      name: 'Sales',
      url_string: 'sales-auto',
      auto_run_subscription: true,
      database_template_id: other.json().id,
    });
    expect(pkg.statusCode, pkg.body).toBe(201);
    const refused = await call('DELETE', `/api/v1/database-templates/${other.json().id}`);
    expect(refused.statusCode, refused.body).toBe(409);
    expect((await call('GET', `/api/v1/trial-packages/${pkg.json().id}`)).json().database_template_id).toBe(other.json().id);
    // Once the package no longer runs by itself, the template can go.
    await call('PATCH', `/api/v1/trial-packages/${pkg.json().id}`, { auto_run_subscription: false });
    expect((await call('DELETE', `/api/v1/database-templates/${other.json().id}`)).statusCode).toBe(204);
  });
});
