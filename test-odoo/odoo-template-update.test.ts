// A template's `update` on the real Odoo (18.0 and 19.0) is undone when it fails, as a tenant's in a
// rollout: a host running Odoo, a repository deploying two addons (the second depends on the first),
// a template built with both and a record and a file of its own. A push where the first addon gains
// a field and the second a view Odoo refuses: `-u all` commits the first addon's new column before
// the second fails, so a template left as Odoo left it would be half-updated. Its update (queued by
// the rollout, then asked for by the operator) fails with Odoo's words in the job and the
// template's chatter, and the template is as it was: no new column, the first addon's version, the
// record and the file, no safety copy left; it is still the template (its identity follows the
// copy it was put back from), so a subscription deploys from it. A push fixing the view then
// updates the template, and its safety copy is removed. Odoo's ports: 19400 (first source), 19450.
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';
import { request, waitForJob } from '../test/helpers/api.js';
import { credentialsIn } from '../test/helpers/customer-credentials.js';
import { startFakeGitHost, type FakeGitHost, type TestRepo } from '../test/helpers/git-host.js';
import { queryIn } from '../test/helpers/odoo-template.js';
import { adminQuery } from '../test/helpers/pg.js';
import { textOf, useSmtpServer } from '../test/helpers/smtp.js';
import { jsonRpc, odooSources, rpcResult, useOdooFixture } from './odoo-fixture.js';
import { buildTemplate, deploySubscription, newTemplate, odooHost, setupOdoo } from './odoo-host.js';

const TOKEN = 'ghp_TemplateUpdateToken0123456789abcd';
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
} as Record<string, string>);

const FIRST = 'svc_tpl_first';
const SECOND = 'svc_tpl_second';

/** v1: a model; v2: a new field in the first, a view naming no field in the second; v3: the view fixed. */
function addons(version: 1 | 2 | 3): Record<string, string> {
  const manifest = (name: string, depends: string[], data: string[]) =>
    `{"name": "${name}", "version": "${version}.0", "depends": ${JSON.stringify(depends)}, "data": ${JSON.stringify(data)}, "license": "LGPL-3", "installable": True}\n`;
  return {
    [`${FIRST}/__init__.py`]: 'from . import models\n',
    [`${FIRST}/__manifest__.py`]: manifest('svc template first', ['base'], ['security/ir.model.access.csv']),
    [`${FIRST}/security/ir.model.access.csv`]:
      'id,name,model_id:id,group_id:id,perm_read,perm_write,perm_create,perm_unlink\naccess_first,first,model_svc_tpl_first,base.group_user,1,1,1,1\n',
    [`${FIRST}/models/__init__.py`]: 'from . import first\n',
    [`${FIRST}/models/first.py`]: [
      'from odoo import fields, models',
      '',
      '',
      'class SvcTplFirst(models.Model):',
      '    _name = "svc.tpl.first"',
      '    _description = "svc template first"',
      '',
      '    name = fields.Char()',
      ...(version >= 2 ? ['    code = fields.Char(default="v2")'] : []),
      '',
    ].join('\n'),
    [`${SECOND}/__init__.py`]: '',
    [`${SECOND}/__manifest__.py`]: manifest('svc template second', [FIRST], version >= 2 ? ['views/first.xml'] : []),
    ...(version >= 2
      ? {
          [`${SECOND}/views/first.xml`]: [
            '<odoo>',
            '  <record id="view_svc_tpl_first_form" model="ir.ui.view">',
            '    <field name="name">svc.tpl.first.form</field>',
            '    <field name="model">svc.tpl.first</field>',
            `    <field name="arch" type="xml"><form><field name="name"/><field name="${version === 2 ? 'no_such_field' : 'code'}"/></form></field>`,
            '  </record>',
            '</odoo>',
            '',
          ].join('\n'),
        }
      : {}),
  };
}

describe.each(sources.map((s, i) => ({ ...s, port: 19400 + 50 * i })))('template update on Odoo $name', (src) => {
  // What the steps leave for the next: the host, the repository, the template as it was built.
  let host: number;
  let remote: TestRepo;
  let repoId: number;
  let templateId: number;
  let before: Awaited<ReturnType<typeof stateOf>>;
  let server: { odoo_db_user: string | null; odoo_db_password: string | null };
  const templateDb = `svc_odoo_tu_tpl${src.series}_${Date.now().toString(36)}`;
  const store = () => `${f.base}/data/filestore/${templateDb}`;
  const hostRole = () => server.odoo_db_user;
  const push = async () => {
    const res = await request(f.t.app, f.t.as.admin, { method: 'POST', url: `/api/v1/git-repositories/${repoId}/actions/push_commit` });
    expect(res.statusCode, res.body).toBe(202);
    const job = await waitForJob(f.t.app, f.t.as.admin, res.json().job_id, 5 * 60_000);
    expect(job.state, JSON.stringify(job)).toBe('completed');
    const commit = await f.t.ctx.db.gitCommit.findFirstOrThrow({ where: { repository_id: repoId }, orderBy: { id: 'desc' } });
    await vi.waitUntil(
      async () => (await f.t.ctx.db.rollout.findFirst({ where: { git_commit_id: commit.id }, orderBy: { id: 'desc' } }))?.state === 'done',
      { timeout: 8 * 60_000, interval: 500 },
    );
    return f.t.ctx.db.rollout.findFirstOrThrow({ where: { git_commit_id: commit.id }, orderBy: { id: 'desc' } });
  };
  const stateOf = async () => ({
    columns: (
      await queryIn<{ c: string }>(templateDb, "SELECT column_name AS c FROM information_schema.columns WHERE table_name = 'svc_tpl_first'")
    )
      .map((r) => r.c)
      .sort(),
    modules: await queryIn(templateDb, 'SELECT name, state, latest_version FROM ir_module_module WHERE name = ANY($1) ORDER BY name', [
      [FIRST, SECOND],
    ]),
    records: await queryIn(templateDb, 'SELECT name FROM svc_tpl_first ORDER BY id'),
    views: await queryIn(templateDb, "SELECT name FROM ir_ui_view WHERE model = 'svc.tpl.first'"),
    files: readdirSync(store()).sort(),
    marker: readFileSync(`${store()}/svc-marker`, 'utf8'),
  });
  // This host's safety copies (its role's): other files' rollouts may have theirs on the cluster meanwhile.
  const leftovers = async () => ({
    databases: (
      await adminQuery<{ datname: string }>(
        "SELECT datname FROM pg_database d JOIN pg_roles r ON r.oid = d.datdba WHERE datname LIKE 'svcrb\\_%' AND r.rolname = $1",
        [hostRole()],
      )
    ).map((r) => r.datname),
    files: readdirSync(`${f.base}/data/filestore`).filter((n) => n.startsWith('svcrb_')),
  });
  const failures = () =>
    f.t.ctx.db.message.findMany({
      where: { model_name: 'svc.database.template', rec_id: templateId, body: { startsWith: 'update failed' } },
      orderBy: { id: 'asc' },
    });
  const identityHolds = async () => {
    const [found] = await adminQuery<{ oid: string }>('SELECT oid::text FROM pg_database WHERE datname = $1', [templateDb]);
    const record = await f.t.ctx.db.databaseTemplate.findUniqueOrThrow({ where: { id: templateId } });
    expect(String(record.template_oid)).toBe(found!.oid);
    const swapped = await f.t.ctx.db.message.count({
      where: {
        model_name: 'svc.database.template',
        rec_id: templateId,
        body: { contains: 'is not the database this template was built' },
      },
    });
    expect(swapped).toBe(0);
  };

  // The host with the repository's two addons on its addons path, the template built with both and
  // a record and a file of its own.
  beforeAll(async () => {
    const made = await odooHost(f, src, { name: 'template-update', prefix: 'svc_odoo_tu', modules: false });
    host = made.host;

    // The repository, deployed once, then put on the addons path by setup_odoo.
    const account = await request(f.t.app, f.t.as.admin, { method: 'POST', url: '/api/v1/git-accounts', payload: { access_token: TOKEN } });
    const repoName = `acme/template-update-${src.series}`;
    remote = await git.repo(repoName);
    remote.commit(addons(1), 'v1');
    const created = await request(f.t.app, f.t.as.admin, {
      method: 'POST',
      url: '/api/v1/git-repositories',
      payload: { name: repoName, branch_name: 'main', git_account_id: account.json().id, root_server_id: host },
    });
    expect(created.statusCode, created.body).toBe(201);
    repoId = created.json().id as number;
    expect((await push()).error).toMatch(/is not on the addons path/);
    await setupOdoo(f, host, made.setupBody);

    templateId = await newTemplate(f, host, `template update ${src.name}`, templateDb);
    await buildTemplate(f, templateId, [FIRST, SECOND]);

    // The template's own record and file: what a restore must keep.
    await queryIn(templateDb, "INSERT INTO svc_tpl_first (name) VALUES ('kept in the template')");
    expect(existsSync(store())).toBe(true);
    writeFileSync(`${store()}/svc-marker`, 'the template file');
    before = await stateOf();
    expect(before.columns).not.toContain('code');
    expect(before.records).toEqual([{ name: 'kept in the template' }]);
    server = await f.t.ctx.db.rootServer.findUniqueOrThrow({ where: { id: host } });
  }, 20 * 60_000);

  test("a push whose update Odoo refuses: the rollout's update puts the template back as it was, Odoo saying why, no safety copy left, still the template", async () => {
    const hostPassword = (await f.t.ctx.secretBox.reveal(server.odoo_db_password))!;
    // Push two: no tenant on the host yet, so the rollout queues the template's update, which fails.
    remote.commit(addons(2), 'v2: a field, and a view Odoo refuses');
    const broken = await push();
    expect(broken.error).toBeNull();
    await vi.waitUntil(async () => (await failures()).length === 1, { timeout: 8 * 60_000, interval: 1000 });
    const [told] = await failures();
    expect(told!.body).toMatch(/no_such_field/);
    expect(told!.body).toContain('put back as it was before the update');
    expect(told!.body).not.toContain(hostPassword);
    await vi.waitUntil(async () => (await leftovers()).databases.length === 0, { timeout: 60_000, interval: 500 });
    expect(await stateOf()).toEqual(before);
    expect(await leftovers()).toEqual({ databases: [], files: [] });
    await identityHolds();
  });

  test("the operator's update: the job fails with Odoo's words, and the template is put back again", async () => {
    const asked = await f.runJob(templateId, 'update', undefined, 'database-templates');
    expect(asked.state).toBe('failed');
    expect(asked.error).toMatch(/no_such_field/);
    expect(asked.error).toContain('put back as it was before the update');
    expect(await failures()).toHaveLength(2);
    expect(await stateOf()).toEqual(before);
    expect(await leftovers()).toEqual({ databases: [], files: [] });
    await identityHolds();
  });

  test('still the template: a subscription deploys from it (its identity checked) and has its record', async () => {
    const database = `svc_odoo_tu_c${src.series}_${Date.now().toString(36)}`;
    const email = `template-update-${src.series}-${Date.now()}@example.com`;
    const { job: deployed } = await deploySubscription(f, { templateId, database, email, name: 'After a failed update' });
    expect(deployed.state, deployed.error).toBe('completed');
    const { login, password } = credentialsIn(textOf(await smtp.waitFor(email)));
    expect(rpcResult((await jsonRpc(src.port, 'common', 'authenticate', [database, login, password, {}])).body)).toBe(2);
    expect(await queryIn(database, 'SELECT name FROM svc_tpl_first')).toEqual([{ name: 'kept in the template' }]);
  });

  test('a push fixing the view updates the tenant and the template; no safety copy is left', async () => {
    // Push three (the view fixed): the tenant and the template are updated; no safety copy is left.
    remote.commit(addons(3), 'v3: the view fixed');
    const fixed = await push();
    expect(fixed.error).toBeNull();
    const counts = await f.t.ctx.db.rolloutTenant.groupBy({ by: ['state'], where: { rollout_id: fixed.id }, _count: true });
    expect(counts).toEqual([{ state: 'updated', _count: 1 }]);
    await vi.waitUntil(async () => (await stateOf()).columns.includes('code'), { timeout: 8 * 60_000, interval: 1000 });
    // Its update job (the rollout's, or this one when it ended already) completes.
    const updated = await f.runJob(templateId, 'update', undefined, 'database-templates');
    expect(updated.state, JSON.stringify(updated)).toBe('completed');
    const after = await stateOf();
    expect(after.records).toEqual(before.records);
    expect(after.views).toEqual([{ name: 'svc.tpl.first.form' }]);
    expect(after.marker).toBe('the template file');
    expect(await failures()).toHaveLength(2);
    expect(await leftovers()).toEqual({ databases: [], files: [] });
    await identityHolds();
  });
});
