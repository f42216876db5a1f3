// A subscription deployed on a host that runs Odoo, on the real Odoo: the template built by the
// host's Odoo, the copy owned by the host's role, the deployment's last step signing in as the
// customer through that Odoo; then the customer signs in with the mailed password over JSON-RPC and
// through the web login form, and web.base.url stays the service's; the first screen of a new instance
// (first-screen.ts) on the same host and template. Odoo ports 18569 (first source), 18669.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, test } from 'vitest';
import { request, waitForJob } from '../test/helpers/api.js';
import { credentialsIn } from '../test/helpers/customer-credentials.js';
import { textOf, useSmtpServer } from '../test/helpers/smtp.js';
import { queryIn } from '../test/helpers/odoo-template.js';
import { adminQuery } from '../test/helpers/pg.js';
import { jsonRpc, odooGet, odooSources, useOdooFixture } from './odoo-fixture.js';
import { firstScreenTests } from './first-screen.js';
import { type Deployed, deploySubscription, useOdooHost } from './odoo-host.js';

const sources = odooSources();
const smtp = useSmtpServer();
const f = useOdooFixture({
  get SMTP_URL() {
    return smtp.url;
  },
  SUBSCRIPTION_URL: 'https://{database_name}.odoo.test',
} as Record<string, string>);

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
  const made = useOdooHost(f, src, { name: 'deploy', prefix: 'svc_odoo_d' });
  const subscription = (database: string) =>
    deploySubscription(f, { templateId: made.templateId, database, email: `customer-${src.series}-${Date.now()}@example.com` });

  describe('a trial from the template built by Odoo', () => {
    const database = `svc_odoo_d_c${src.series}_${Date.now().toString(36)}`;
    let deployed: Deployed;
    beforeAll(async () => {
      deployed = await subscription(database);
      expect(deployed.job.state, deployed.job.error).toBe('completed');
    }, 15 * 60_000);

    test('the deployment signed in as the customer before it said running; no superuser owns the copy', async () => {
      const steps = await f.t.ctx.db.actionLog.findMany({
        where: { model_name: 'svc.subscription', rec_id: deployed.id, action_type: 'deployment' },
      });
      expect(steps.find((s) => s.input_text.includes('sign in to'))).toMatchObject({ status: 'success' });
      const [owner] = await adminQuery<{ owner: string; rolsuper: boolean }>(
        'SELECT r.rolname AS owner, r.rolsuper FROM pg_database d JOIN pg_roles r ON r.oid = d.datdba WHERE d.datname = $1',
        [database],
      );
      expect(owner!.rolsuper).toBe(false);
    });

    test('the customer signs in over JSON-RPC with the mailed password, and with no other', async () => {
      const { login, password } = credentialsIn(textOf(await smtp.waitFor(deployed.email)));
      expect(login).toBe(deployed.email);
      const rpc = await jsonRpc(src.port, 'common', 'authenticate', [database, login, password, {}]);
      expect(JSON.parse(rpc.body).result).toBe(2);
      const wrong = await jsonRpc(src.port, 'common', 'authenticate', [database, login, 'admin', {}]);
      expect(JSON.parse(wrong.body).result).toBe(false);
    });

    test("the web login form, from the customer's address and then from another one: web.base.url stays the service's", async () => {
      const { login, password } = credentialsIn(textOf(await smtp.waitFor(deployed.email)));
      expect(await webLogin(src.port, database, login, password)).toMatchObject({ status: 303 });
      expect(await webLogin(src.port, database, login, password, `${database}.elsewhere.example`)).toMatchObject({ status: 303 });
      const rows = await queryIn(database, "SELECT key, value FROM ir_config_parameter WHERE key LIKE 'web.base.url%' ORDER BY key");
      expect(rows).toEqual([
        { key: 'web.base.url', value: `https://${database}.odoo.test` },
        { key: 'web.base.url.freeze', value: 'True' },
      ]);
    });
  });

  test("tenants of one host are apart: each database is its own role's, and a tenant administrator's SQL reaches no other tenant, the template or the host's role", async () => {
    const a = `svc_odoo_d_a${src.series}_${Date.now().toString(36)}`;
    const b = `svc_odoo_d_b${src.series}_${Date.now().toString(36)}`;
    const [subA, subB] = [await subscription(a), await subscription(b)];
    expect([subA.job.state, subB.job.state], `${subA.job.error} ${subB.job.error}`).toEqual(['completed', 'completed']);
    const host = await f.t.ctx.db.rootServer.findUniqueOrThrow({ where: { id: made.host } });
    const template = await f.t.ctx.db.databaseTemplate.findUniqueOrThrow({ where: { id: made.templateId } });
    const owners = await adminQuery<{ datname: string; owner: string; rolsuper: boolean; rolcreatedb: boolean; rolcreaterole: boolean }>(
      `SELECT d.datname, r.rolname AS owner, r.rolsuper, r.rolcreatedb, r.rolcreaterole
         FROM pg_database d JOIN pg_roles r ON r.oid = d.datdba WHERE d.datname = ANY($1) ORDER BY d.datname = $2 DESC`,
      [[a, b], a],
    );
    const [roleA, roleB] = owners.map((o) => o.owner);
    for (const o of owners) expect(o).toMatchObject({ rolsuper: false, rolcreatedb: false, rolcreaterole: false });
    expect(new Set([roleA, roleB, host.odoo_db_user]).size, 'two roles of their own, neither the host role').toBe(3);
    // Each role owns its database and nothing else (no other database, nothing outside it).
    const owned = await adminQuery<{ n: number }>(
      "SELECT count(*)::int AS n FROM pg_shdepend s JOIN pg_roles r ON r.oid = s.refobjid WHERE r.rolname = ANY($1) AND s.deptype = 'o' AND s.classid = 'pg_database'::regclass",
      [[roleA, roleB]],
    );
    expect(owned[0]!.n).toBe(2);

    // B works, so its Odoo holds connections with B's last queries.
    const credsB = credentialsIn(textOf(await smtp.waitFor(subB.email)));
    expect(JSON.parse((await jsonRpc(src.port, 'common', 'authenticate', [b, credsB.login, credsB.password, {}])).body).result).toBe(2);

    // A's administrator, through the proxy as the host's Caddy forwards, with Python and env.cr in a server action.
    const credsA = credentialsIn(textOf(await smtp.waitFor(subA.email)));
    const proxied = { 'x-odoo-database': a, 'x-forwarded-for': '203.0.113.7', 'x-forwarded-host': `${a}.odoo.test` };
    const call = async (model: string, method: string, args: unknown[]) => {
      const res = await odooGet(src.port, '/jsonrpc', {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...proxied },
        body: JSON.stringify({
          jsonrpc: '2.0',
          method: 'call',
          id: 1,
          params: { service: 'object', method: 'execute_kw', args: [a, 2, credsA.password, model, method, args] },
        }),
      });
      const answer = JSON.parse(await res.text());
      if (answer.error) throw new Error(JSON.stringify(answer.error));
      return answer.result;
    };
    const [model] = await call('ir.model', 'search_read', [[['model', '=', 'res.partner']], ['id']]);
    const runCode = async (code: string) => {
      const actionId = await call('ir.actions.server', 'create', [{ name: 'probe', model_id: model.id, state: 'code', code }]);
      return call('ir.actions.server', 'run', [[actionId]]).catch((err: Error) => ({ error: err.message }));
    };
    const attempts: Record<string, string> = {
      whoami: 'SELECT current_user',
      others_queries: `SELECT count(*) FROM pg_stat_activity WHERE datname = '${b}' AND query <> '<insufficient privilege>'`,
      others_sessions: `SELECT count(*) FROM pg_stat_activity WHERE datname = '${b}'`,
      alter_other: `ALTER DATABASE "${b}" SET work_mem = '64kB'`,
      rename_other: `ALTER DATABASE "${b}" RENAME TO "${b}_x"`,
      rename_template: `ALTER DATABASE "${template.template_db_name}" RENAME TO "${template.template_db_name}_x"`,
      terminate_other: `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${b}'`,
      host_role_password: `ALTER ROLE "${host.odoo_db_user}" PASSWORD 'taken'`,
    };
    const ran = await runCode(
      [
        'out = {}',
        `for name, sql in ${JSON.stringify(Object.entries(attempts))}:`,
        '    env.cr.execute("SAVEPOINT svc_probe")',
        '    try:',
        '        env.cr.execute(sql)',
        '        out[name] = "ok: %s" % (env.cr.fetchall() if env.cr.description else "")',
        '        env.cr.execute("RELEASE SAVEPOINT svc_probe")',
        '    except Exception as e:',
        '        env.cr.execute("ROLLBACK TO SAVEPOINT svc_probe")',
        '        out[name] = "error: %s" % e',
        "action = {'type': 'ir.actions.client', 'tag': 'display_notification', 'params': out}",
      ].join('\n'),
    );
    const out = ran.params as Record<string, string>;
    expect(out.whoami).toBe(`ok: [('${roleA}',)]`);
    expect(out.others_sessions).not.toBe('ok: [(0,)]'); // B's Odoo is connected: the next check can see something
    expect(out.others_queries).toBe('ok: [(0,)]');
    for (const name of ['alter_other', 'rename_other', 'rename_template', 'terminate_other', 'host_role_password']) {
      expect(out[name], name).toMatch(/^error: .*(must be owner|permission denied|must be a member)/);
    }
    // Outside a transaction (psycopg2 sends no BEGIN after the tenant's own COMMIT): dropping or copying B.
    for (const sql of [`DROP DATABASE "${b}" WITH (FORCE)`, `CREATE DATABASE "${a}_copy" TEMPLATE "${b}"`]) {
      const refused = await runCode(`env.cr.execute("COMMIT")\nenv.cr.execute(${JSON.stringify(sql)})`);
      expect(JSON.stringify(refused), sql).toMatch(/must be owner|permission denied/);
    }
    const left = await adminQuery<{ datname: string }>('SELECT datname FROM pg_database WHERE datname = ANY($1) ORDER BY 1', [
      [a, b, `${a}_copy`, template.template_db_name],
    ]);
    expect(left.map((r) => r.datname).sort()).toEqual([a, b, template.template_db_name].sort());
    expect(JSON.parse((await jsonRpc(src.port, 'common', 'authenticate', [b, credsB.login, credsB.password, {}])).body).result).toBe(2);

    // Dropped with its database: the role and the credentials file go too.
    const cancel = await request(f.t.app, f.t.as.operator, { method: 'POST', url: `/api/v1/subscriptions/${subA.id}/actions/cancel` });
    expect(cancel.statusCode, cancel.body).toBe(200);
    const drop = await request(f.t.app, f.t.as.admin, {
      method: 'POST',
      url: `/api/v1/subscriptions/${subA.id}/actions/drop_database`,
      payload: { skip_backup: true },
    });
    expect(drop.statusCode, drop.body).toBe(202);
    const dropped = await waitForJob(f.t.app, f.t.as.admin, drop.json().job_id, 5 * 60_000);
    expect(dropped.state, dropped.error).toBe('completed');
    expect(await adminQuery('SELECT 1 FROM pg_roles WHERE rolname = $1', [roleA])).toEqual([]);
    expect(existsSync(path.join(f.base, 'config', 'tenant-roles', a))).toBe(false);
    expect(existsSync(path.join(f.base, 'config', 'tenant-roles', b))).toBe(true);
  });

  // On this host and template too, before its Odoo is stopped: the first screen of a new instance.
  describe('the first screen', () => firstScreenTests(f, smtp, src, made));

  test('an Odoo that is down, or stopped, fails the deployment cleanly, naming the host, and leaves nothing behind', async () => {
    expect((await f.runJob(made.host, 'stop_odoo')).state).toBe('completed');
    try {
      const stopped = `svc_odoo_d_s${src.series}_${Date.now().toString(36)}`;
      const refused = await subscription(stopped);
      expect(refused.job.state).toBe('failed');
      // Placement leaves a stopped Odoo out, naming it (its only host: no host fits).
      expect(refused.job.error).toMatch(new RegExp(`No host fits .*root server ${made.host}\\b.*: Odoo is stopped`));
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
