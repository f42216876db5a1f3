// Code rollouts on the real Odoo (issue 37's check): a host running Odoo, a git repository deploying
// an addon into a path on its addons path, one template built with that addon and four tenants
// copied from it, the fourth with the addon uninstalled. A push changing the addon's model restarts
// Odoo gracefully (/web/health never stops answering) and rolls out: the three tenants with the
// addon are updated (the new field is there and readable over JSON-RPC through the running Odoo),
// the fourth is untouched (unchanged, no module, no copy, nothing ran). A second push whose view no
// longer validates fails in all three: each is put back as it was before that push (its database
// from the safety copy: the field and the data of push one still there), marked update_failed with
// the module and Odoo's message in its chatter, and the rollout's counts say so. Retrying one tenant
// alone fails the same way and restores it again; the maintenance flag gives the page.
import { mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';
import { request, waitForJob } from '../test/helpers/api.js';
import { credentialsIn } from '../test/helpers/customer-credentials.js';
import { startFakeGitHost, type FakeGitHost, type TestRepo } from '../test/helpers/git-host.js';
import { queryIn } from '../test/helpers/odoo-template.js';
import { adminQuery } from '../test/helpers/pg.js';
import { textOf, useSmtpServer } from '../test/helpers/smtp.js';
import { jsonRpc, odooGet, odooSources, useOdooFixture } from './odoo-fixture.js';
import { buildTemplate, deploySubscription, newTemplate, odooHost, setupOdoo } from './odoo-host.js';

const TOKEN = 'ghp_RolloutTestToken0123456789abcdef';
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

const MODULE = 'svc_rollout_demo';

/**
 * The addon at version `version`: v2 adds the field `code`; v3 adds a form view naming a field that
 * does not exist (Odoo refuses it when it validates the view during -u; the Python is v2's, so the
 * running Odoo still loads the tenants' registries).
 */
function addon(version: 1 | 2 | 3): Record<string, string> {
  const data = ['security/ir.model.access.csv', ...(version === 3 ? ['views/demo.xml'] : [])];
  return {
    [`${MODULE}/__init__.py`]: 'from . import models\n',
    [`${MODULE}/__manifest__.py`]: `{"name": "svc rollout demo", "version": "${version}.0", "depends": ["base"], "data": ${JSON.stringify(data)}, "license": "LGPL-3", "installable": True}\n`,
    [`${MODULE}/security/ir.model.access.csv`]:
      'id,name,model_id:id,group_id:id,perm_read,perm_write,perm_create,perm_unlink\naccess_demo,demo,model_svc_rollout_demo,base.group_user,1,1,1,1\n',
    [`${MODULE}/models/__init__.py`]: 'from . import demo\n',
    [`${MODULE}/models/demo.py`]: [
      'from odoo import fields, models',
      '',
      '',
      'class SvcRolloutDemo(models.Model):',
      '    _name = "svc.rollout.demo"',
      '    _description = "svc rollout demo"',
      '',
      '    name = fields.Char()',
      ...(version >= 2 ? ['    code = fields.Char(default="v2")'] : []),
      '',
    ].join('\n'),
    ...(version === 3
      ? {
          [`${MODULE}/views/demo.xml`]: [
            '<odoo>',
            '  <record id="view_svc_rollout_demo_form" model="ir.ui.view">',
            '    <field name="name">svc.rollout.demo.form</field>',
            '    <field name="model">svc.rollout.demo</field>',
            '    <field name="arch" type="xml"><form><field name="name"/><field name="no_such_field"/></form></field>',
            '  </record>',
            '</odoo>',
            '',
          ].join('\n'),
        }
      : {}),
    // Translations and tests do not count: a change there alone updates nothing.
    [`${MODULE}/i18n/fr.po`]: `# ${version}\n`,
  };
}

const columnsOf = async (database: string) =>
  (
    await queryIn<{ c: string }>(database, "SELECT column_name AS c FROM information_schema.columns WHERE table_name = 'svc_rollout_demo'")
  ).map((r) => r.c);

type Tenant = { id: number; name: string; database: string; oid: bigint | null; login: string; password: string };
type TenantResult = { subscription_id: number; state: string; modules: string[]; error: string | null; duration_ms: number };

describe.each(sources.map((s, i) => ({ ...s, port: 18700 + 50 * i })))('rollouts on Odoo $name', (src) => {
  // What each step leaves for the next: the host, the repository, the template and the tenants.
  const made = { host: 0, setupBody: {} as Record<string, unknown>, templateId: 0 };
  const templateDb = `svc_odoo_r_tpl${src.series}_${Date.now().toString(36)}`;
  let remote: TestRepo;
  let repo: { id: number; deploy_path: string };
  const tenants: Tenant[] = [];
  let dColumns: string[];
  let rollout: Awaited<ReturnType<typeof rolloutOf>>;
  let broken: Awaited<ReturnType<typeof rolloutOf>>;
  let brokenCommit: number;
  const afterOne = new Map<number, bigint | null>();
  const tenant = (name: string) => tenants.find((t) => t.name === name)!;
  const withModule = () => tenants.filter((t) => t.name !== 'd');

  const push = async () => {
    const res = await request(f.t.app, f.t.as.admin, { method: 'POST', url: `/api/v1/git-repositories/${repo.id}/actions/push_commit` });
    expect(res.statusCode, res.body).toBe(202);
    const job = await waitForJob(f.t.app, f.t.as.admin, res.json().job_id, 5 * 60_000);
    expect(job.state, JSON.stringify(job)).toBe('completed');
    const commit = await f.t.ctx.db.gitCommit.findFirstOrThrow({ where: { repository_id: repo.id }, orderBy: { id: 'desc' } });
    return commit.id;
  };
  const rolloutOf = async (commitId: number) => {
    const deadline = Date.now() + 8 * 60_000;
    for (;;) {
      const res = await request(f.t.app, f.t.as.admin, {
        method: 'GET',
        url: `/api/v1/git-repositories/${repo.id}/commits/${commitId}/rollouts`,
      });
      expect(res.statusCode, res.body).toBe(200);
      const [r] = res.json().items;
      if (r?.state === 'done') return r as { id: number; error: string | null; counts: Record<string, number>; tenants: TenantResult[] };
      if (Date.now() > deadline) throw new Error(`the rollout did not end: ${res.body}`);
      await new Promise((ok) => setTimeout(ok, 500));
    }
  };
  const rpc = async (t: Tenant, model: string, method: string, args: unknown[], kw: Record<string, unknown> = {}) => {
    const res = await jsonRpc(src.port, 'object', 'execute_kw', [t.database, 2, t.password, model, method, args, kw]);
    const body = JSON.parse(res.body);
    if (body.error) throw new Error(`${t.name} ${model}.${method}: ${res.body}`);
    return body.result;
  };
  const untouched = async (r: Awaited<ReturnType<typeof rolloutOf>>) => {
    const d = tenant('d');
    // d: unchanged, no module to update (so no safety copy and no update), its database the same.
    expect(r.tenants.find((t) => t.subscription_id === d.id)).toMatchObject({ state: 'unchanged', modules: [], error: null });
    const sub = await f.t.ctx.db.subscription.findUniqueOrThrow({ where: { id: d.id } });
    expect(sub.database_oid).toBe(d.oid);
    expect(await columnsOf(d.database)).toEqual(dColumns);
    const logs = await f.t.ctx.db.actionLog.findMany({
      where: { model_name: 'svc.subscription', rec_id: d.id, input_text: { startsWith: `rollout: rollout ${r.id}:` } },
    });
    expect(logs.map((l) => `${l.status} ${l.output_text}`)).toEqual(['success unchanged: no installed module changed; nothing ran']);
    expect(
      await f.t.ctx.db.message.count({ where: { model_name: 'svc.subscription', rec_id: d.id, body: { startsWith: 'update_failed' } } }),
    ).toBe(0);
  };
  // The template's update job: its remote steps' rows, none left running once it ended.
  const templateRunning = () =>
    f.t.ctx.db.actionLog.count({ where: { model_name: 'svc.database.template', rec_id: made.templateId, status: 'running' } });
  const templateFailures = () =>
    f.t.ctx.db.message.count({
      where: { model_name: 'svc.database.template', rec_id: made.templateId, body: { startsWith: 'update failed' } },
    });

  beforeAll(async () => {
    Object.assign(made, await odooHost(f, src, { name: 'rollout', prefix: 'svc_odoo_r', modules: false }));
  }, 20 * 60_000);

  test('a first deploy to a path not on the addons path rolls out nothing, saying so', async () => {
    const account = await request(f.t.app, f.t.as.admin, { method: 'POST', url: '/api/v1/git-accounts', payload: { access_token: TOKEN } });
    const repoName = `acme/rollout-${src.series}`;
    remote = await git.repo(repoName);
    remote.commit(addon(1), 'v1');
    const created = await request(f.t.app, f.t.as.admin, {
      method: 'POST',
      url: '/api/v1/git-repositories',
      payload: { name: repoName, branch_name: 'main', git_account_id: account.json().id, root_server_id: made.host },
    });
    expect(created.statusCode, created.body).toBe(201);
    repo = created.json();
    const first = await rolloutOf(await push());
    expect(first.error).toMatch(/is not on the addons path/);
  });

  test('four tenants of a template built with the addon (b a trial) sign in; d has it uninstalled', async () => {
    // setup_odoo puts the deploy path on the addons path; one template with the addon, four tenants copied from it.
    await setupOdoo(f, made.host, made.setupBody);
    made.templateId = await newTemplate(f, made.host, `rollout ${src.name}`, templateDb);
    await buildTemplate(f, made.templateId, [MODULE]);
    for (const name of ['a', 'b', 'c', 'd']) {
      const database = `svc_odoo_r_${name}${src.series}_${Date.now().toString(36)}`;
      const email = `rollout-${name}-${src.series}-${Date.now()}@example.com`;
      const { id, job } = await deploySubscription(f, {
        templateId: made.templateId,
        database,
        email,
        name: `Rollout ${name}`,
        trial: name === 'b',
      });
      expect(job.state, job.error).toBe('completed');
      const { database_oid: oid } = await f.t.ctx.db.subscription.findUniqueOrThrow({ where: { id } });
      tenants.push({ id, name, database, oid, ...credentialsIn(textOf(await smtp.waitFor(email))) });
    }
    for (const t of tenants) {
      const uid = JSON.parse((await jsonRpc(src.port, 'common', 'authenticate', [t.database, t.login, t.password, {}])).body).result;
      expect(uid).toBe(2);
    }
    // d: the addon uninstalled by Odoo (its table goes); a, b, c: a record each.
    const d = tenant('d');
    const [mod] = await rpc(d, 'ir.module.module', 'search', [[['name', '=', MODULE]]]);
    await rpc(d, 'ir.module.module', 'button_immediate_uninstall', [[mod]]);
    expect(await queryIn(d.database, 'SELECT state FROM ir_module_module WHERE name = $1', [MODULE])).toEqual([{ state: 'uninstalled' }]);
    dColumns = await columnsOf(d.database);
    expect(dColumns).not.toContain('code');
    for (const t of withModule()) await queryIn(t.database, 'INSERT INTO svc_rollout_demo (name) VALUES ($1)', [`rec-${t.name}`]);
  });

  test('a push changing a model restarts Odoo gracefully (its health answered all along) and updates the three tenants with the addon, trials first', async () => {
    // Push one (v2, a new field), with Odoo's health asked all along: the graceful restart refuses nothing.
    remote.commit(addon(2), 'v2: a new field');
    let polling = true;
    const health = { ok: 0, failed: [] as string[] };
    const poller = (async () => {
      while (polling) {
        try {
          const res = await odooGet(src.port, '/web/health');
          if (res.status === 200) health.ok++;
          else health.failed.push(`HTTP ${res.status}`);
          await res.arrayBuffer();
        } catch (err) {
          health.failed.push(String((err as Error).cause ?? err));
        }
        await new Promise((ok) => setTimeout(ok, 50));
      }
    })();
    rollout = await rolloutOf(await push());
    polling = false;
    await poller;
    expect(health.failed, `health answers: ${health.ok}`).toEqual([]);
    expect(health.ok).toBeGreaterThan(10);

    expect(rollout.error).toBeNull();
    expect(rollout.counts).toEqual({ updated: 3, unchanged: 1, failed: 0, pending: 0, superseded: 0 });
    // Trials first (the default order).
    expect(rollout.tenants[0]!.subscription_id).toBe(tenant('b').id);
    for (const t of withModule()) {
      expect(rollout.tenants.find((r) => r.subscription_id === t.id)).toMatchObject({ state: 'updated', modules: [MODULE], error: null });
    }
    for (const t of rollout.tenants) expect(t.duration_ms).toBeGreaterThanOrEqual(0);
  });

  test('the fourth tenant, without the addon, is untouched: unchanged, nothing ran', async () => {
    await untouched(rollout);
  });

  test('the three have the new field, read and written over JSON-RPC through the running Odoo (its registry reloaded)', async () => {
    for (const t of withModule()) {
      expect(await columnsOf(t.database)).toContain('code');
      const [row] = await rpc(t, 'svc.rollout.demo', 'search_read', [[]], { fields: ['name', 'code'] });
      expect(row).toMatchObject({ name: `rec-${t.name}` });
      expect(row).toHaveProperty('code');
      await rpc(t, 'svc.rollout.demo', 'write', [[row.id], { code: `kept-${t.name}` }]);
    }
    for (const t of withModule())
      afterOne.set(t.id, (await f.t.ctx.db.subscription.findUniqueOrThrow({ where: { id: t.id } })).database_oid);
  });

  test('the template is updated after the rollout (-u all): the next copies have the new field', async () => {
    await vi.waitUntil(async () => (await columnsOf(templateDb)).includes('code') && (await templateRunning()) === 0, {
      timeout: 5 * 60_000,
      interval: 1000,
    });
    expect(await templateFailures()).toBe(0);
  });

  test("a push Odoo refuses puts each tenant with the addon back as before it (safety copy: push one's field and data), marked with the module and Odoo's message", async () => {
    remote.commit(addon(3), 'v3: a broken view');
    brokenCommit = await push();
    broken = await rolloutOf(brokenCommit);
    expect(broken.error).toBeNull();
    expect(broken.counts).toEqual({ updated: 0, unchanged: 1, failed: 3, pending: 0, superseded: 0 });
    const databases = (await adminQuery<{ datname: string }>('SELECT datname FROM pg_database')).map((x) => x.datname);
    for (const t of withModule()) {
      const result = broken.tenants.find((r) => r.subscription_id === t.id)!;
      expect(result).toMatchObject({ state: 'failed', modules: [MODULE] });
      expect(result.error).toMatch(/no_such_field/);
      // Restored: the subscription knows the database by the copy's oid, which is the database now.
      const sub = await f.t.ctx.db.subscription.findUniqueOrThrow({ where: { id: t.id } });
      expect(sub.database_oid).not.toBe(afterOne.get(t.id));
      const [found] = await adminQuery<{ oid: string }>('SELECT oid::text FROM pg_database WHERE datname = $1', [t.database]);
      expect(String(sub.database_oid)).toBe(found!.oid);
      expect(databases.filter((x) => x.startsWith(`svcrb_${afterOne.get(t.id)}_`) || x.startsWith(`svcrb_${t.oid}_`))).toEqual([]);
      // As before push two: the field and the value written after push one, no view of v3.
      const rows = await rpc(t, 'svc.rollout.demo', 'search_read', [[]], { fields: ['name', 'code'] });
      expect(rows).toEqual([expect.objectContaining({ name: `rec-${t.name}`, code: `kept-${t.name}` })]);
      expect(await queryIn(t.database, "SELECT 1 FROM ir_ui_view WHERE model = 'svc.rollout.demo'")).toEqual([]);
      const messages = await f.t.ctx.db.message.findMany({
        where: { model_name: 'svc.subscription', rec_id: t.id, body: { startsWith: 'update_failed' } },
      });
      expect(messages).toHaveLength(1);
      expect(messages[0]!.body).toContain(MODULE);
      expect(messages[0]!.body).toMatch(/no_such_field/);
    }
    const logs = await f.t.ctx.db.actionLog.findMany({
      where: { model_name: 'svc.subscription', input_text: { startsWith: `rollout: rollout ${broken.id}:` } },
    });
    expect(logs.map((l) => `${l.rec_id}:${l.status}`).sort()).toEqual(
      [...withModule().map((t) => `${t.id}:failure`), `${tenant('d').id}:success`].sort(),
    );
    for (const t of tenants) expect(JSON.stringify(logs)).not.toContain(t.password);
  });

  test('the fourth tenant is untouched by the failed push too', async () => {
    await untouched(broken);
  });

  test("the template is not updated with code that failed the tenants: the commit's chatter says so", async () => {
    // Its -u all would not be undone; the template still has push one's field and no failure.
    await vi.waitUntil(
      async () =>
        (await f.t.ctx.db.message.count({
          where: { model_name: 'svc.saas.git.repository', rec_id: repo.id, body: { contains: "The host's templates are not updated" } },
        })) === 1,
      { timeout: 60_000, interval: 500 },
    );
    expect(await templateFailures()).toBe(0);
    expect(await templateRunning()).toBe(0);
    expect(await columnsOf(templateDb)).toContain('code');
  });

  test("while a tenant's maintenance flag is there it answers the maintenance page and RPC a clear error; the others as usual", async () => {
    const [a, b] = [tenant('a'), tenant('b')];
    const flag = path.join(f.base, 'data', 'svc-maintenance', a.database);
    await mkdir(path.dirname(flag), { recursive: true });
    await writeFile(flag, 'test\n');
    const page = (database: string) =>
      odooGet(src.port, '/web/login', {
        headers: { 'x-odoo-database': database, 'x-forwarded-host': `${database}.odoo.test`, 'x-forwarded-proto': 'https' },
      });
    const during = await page(a.database);
    expect(during.status).toBe(503);
    expect(during.headers.get('retry-after')).toBeTruthy();
    expect(await during.text()).toContain('This instance is being updated');
    const other = await page(b.database);
    expect(other.status).toBe(200);
    await other.arrayBuffer();
    const refused = await jsonRpc(src.port, 'common', 'authenticate', [a.database, a.login, a.password, {}]);
    expect(refused.body).toContain('is being updated');
    await rm(flag);
    const after = await page(a.database);
    expect(after.status).toBe(200);
    await after.arrayBuffer();
  });

  test('a tenant retried alone fails the same way and is restored again; the others are not run again', async () => {
    const c = tenant('c');
    const retried = await request(f.t.app, f.t.as.operator, {
      method: 'POST',
      url: `/api/v1/rollouts/${broken.id}/actions/retry_tenant`,
      payload: { subscription_id: c.id },
    });
    expect(retried.statusCode, retried.body).toBe(202);
    await vi.waitUntil(
      async () =>
        (await f.t.ctx.db.message.count({
          where: { model_name: 'svc.subscription', rec_id: c.id, body: { startsWith: 'update_failed' } },
        })) === 2,
      { timeout: 5 * 60_000, interval: 500 },
    );
    const again = await rolloutOf(brokenCommit);
    expect(again.counts).toEqual({ updated: 0, unchanged: 1, failed: 3, pending: 0, superseded: 0 });
    expect(await rpc(c, 'svc.rollout.demo', 'search_read', [[]], { fields: ['code'] })).toEqual([
      expect.objectContaining({ code: 'kept-c' }),
    ]);
    for (const t of [tenant('a'), tenant('b')]) {
      expect(
        await f.t.ctx.db.message.count({ where: { model_name: 'svc.subscription', rec_id: t.id, body: { startsWith: 'update_failed' } } }),
      ).toBe(1);
    }
  });
});
