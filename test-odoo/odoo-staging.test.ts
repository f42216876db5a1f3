// create_staging on the real Odoo (18.0 and 19.0): a subscription deployed on a host svc set up,
// with a record and an attachment in its filestore; a staging copy made while the customer's
// instance is asked all along (every request answered), which has the data and the file (a hard
// link), Odoo's neutralized state, its own uuid, secret and address, its ready mail to the operator
// (not the customer); listed; following the rollouts of its host (a push adding a field: the copy
// refreshed, the field there, still neutralized; a push Odoo refuses: the copy put back and still
// stale with that commit, saying why); dropped by DELETE, and a second one dropped when it
// expires; refused (409) before the subscription runs. Odoo's ports: 18900 (first source), 18950.
import { statSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';
import { stagingJobs } from '../src/staging/staging-job-specs.js';
import { request, waitForJob } from '../test/helpers/api.js';
import { credentialsIn } from '../test/helpers/customer-credentials.js';
import { queryIn } from '../test/helpers/odoo-template.js';
import { startFakeGitHost, type FakeGitHost, type TestRepo } from '../test/helpers/git-host.js';
import { adminQuery } from '../test/helpers/pg.js';
import { textOf, useSmtpServer } from '../test/helpers/smtp.js';
import { jsonRpc, odooSources, useOdooFixture, rpcResult } from './odoo-fixture.js';
import { buildTemplate, newTemplate, odooHost, setupOdoo } from './odoo-host.js';

const TOKEN = 'ghp_StagingTestToken0123456789abcdefg';
const sources = odooSources();
const smtp = useSmtpServer();
let git: FakeGitHost;
beforeAll(async () => {
  git = await startFakeGitHost(TOKEN);
});
afterAll(async () => {
  await git?.close();
});
const f = useOdooFixture({
  get SMTP_URL() {
    return smtp.url;
  },
  get GIT_API_URL() {
    return git.url;
  },
  SUBSCRIPTION_URL: 'https://{database_name}.odoo.test',
  STAGING_URL: 'https://{database_name}.staging.test',
} as Record<string, string>);

const MODULE = 'svc_staging_demo';

/** The addon deployed to the host: v2 adds a field; v3 a view naming a field that does not exist (Odoo refuses it at -u). */
function addon(version: 1 | 2 | 3): Record<string, string> {
  const data = ['security/ir.model.access.csv', ...(version === 3 ? ['views/demo.xml'] : [])];
  return {
    [`${MODULE}/__init__.py`]: 'from . import models\n',
    [`${MODULE}/__manifest__.py`]: `{"name": "svc staging demo", "version": "${version}.0", "depends": ["base"], "data": ${JSON.stringify(data)}, "license": "LGPL-3", "installable": True}\n`,
    [`${MODULE}/security/ir.model.access.csv`]:
      'id,name,model_id:id,group_id:id,perm_read,perm_write,perm_create,perm_unlink\naccess_demo,demo,model_svc_staging_demo,base.group_user,1,1,1,1\n',
    [`${MODULE}/models/__init__.py`]: 'from . import demo\n',
    [`${MODULE}/models/demo.py`]: [
      'from odoo import fields, models',
      '',
      '',
      'class SvcStagingDemo(models.Model):',
      '    _name = "svc.staging.demo"',
      '    _description = "svc staging demo"',
      '',
      '    name = fields.Char()',
      ...(version >= 2 ? ['    code = fields.Char(default="v2")'] : []),
      '',
    ].join('\n'),
    ...(version === 3
      ? {
          [`${MODULE}/views/demo.xml`]:
            '<odoo><record id="view_svc_staging_demo_form" model="ir.ui.view"><field name="name">svc.staging.demo.form</field><field name="model">svc.staging.demo</field><field name="arch" type="xml"><form><field name="no_such_field"/></form></field></record></odoo>\n',
        }
      : {}),
  };
}

describe.each(sources.map((s, i) => ({ ...s, port: 18900 + 50 * i })))('staging on Odoo $name', (src) => {
  // What the steps leave for the next: the repository, the subscription and its customer, the copy.
  let remote: TestRepo;
  let repoId: number;
  let id: number;
  let early: Awaited<ReturnType<typeof act>>;
  let login: string;
  let password: string;
  let uid: number;
  let storeFname: string;
  let staged: Awaited<ReturnType<typeof waitForJob>>;
  let copy: string;
  let item: { id: number; expires_at: string; created_at: string };
  let owners: { datname: string; owner: string }[];
  let copyOid: string;
  const database = `svc_odoo_s_c${src.series}_${Date.now().toString(36)}`;
  const email = `staging-${src.series}-${Date.now()}@example.com`;
  const fileText = `staging ${Date.now()}`;
  const act = (name: string) => request(f.t.app, f.t.as.operator, { method: 'POST', url: `/api/v1/subscriptions/${id}/actions/${name}` });
  const call = (db: string, model: string, method: string, args: unknown[], kw: object = {}) =>
    jsonRpc(src.port, 'object', 'execute_kw', [db, uid, password, model, method, args, kw]);
  const fileOf = (db: string) => `${f.base}/data/filestore/${db}/${storeFname}`;
  const ownerOf = (name: string) => owners.find((o) => o.datname === name)!.owner;
  // Every action-log row of a job names its operation (the SQL, the SSH commands, the filestore).
  const operationsOf = async (jobId: string) =>
    new Set((await f.t.ctx.db.actionLog.findMany({ where: { job_id: jobId } })).map((r) => r.input_text.split(':')[0]));
  const params = async (db: string) =>
    Object.fromEntries(
      (
        await queryIn<{ key: string; value: string }>(
          db,
          "SELECT key, value FROM ir_config_parameter WHERE key LIKE 'database.%' OR key = 'web.base.url'",
        )
      ).map((r) => [r.key, r.value]),
    );
  const push = async () => {
    const res = await request(f.t.app, f.t.as.admin, {
      method: 'POST',
      url: `/api/v1/git-repositories/${repoId}/actions/push_commit`,
    });
    expect(res.statusCode, res.body).toBe(202);
    expect((await waitForJob(f.t.app, f.t.as.admin, res.json().job_id, 5 * 60_000)).state).toBe('completed');
    const commit = await f.t.ctx.db.gitCommit.findFirstOrThrow({ where: { repository_id: repoId }, orderBy: { id: 'desc' } });
    await vi.waitUntil(async () => (await f.t.ctx.db.rollout.findFirst({ where: { git_commit_id: commit.id } }))?.state === 'done', {
      timeout: 8 * 60_000,
      interval: 500,
    });
    return commit.commit_id;
  };
  const messages = (body: string) =>
    f.t.ctx.db.message.count({ where: { model_name: 'svc.subscription', rec_id: id, body: { startsWith: body } } });
  const columns = async (db: string) =>
    (await queryIn<{ c: string }>(db, "SELECT column_name AS c FROM information_schema.columns WHERE table_name = 'svc_staging_demo'")).map(
      (r) => r.c,
    );
  const stillNeutralized = async () => {
    expect((await params(copy))['database.is_neutralized']).toBe('true');
    const [active] = await queryIn<{ crons: number }>(
      copy,
      "SELECT count(*)::int AS crons FROM ir_cron c WHERE c.active AND c.id NOT IN (SELECT res_id FROM ir_model_data WHERE model = 'ir.cron' AND name = 'autovacuum_job')",
    );
    expect(active).toEqual({ crons: 0 });
    expect(rpcResult((await jsonRpc(src.port, 'common', 'authenticate', [copy, login, password, {}])).body)).toBe(uid);
  };
  const oidOf = async (name: string) =>
    (await adminQuery<{ oid: string }>('SELECT oid::text AS oid FROM pg_database WHERE datname = $1', [name]))[0]!.oid;

  // The host with a repository's addon on its addons path, its template built with it, and a
  // subscription of it (asked for a copy once before it runs), deployed, with a record and a file.
  beforeAll(async () => {
    const { host, setupBody } = await odooHost(f, src, { name: 'staging', prefix: 'svc_odoo_s', modules: false });
    // A repository deploying an addon to the host, put on its addons path by setup_odoo.
    const account = await request(f.t.app, f.t.as.admin, { method: 'POST', url: '/api/v1/git-accounts', payload: { access_token: TOKEN } });
    const repoName = `acme/staging-${src.series}`;
    remote = await git.repo(repoName);
    remote.commit(addon(1), 'v1');
    const repo = await request(f.t.app, f.t.as.admin, {
      method: 'POST',
      url: '/api/v1/git-repositories',
      payload: { name: repoName, branch_name: 'main', git_account_id: account.json().id, root_server_id: host },
    });
    expect(repo.statusCode, repo.body).toBe(201);
    repoId = repo.json().id;
    await push();
    await setupOdoo(f, host, setupBody);
    const templateDb = `svc_odoo_s_tpl${src.series}_${Date.now().toString(36)}`;
    const templateId = await newTemplate(f, host, `Odoo ${src.name} staging`, templateDb);
    await buildTemplate(f, templateId, [MODULE]);

    const partner = await request(f.t.app, f.t.as.operator, { method: 'POST', url: '/api/v1/partners', payload: { name: 'Jane', email } });
    const created = await request(f.t.app, f.t.as.operator, {
      method: 'POST',
      url: '/api/v1/subscriptions',
      payload: {
        name: 'Trial',
        partner_id: partner.json().id,
        database_template_id: templateId,
        database_name: database,
        is_trial: true,
        trial_end_date: new Date(Date.now() + 14 * 86_400_000).toISOString(),
      },
    });
    expect(created.statusCode, created.body).toBe(201);
    id = created.json().id as number;
    expect((await act('confirm')).statusCode).toBe(200);
    early = await act('create_staging');
    const deployed = await waitForJob(f.t.app, f.t.as.user, (await act('deploy')).json().job_id, 10 * 60_000);
    expect(deployed.state, deployed.error).toBe('completed');
    ({ login, password } = credentialsIn(textOf(await smtp.waitFor(email))));

    // Data and a file in the live instance.
    uid = rpcResult((await jsonRpc(src.port, 'common', 'authenticate', [database, login, password, {}])).body) as number;
    rpcResult((await call(database, 'res.partner', 'create', [{ name: 'Staging probe' }])).body);
    rpcResult(
      (await call(database, 'ir.attachment', 'create', [{ name: 'probe.txt', datas: Buffer.from(fileText).toString('base64') }])).body,
    );
    const [stored] = await queryIn<{ store_fname: string }>(database, "SELECT store_fname FROM ir_attachment WHERE name = 'probe.txt'");
    expect(stored?.store_fname).toBeTruthy();
    storeFname = stored!.store_fname;

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
  }, 20 * 60_000);

  test('refused (409) before the subscription runs', () => {
    expect(early.statusCode, early.body).toBe(409);
    expect(early.body).toContain('only the instance of a running subscription is copied');
  });

  test("a copy made while the customer's instance is asked all along: every request answered, the tenant's own SQL never a superuser's", async () => {
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
    staged = await waitForJob(f.t.app, f.t.as.operator, (await act('create_staging')).json().job_id, 10 * 60_000);
    asked.stop = true;
    await asking;
    const escalated = await adminQuery("SELECT 1 FROM pg_roles WHERE rolname = 'svc_staging_escalated'");
    await adminQuery('DROP ROLE IF EXISTS svc_staging_escalated');
    expect(escalated, 'the tenant function ran as a superuser during the copy').toEqual([]);
    expect(staged.state, JSON.stringify(staged)).toBe('completed');
    expect(asked.failed).toEqual([]);
    expect(asked.ok).toBeGreaterThan(0);
    copy = (staged.result as { database_name: string }).database_name;
    // Every action-log row of the copy names its operation (the SQL, the SSH commands, the filestore).
    expect(await operationsOf(staged.id)).toEqual(new Set(['create_staging']));
  });

  test('the ready mail went to the operator who asked, not to the customer', async () => {
    const mailedTo = (staged.result as { mailed_to: string | null }).mailed_to;
    expect(mailedTo).toBeTruthy();
    expect(mailedTo).not.toBe(email);
    // (The same operator asks in every version of this file: its mail for this copy is looked for.)
    await expect
      .poll(() => smtp.messages.some((m) => m.to.includes(mailedTo!) && textOf(m).includes(`https://${copy}.staging.test`)))
      .toBe(true);
    expect(smtp.messages.filter((m) => m.to.includes(email))).toHaveLength(1); // the credentials only
  });

  test('listed, ready, for seven days', async () => {
    const listed = await request(f.t.app, f.t.as.operator, { method: 'GET', url: `/api/v1/subscriptions/${id}/staging-instances` });
    expect(listed.statusCode, listed.body).toBe(200);
    [item] = listed.json().items;
    expect(item).toMatchObject({ database_name: copy, url: `https://${copy}.staging.test`, state: 'ready', error: null });
    const days = (Date.parse(item.expires_at) - Date.parse(item.created_at)) / 86_400_000;
    expect(days).toBeCloseTo(7, 2);
  });

  test('the customer signs in to the copy with the same password and sees the record and the file (a hard link)', async () => {
    expect(rpcResult((await jsonRpc(src.port, 'common', 'authenticate', [copy, login, password, {}])).body)).toBe(uid);
    expect(rpcResult((await call(copy, 'res.partner', 'search_count', [[['name', '=', 'Staging probe']]])).body)).toBe(1);
    const [att] = rpcResult((await call(copy, 'ir.attachment', 'search_read', [[['name', '=', 'probe.txt']]], { fields: ['datas'] })).body);
    expect(Buffer.from(att.datas, 'base64').toString()).toBe(fileText);
    expect(statSync(fileOf(copy)).ino).toBe(statSync(fileOf(database)).ino); // a hard link
  });

  test('neutralized by Odoo, its own identity, address and role; the live instance untouched', async () => {
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
    owners = await adminQuery<{ datname: string; owner: string }>(
      'SELECT datname, pg_get_userbyid(datdba) AS owner FROM pg_database WHERE datname = ANY($1)',
      [[copy, database]],
    );
    expect(ownerOf(copy)).toMatch(/^svc_db_\d+$/);
    expect(ownerOf(database)).toMatch(/^svc_db_\d+$/);
    expect(ownerOf(copy)).not.toBe(ownerOf(database));
  });

  test('a push adding a field: the live instance updated, the copy refreshed with it, still neutralized', async () => {
    // A push adding a field: the rollout updates the live instance and leaves the copy stale with its
    // commit; the copy is refreshed (the follow job, queued here rather than awaited each minute):
    // the field is there, it is still neutralized, the customer still signs in to it.
    copyOid = await oidOf(copy);
    remote.commit(addon(2), 'v2: a field');
    const v2 = await push();
    await f.t.ctx.queues.enqueue(stagingJobs.staging_follow, { user_id: null });
    await vi.waitUntil(async () => (await messages(`Staging copy ${copy} was updated to commit ${v2.slice(0, 12)}`)) === 1, {
      timeout: 8 * 60_000,
      interval: 1000,
    });
    const refreshed = (
      await request(f.t.app, f.t.as.operator, { method: 'GET', url: `/api/v1/subscriptions/${id}/staging-instances` })
    ).json().items[0];
    expect(refreshed).toMatchObject({ id: item.id, state: 'ready', stale_commit: null, error: null });
    expect(await columns(database)).toContain('code');
    expect(await columns(copy)).toContain('code');
    await stillNeutralized();
    expect(rpcResult((await call(copy, 'res.partner', 'search_count', [[['name', '=', 'Staging probe']]])).body)).toBe(1);
    expect(await oidOf(copy)).toBe(copyOid);
  });

  test('a push Odoo refuses: the copy put back by its refresh, stale with that commit, saying why', async () => {
    // A push Odoo refuses: the live instance is put back by its rollout, the copy by its refresh,
    // which leaves it stale with that commit and says why.
    remote.commit(addon(3), 'v3: a view Odoo refuses');
    const v3 = await push();
    await f.t.ctx.queues.enqueue(stagingJobs.staging_follow, { user_id: null });
    await vi.waitUntil(
      async () => (await messages(`refresh_failed: Staging copy ${copy} was not updated to commit ${v3.slice(0, 12)}`)) === 1,
      {
        timeout: 8 * 60_000,
        interval: 1000,
      },
    );
    const failed = (await request(f.t.app, f.t.as.operator, { method: 'GET', url: `/api/v1/subscriptions/${id}/staging-instances` })).json()
      .items[0];
    expect(failed).toMatchObject({ id: item.id, state: 'ready', stale_commit: v3 });
    expect(failed.error).toMatch(/it was put back as it was[\s\S]*no_such_field/);
    expect(await columns(copy)).toContain('code');
    expect(await queryIn(copy, "SELECT 1 FROM ir_ui_view WHERE model = 'svc.staging.demo'")).toEqual([]);
    await stillNeutralized();
    const leftovers = async (oid: string) => adminQuery('SELECT datname FROM pg_database WHERE datname LIKE $1', [`svcrb\\_${oid}\\_%`]);
    expect(await leftovers(copyOid)).toEqual([]);
    const restored = (await f.t.ctx.db.stagingInstance.findUniqueOrThrow({ where: { id: item.id } })).database_oid;
    expect(String(restored)).toBe(await oidOf(copy));
    expect(String(restored)).not.toBe(copyOid);
    expect(statSync(fileOf(copy)).ino).toBe(statSync(fileOf(database)).ino);
  });

  test("DELETE: the copy's database, role and filestore go, the live one stays", async () => {
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
  });

  test('a second copy, past its expiry: the expiry job drops it', async () => {
    const second = await waitForJob(f.t.app, f.t.as.operator, (await act('create_staging')).json().job_id, 10 * 60_000);
    expect(second.state, JSON.stringify(second)).toBe('completed');
    const secondDb = (second.result as { database_name: string }).database_name;
    await f.t.ctx.db.stagingInstance.updateMany({ where: { database_name: secondDb }, data: { expires_at: new Date(Date.now() - 1000) } });
    const expireId = await f.t.ctx.queues.enqueue(stagingJobs.staging_expire, { user_id: null });
    expect((await waitForJob(f.t.app, f.t.as.operator, expireId, 5 * 60_000)).state).toBe('completed');
    expect(await adminQuery('SELECT 1 FROM pg_database WHERE datname = $1', [secondDb])).toEqual([]);
    const after = await request(f.t.app, f.t.as.operator, { method: 'GET', url: `/api/v1/subscriptions/${id}/staging-instances` });
    expect(after.json().items).toEqual([]);
  });
});
