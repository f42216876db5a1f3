// create_staging on the real Odoo (18.0 and 19.0): a subscription deployed on a host svc set up,
// with a record and an attachment in its filestore; a staging copy made while the customer's
// instance is asked all along (every request answered), which has the data and the file (a hard
// link), Odoo's neutralized state, its own uuid, secret and address, its ready mail to the operator
// (not the customer); listed, dropped by DELETE,
// and a second one dropped when it expires; refused (409) before the subscription runs.
// Odoo's ports: 18900 (first source), 18950 (second).
import { statSync } from 'node:fs';
import { describe, expect, test } from 'vitest';
import { request, waitForJob } from '../test/helpers/api.js';
import { credentialsIn } from '../test/helpers/customer-credentials.js';
import { queryIn } from '../test/helpers/odoo-template.js';
import { adminQuery } from '../test/helpers/pg.js';
import { textOf, useSmtpServer } from '../test/helpers/smtp.js';
import { jsonRpc, odooSources, packagesOf, useOdooFixture, rpcResult } from './odoo-fixture.js';

const sources = odooSources();
const smtp = useSmtpServer();
const f = useOdooFixture({
  get SMTP_URL() {
    return smtp.url;
  },
  SUBSCRIPTION_URL: 'https://{database_name}.odoo.test',
  STAGING_URL: 'https://{database_name}.staging.test',
} as Record<string, string>);

describe.each(sources.map((s, i) => ({ ...s, port: 18900 + 50 * i })))('staging on Odoo $name', (src) => {
  test('a neutralized online copy with the data and files, its own identity; listed, dropped, expired', async () => {
    const version = await f.newVersion({
      name: `${src.name}-staging`,
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
    const templateDb = `svc_odoo_s_tpl${src.series}_${Date.now().toString(36)}`;
    const template = await request(f.t.app, f.t.as.operator, {
      method: 'POST',
      url: '/api/v1/database-templates',
      payload: { name: `Odoo ${src.name} staging`, postgresql_server_id: f.pgServerId, template_db_name: templateDb, root_server_id: host },
    });
    expect(template.statusCode, template.body).toBe(201);
    const built = await f.runJob(template.json().id, 'build', { modules: ['base'] }, 'database-templates');
    expect(built.state, JSON.stringify(built)).toBe('completed');

    const database = `svc_odoo_s_c${src.series}_${Date.now().toString(36)}`;
    const email = `staging-${src.series}-${Date.now()}@example.com`;
    const partner = await request(f.t.app, f.t.as.operator, { method: 'POST', url: '/api/v1/partners', payload: { name: 'Jane', email } });
    const created = await request(f.t.app, f.t.as.operator, {
      method: 'POST',
      url: '/api/v1/subscriptions',
      payload: {
        name: 'Trial',
        partner_id: partner.json().id,
        database_template_id: template.json().id,
        database_name: database,
        is_trial: true,
        trial_end_date: new Date(Date.now() + 14 * 86_400_000).toISOString(),
      },
    });
    expect(created.statusCode, created.body).toBe(201);
    const id = created.json().id as number;
    const act = (name: string) => request(f.t.app, f.t.as.operator, { method: 'POST', url: `/api/v1/subscriptions/${id}/actions/${name}` });
    expect((await act('confirm')).statusCode).toBe(200);
    const early = await act('create_staging');
    expect(early.statusCode, early.body).toBe(409); // not running yet
    expect(early.body).toContain('only the instance of a running subscription is copied');
    const deployed = await waitForJob(f.t.app, f.t.as.user, (await act('deploy')).json().job_id, 10 * 60_000);
    expect(deployed.state, deployed.error).toBe('completed');
    const { login, password } = credentialsIn(textOf(await smtp.waitFor(email)));

    // Data and a file in the live instance.
    const uid = rpcResult((await jsonRpc(src.port, 'common', 'authenticate', [database, login, password, {}])).body) as number;
    const call = (db: string, model: string, method: string, args: unknown[], kw: object = {}) =>
      jsonRpc(src.port, 'object', 'execute_kw', [db, uid, password, model, method, args, kw]);
    rpcResult((await call(database, 'res.partner', 'create', [{ name: 'Staging probe' }])).body);
    const fileText = `staging ${Date.now()}`;
    rpcResult(
      (await call(database, 'ir.attachment', 'create', [{ name: 'probe.txt', datas: Buffer.from(fileText).toString('base64') }])).body,
    );
    const [stored] = await queryIn<{ store_fname: string }>(database, "SELECT store_fname FROM ir_attachment WHERE name = 'probe.txt'");
    expect(stored?.store_fname).toBeTruthy();

    // The tenant's own SQL: a CHECK calling its function while the copy's rows are written. Run in a
    // session of the server's administrator, the function's RESET ROLE would make it a superuser.
    const [{ owner } = { owner: '' }] = await adminQuery<{ owner: string }>(
      'SELECT pg_get_userbyid(datdba) AS owner FROM pg_database WHERE datname = $1',
      [database],
    );
    await queryIn(
      database,
      `SET ROLE "${owner}";
       CREATE FUNCTION public.svc_probe(i int) RETURNS bool LANGUAGE plpgsql AS $fn$
       BEGIN
         IF current_database() LIKE '%_stg_%' THEN
           RESET ROLE;
           IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN EXECUTE 'CREATE ROLE svc_staging_escalated'; END IF;
         END IF;
         RETURN true;
       END $fn$;
       CREATE TABLE public.svc_probe_rows (id int CHECK (public.svc_probe(id)));
       INSERT INTO public.svc_probe_rows VALUES (1);
       RESET ROLE`,
    );

    // The customer's instance is asked all along while the copy is made.
    const asked = { ok: 0, failed: [] as string[], stop: false };
    const asking = (async () => {
      while (!asked.stop) {
        try {
          const n = rpcResult((await call(database, 'res.partner', 'search_count', [[['name', '=', 'Staging probe']]])).body);
          if (n === 1) asked.ok++;
          else asked.failed.push(`count ${n}`);
        } catch (err) {
          asked.failed.push((err as Error).message);
        }
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    const staged = await waitForJob(f.t.app, f.t.as.operator, (await act('create_staging')).json().job_id, 10 * 60_000);
    asked.stop = true;
    await asking;
    const escalated = await adminQuery("SELECT 1 FROM pg_roles WHERE rolname = 'svc_staging_escalated'");
    await adminQuery('DROP ROLE IF EXISTS svc_staging_escalated');
    expect(escalated, 'the tenant function ran as a superuser during the copy').toEqual([]);
    expect(staged.state, JSON.stringify(staged)).toBe('completed');
    expect(asked.failed).toEqual([]);
    expect(asked.ok).toBeGreaterThan(0);
    const copy = (staged.result as { database_name: string }).database_name;
    // Every action-log row of the copy names its operation (the SQL, the SSH commands, the filestore).
    const operationsOf = async (jobId: string) =>
      new Set((await f.t.ctx.db.actionLog.findMany({ where: { job_id: jobId } })).map((r) => r.input_text.split(':')[0]));
    expect(await operationsOf(staged.id)).toEqual(new Set(['create_staging']));

    // The ready mail went to the operator who asked, not to the customer.
    const mailedTo = (staged.result as { mailed_to: string | null }).mailed_to;
    expect(mailedTo).toBeTruthy();
    expect(mailedTo).not.toBe(email);
    // (The same operator asks in every version of this file: its mail for this copy is looked for.)
    await expect
      .poll(() => smtp.messages.some((m) => m.to.includes(mailedTo!) && textOf(m).includes(`https://${copy}.staging.test`)))
      .toBe(true);
    expect(smtp.messages.filter((m) => m.to.includes(email))).toHaveLength(1); // the credentials only

    const listed = await request(f.t.app, f.t.as.operator, { method: 'GET', url: `/api/v1/subscriptions/${id}/staging-instances` });
    expect(listed.statusCode, listed.body).toBe(200);
    const [item] = listed.json().items;
    expect(item).toMatchObject({ database_name: copy, url: `https://${copy}.staging.test`, state: 'ready', error: null });
    const days = (Date.parse(item.expires_at) - Date.parse(item.created_at)) / 86_400_000;
    expect(days).toBeCloseTo(7, 2);

    // The copy: the customer signs in with the same password, sees the record and the file.
    expect(rpcResult((await jsonRpc(src.port, 'common', 'authenticate', [copy, login, password, {}])).body)).toBe(uid);
    expect(rpcResult((await call(copy, 'res.partner', 'search_count', [[['name', '=', 'Staging probe']]])).body)).toBe(1);
    const [att] = rpcResult((await call(copy, 'ir.attachment', 'search_read', [[['name', '=', 'probe.txt']]], { fields: ['datas'] })).body);
    expect(Buffer.from(att.datas, 'base64').toString()).toBe(fileText);
    const fileOf = (db: string) => `${f.base}/data/filestore/${db}/${stored!.store_fname}`;
    expect(statSync(fileOf(copy)).ino).toBe(statSync(fileOf(database)).ino); // a hard link

    // Neutralized by Odoo, its own identity and address; the live instance untouched.
    const params = async (db: string) =>
      Object.fromEntries(
        (
          await queryIn<{ key: string; value: string }>(
            db,
            "SELECT key, value FROM ir_config_parameter WHERE key LIKE 'database.%' OR key = 'web.base.url'",
          )
        ).map((r) => [r.key, r.value]),
      );
    const live = await params(database);
    const staging = await params(copy);
    expect(staging['database.is_neutralized']).toBe('true');
    expect(live['database.is_neutralized']).toBeUndefined();
    expect(staging['database.uuid']).not.toBe(live['database.uuid']);
    expect(staging['database.secret']).not.toBe(live['database.secret']);
    expect(staging['web.base.url']).toBe(`https://${copy}.staging.test`);
    expect(live['web.base.url']).toBe(`https://${database}.odoo.test`);
    const [counts] = await queryIn<{ crons: number; servers: number }>(
      copy,
      `SELECT (SELECT count(*) FROM ir_cron c WHERE c.active AND c.id NOT IN (SELECT res_id FROM ir_model_data WHERE model = 'ir.cron' AND name = 'autovacuum_job'))::int AS crons,
              (SELECT count(*) FROM ir_mail_server WHERE active AND smtp_host <> 'invalid')::int AS servers`,
    );
    expect(counts).toEqual({ crons: 0, servers: 0 });
    // The copy is a role of its own: whoever tests on it reaches nothing of production's.
    const owners = await adminQuery<{ datname: string; owner: string }>(
      'SELECT datname, pg_get_userbyid(datdba) AS owner FROM pg_database WHERE datname = ANY($1)',
      [[copy, database]],
    );
    const ownerOf = (name: string) => owners.find((o) => o.datname === name)!.owner;
    expect(ownerOf(copy)).toMatch(/^svc_db_\d+$/);
    expect(ownerOf(database)).toMatch(/^svc_db_\d+$/);
    expect(ownerOf(copy)).not.toBe(ownerOf(database));

    // DELETE: the copy's database and filestore go, the live one stays.
    const del = await request(f.t.app, f.t.as.operator, {
      method: 'DELETE',
      url: `/api/v1/subscriptions/${id}/staging-instances/${item.id}`,
    });
    expect(del.statusCode, del.body).toBe(202);
    expect((await waitForJob(f.t.app, f.t.as.operator, del.json().job_id, 5 * 60_000)).state).toBe('completed');
    expect(await operationsOf(del.json().job_id)).toEqual(new Set(['drop_staging']));
    expect(await adminQuery('SELECT 1 FROM pg_database WHERE datname = $1', [copy])).toEqual([]);
    expect(await adminQuery('SELECT 1 FROM pg_roles WHERE rolname = $1', [ownerOf(copy)])).toEqual([]);
    expect(await adminQuery('SELECT 1 FROM pg_roles WHERE rolname = $1', [ownerOf(database)])).toHaveLength(1);
    expect(() => statSync(`${f.base}/config/tenant-roles/${copy}`)).toThrow();
    expect(() => statSync(`${f.base}/data/filestore/${copy}`)).toThrow();
    expect(statSync(fileOf(database)).isFile()).toBe(true);

    // A second copy, past its expiry: the expiry job drops it.
    const second = await waitForJob(f.t.app, f.t.as.operator, (await act('create_staging')).json().job_id, 10 * 60_000);
    expect(second.state, JSON.stringify(second)).toBe('completed');
    const secondDb = (second.result as { database_name: string }).database_name;
    await f.t.ctx.db.stagingInstance.updateMany({ where: { database_name: secondDb }, data: { expires_at: new Date(Date.now() - 1000) } });
    const { stagingJobs } = await import('../src/staging/staging-job-specs.js');
    const expireId = await f.t.ctx.queues.enqueue(stagingJobs.staging_expire, { user_id: null });
    expect((await waitForJob(f.t.app, f.t.as.operator, expireId, 5 * 60_000)).state).toBe('completed');
    expect(await adminQuery('SELECT 1 FROM pg_database WHERE datname = $1', [secondDb])).toEqual([]);
    const after = await request(f.t.app, f.t.as.operator, { method: 'GET', url: `/api/v1/subscriptions/${id}/staging-instances` });
    expect(after.json().items).toEqual([]);
  });
});
