// PATCH changes what it names and nothing else (zod once applied `.default()` inside `.partial()`,
// so renaming an administrator demoted it). Real PostgreSQL and Redis, the app over
// inject(): for every resource, create a record, PATCH one field, and compare the whole record.
import { describe, expect, it } from 'vitest';
import { request } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';

const t = useTestApp();

async function create(resource: string, payload: object): Promise<number> {
  const res = await request(t.app, t.as.admin, { method: 'POST', url: `/api/v1/${resource}`, payload });
  expect(res.statusCode, `${resource}: ${res.body}`).toBe(201);
  return res.json().id;
}

const get = async (resource: string, id: number) =>
  (await request(t.app, t.as.admin, { method: 'GET', url: `/api/v1/${resource}/${id}` })).json();

/** PATCHes one field and checks that only it (and updated_at) changed. */
async function patchesOnly(resource: string, id: number, patch: Record<string, unknown>) {
  const before = await get(resource, id);
  const res = await request(t.app, t.as.admin, { method: 'PATCH', url: `/api/v1/${resource}/${id}`, payload: patch });
  expect(res.statusCode, `${resource}: ${res.body}`).toBe(200);
  const after = await get(resource, id);
  const changed = Object.keys(after).filter((k) => k !== 'updated_at' && JSON.stringify(after[k]) !== JSON.stringify(before[k]));
  expect(changed.sort(), resource).toEqual(Object.keys(patch).sort());
}

describe('PATCH of one field', () => {
  it('leaves every other field as it was, on every resource', async () => {
    const pg = await create('postgresql-servers', { ip: '127.0.0.1', port: 5433, username: 'svc', password: 'pw-1' });
    await patchesOnly('postgresql-servers', pg, { name: 'main db' });
    const template = await create('database-templates', { name: 'odoo 18', postgresql_server_id: pg, template_db_name: 'tpl18' });
    await patchesOnly('database-templates', template, { name: 'odoo 18 ce' });
    const pkg = await create('trial-packages', {
      name: 'CRM',
      url_string: 'crm',
      auto_run_subscription: true,
      database_template_id: template,
      user_limit: 7,
      trial_duration_days: 30,
    });
    await patchesOnly('trial-packages', pkg, { name: 'CRM trial' });
    const partner = await create('partners', { name: 'Acme', email: 'acme@example.com', mobile: '+49 1' });
    await patchesOnly('partners', partner, { company_name: 'Acme GmbH' });
    const sub = await create('subscriptions', { name: 'acme', partner_id: partner, is_trial: true, user_limit: 9 });
    await patchesOnly('subscriptions', sub, { stage_limit: 3 });
    const req = await create('trial-requests', {
      name: 'Jane',
      company_name: 'Acme',
      email: 'jane@example.com',
      mobile: '+49 170 1234567',
      company_size: '11-30',
      trial_package_id: pkg,
    });
    await patchesOnly('trial-requests', req, { notes: 'called back' });
    const root = await create('root-servers', {
      ip: '10.1.1.1',
      port: 2222,
      sudo_user: true,
      monitor_update_interval: '30s',
      password: 'x-pw',
    });
    await patchesOnly('root-servers', root, { name: 'web 1' });
    const backup = await create('backup-servers', {
      url: 'http://backup.invalid',
      download_url: 'http://dl.invalid',
      api_key: 'k1',
      enable_cloud_backup: true,
    });
    await patchesOnly('backup-servers', backup, { enable_local_backup: true });
    const ntfy = await create('notification-servers', {
      provider: 'selfhosted_push',
      url: 'http://ntfy.invalid',
      token_expiry_days: 30,
      is_default: true,
    });
    await patchesOnly('notification-servers', ntfy, { name: 'push' });
    const rule = await create('alert-rules', {
      name: 'RAM',
      metric: 'ram_percent',
      threshold: 80,
      duration_seconds: 120,
      root_server_ids: [root],
      notification_server_id: ntfy,
      topic: 'ops',
      email_to: ['ops@example.com'],
      notify_resolved: false,
      active: false,
    });
    await patchesOnly('alert-rules', rule, { name: 'RAM busy' });
    const hook = await create('webhooks', {
      model_name: 'res.partner',
      rec_id: partner,
      message_type: 'notification',
      subtype_xmlid: 'mail.mt_alert',
    });
    await patchesOnly('webhooks', hook, { active: false });
    const account = await create('git-accounts', { name: 'gh', access_token: 'ghp_x' });
    await patchesOnly('git-accounts', account, { name: 'github' });
    const repo = await create('git-repositories', {
      name: 'acme/addons',
      branch_name: 'main',
      git_account_id: account,
      deploy_path: '/srv/addons',
    });
    await patchesOnly('git-repositories', repo, { branch_name: 'release' });
  });

  it('renaming an administrator keeps it an administrator; e-mails are lower-cased on PATCH as on create', async () => {
    const admin = await create('users', { email: 'Boss@Example.com', group: 'administrator' });
    expect((await get('users', admin)).email).toBe('boss@example.com');
    await patchesOnly('users', admin, { name: 'The Boss' });
    expect((await get('users', admin)).group).toBe('administrator');
    const res = await request(t.app, t.as.admin, {
      method: 'PATCH',
      url: `/api/v1/users/${admin}`,
      payload: { email: 'New.Boss@Example.COM' },
    });
    expect(res.json().email).toBe('new.boss@example.com');
  });

  it('settings: changing one keeps the others', async () => {
    const before = (await request(t.app, t.as.admin, { method: 'GET', url: '/api/v1/settings' })).json();
    const res = await request(t.app, t.as.admin, { method: 'PATCH', url: '/api/v1/settings', payload: { webhook_call_log_days: 30 } });
    expect(res.json()).toEqual({ ...before, webhook_call_log_days: 30, updated_at: expect.any(String) });
  });

  it('no PATCH body in the API documents a default (a default would be applied to fields left out)', async () => {
    const doc = (await t.app.inject({ method: 'GET', url: '/api/v1/openapi.json' })).json();
    const withDefaults: string[] = [];
    for (const [path, ops] of Object.entries(
      doc.paths as Record<
        string,
        Record<string, { requestBody?: { content: Record<string, { schema: { properties?: Record<string, { default?: unknown }> } }> } }>
      >,
    )) {
      const props = ops.patch?.requestBody?.content['application/json']?.schema.properties ?? {};
      for (const [name, schema] of Object.entries(props)) if ('default' in schema) withDefaults.push(`${path} ${name}`);
    }
    expect(Object.keys(doc.paths).filter((p: string) => (doc.paths[p] as object) && 'patch' in doc.paths[p]).length).toBeGreaterThan(10);
    expect(withDefaults).toEqual([]);
  });
});
