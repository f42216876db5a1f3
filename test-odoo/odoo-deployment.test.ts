// A subscription deployed on a host that runs Odoo, on the real Odoo: the template built by the
// host's Odoo, the copy owned by the host's role, the deployment's last step signing in as the
// customer through that Odoo; then the customer signs in with the mailed password over JSON-RPC and
// through the web login form, and web.base.url stays the service's.
import { describe, expect, test } from 'vitest';
import { request, waitForJob } from '../test/helpers/api.js';
import { credentialsIn } from '../test/helpers/customer-credentials.js';
import { textOf, useSmtpServer } from '../test/helpers/smtp.js';
import { queryIn } from '../test/helpers/odoo-template.js';
import { adminQuery } from '../test/helpers/pg.js';
import { jsonRpc, odooGet, odooSources, packagesOf, useOdooFixture } from './odoo-fixture.js';

const sources = odooSources();
const smtp = useSmtpServer();
const f = useOdooFixture({
  get SMTP_URL() {
    return smtp.url;
  },
  SUBSCRIPTION_URL: 'https://{database_name}.odoo.test',
} as Record<string, string>);

/** The login and password the trial_ready mail tells. */

/** The web login form of `database`, reached as the proxy would (X-Forwarded-Host, for the dbfilter). */
async function webLogin(port: number, database: string, login: string, password: string, host = `${database}.odoo.test`) {
  const headers = { 'x-forwarded-host': host, 'x-forwarded-proto': 'https' };
  const form = await odooGet(port, '/web/login', { headers });
  const cookie = (form.headers.get('set-cookie') ?? '').split(';')[0]!;
  const csrf = /name="csrf_token" value="([^"]+)"/.exec(await form.text())?.[1];
  expect(csrf, 'the login form has a CSRF token').toBeTruthy();
  const body = new URLSearchParams({ login, password, csrf_token: csrf!, redirect: '' });
  const res = await odooGet(port, '/web/login', {
    method: 'POST',
    headers: { ...headers, cookie, 'content-type': 'application/x-www-form-urlencoded' },
    body: body.toString(),
  });
  return { status: res.status, location: res.headers.get('location') };
}

describe.each(sources.map((s, i) => ({ ...s, port: 18569 + 100 * i })))('deployment on Odoo $name', (src) => {
  /** What the first test made, for the next. */
  const made = { host: 0, templateId: 0 };

  async function subscription(database: string) {
    const email = `customer-${src.series}-${Date.now()}@example.com`;
    const partner = await request(f.t.app, f.t.as.operator, { method: 'POST', url: '/api/v1/partners', payload: { name: 'Jane', email } });
    const created = await request(f.t.app, f.t.as.operator, {
      method: 'POST',
      url: '/api/v1/subscriptions',
      payload: {
        name: 'Trial',
        partner_id: partner.json().id,
        database_template_id: made.templateId,
        database_name: database,
        is_trial: true,
        trial_end_date: new Date(Date.now() + 14 * 86_400_000).toISOString(),
      },
    });
    expect(created.statusCode, created.body).toBe(201);
    const id = created.json().id as number;
    const act = (name: string) => request(f.t.app, f.t.as.operator, { method: 'POST', url: `/api/v1/subscriptions/${id}/actions/${name}` });
    expect((await act('confirm')).statusCode).toBe(200);
    const job = await waitForJob(f.t.app, f.t.as.user, (await act('deploy')).json().job_id, 10 * 60_000);
    return { id, email, job };
  }

  test('a trial from the template built by Odoo to the customer signed in, as the mail says', async () => {
    const version = await f.newVersion({
      name: `${src.name}-deploy`,
      source_url: `file://${src.file}`,
      source_sha256: src.sha256,
      os_packages: packagesOf(src.series),
      server_wide_modules: src.series >= 19 ? ['base', 'rpc', 'web'] : ['base', 'web'],
    });
    const host = await f.newHost();
    const setup = await f.runJob(host, 'setup_odoo', {
      odoo_version_id: version.id,
      postgresql_server_id: f.pgServerId,
      http_port: src.port,
      workers: 0,
      max_cron_threads: 0,
    });
    expect(setup.state, JSON.stringify(setup)).toBe('completed');
    const templateDb = `svc_odoo_d_tpl${src.series}_${Date.now().toString(36)}`;
    const template = await request(f.t.app, f.t.as.operator, {
      method: 'POST',
      url: '/api/v1/database-templates',
      payload: { name: `Odoo ${src.name}`, postgresql_server_id: f.pgServerId, template_db_name: templateDb, root_server_id: host },
    });
    expect(template.statusCode, template.body).toBe(201);
    const built = await f.runJob(template.json().id, 'build', { modules: ['base'] }, 'database-templates');
    expect(built.state, JSON.stringify(built)).toBe('completed');

    made.host = host;
    made.templateId = template.json().id;
    const database = `svc_odoo_d_c${src.series}_${Date.now().toString(36)}`;
    const { id, email, job } = await subscription(database);
    expect(job.state, job.error).toBe('completed');

    // The deployment signed in as the customer before it said running.
    const steps = await f.t.ctx.db.actionLog.findMany({ where: { model_name: 'svc.subscription', rec_id: id, action_type: 'deployment' } });
    expect(steps.find((s) => s.input_text.includes('sign in to'))).toMatchObject({ status: 'success' });
    const [owner] = await adminQuery<{ owner: string; rolsuper: boolean }>(
      'SELECT r.rolname AS owner, r.rolsuper FROM pg_database d JOIN pg_roles r ON r.oid = d.datdba WHERE d.datname = $1',
      [database],
    );
    expect(owner!.rolsuper).toBe(false);

    const { login, password } = credentialsIn(textOf(await smtp.waitFor(email)));
    expect(login).toBe(email);
    const rpc = await jsonRpc(src.port, 'common', 'authenticate', [database, login, password, {}]);
    expect(JSON.parse(rpc.body).result).toBe(2);
    const wrong = await jsonRpc(src.port, 'common', 'authenticate', [database, login, 'admin', {}]);
    expect(JSON.parse(wrong.body).result).toBe(false);

    // The web login form, from the customer's address and then from another one: web.base.url stays.
    expect(await webLogin(src.port, database, login, password)).toMatchObject({ status: 303 });
    expect(await webLogin(src.port, database, login, password, `${database}.elsewhere.example`)).toMatchObject({ status: 303 });
    const rows = await queryIn(database, "SELECT key, value FROM ir_config_parameter WHERE key LIKE 'web.base.url%' ORDER BY key");
    expect(rows).toEqual([
      { key: 'web.base.url', value: `https://${database}.odoo.test` },
      { key: 'web.base.url.freeze', value: 'True' },
    ]);
  });

  test('an Odoo that is down, or stopped, fails the deployment cleanly, naming the host, and leaves nothing behind', async () => {
    expect((await f.runJob(made.host, 'stop_odoo')).state).toBe('completed');
    try {
      const stopped = `svc_odoo_d_s${src.series}_${Date.now().toString(36)}`;
      const refused = await subscription(stopped);
      expect(refused.job.state).toBe('failed');
      expect(refused.job.error).toMatch(new RegExp(`Odoo on root server ${made.host} .* is stopped: the customer could not sign in`));
      // As if it had died without svc knowing: its record still says running.
      await f.t.ctx.db.rootServer.update({ where: { id: made.host }, data: { odoo_state: 'running' } });
      const down = `svc_odoo_d_x${src.series}_${Date.now().toString(36)}`;
      const { job } = await subscription(down);
      expect(job.state).toBe('failed');
      expect(job.error).toMatch(new RegExp(`Odoo on root server ${made.host} .*did not answer the customer's sign-in`));
      for (const database of [stopped, down]) {
        expect(await adminQuery('SELECT 1 FROM pg_database WHERE datname = $1', [database])).toEqual([]);
      }
    } finally {
      expect((await f.runJob(made.host, 'restart_odoo')).state).toBe('completed');
    }
  });
});
