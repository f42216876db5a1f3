// Code rollouts on the real Odoo: a host running Odoo, a git repository deploying an addon into a
// path on its addons path, a template built with that addon and two tenants copied from it. A push
// changing the addon's model restarts Odoo gracefully (/web/health never stops answering) and rolls
// out: one tenant is updated (the new field is there and readable over JSON-RPC through the running
// Odoo), the other, whose data makes the new code fail, is restored from its safety copy (no new
// column, its data as before) and marked update_failed with Odoo's error in its chatter; the rollout
// shows its counts and each tenant's result and duration. Retrying that tenant alone after its data
// is fixed updates it.
import { mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, test, vi } from 'vitest';
import { request, waitForJob } from '../test/helpers/api.js';
import { startFakeGitHost, type FakeGitHost, type TestRepo } from '../test/helpers/git-host.js';
import { queryIn } from '../test/helpers/odoo-template.js';
import { adminQuery } from '../test/helpers/pg.js';
import { textOf, useSmtpServer } from '../test/helpers/smtp.js';
import { afterAll, beforeAll } from 'vitest';
import { jsonRpc, odooGet, odooSources, packagesOf, useOdooFixture } from './odoo-fixture.js';

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

/** The addon at version `version`; v2 adds the field `code`, and refuses to load in a database holding a record named "poison". */
function addon(version: 1 | 2): Record<string, string> {
  const v2 = version === 2;
  return {
    [`${MODULE}/__init__.py`]: 'from . import models\n',
    [`${MODULE}/__manifest__.py`]: `{"name": "svc rollout demo", "version": "${version}.0", "depends": ["base"], "data": ["security/ir.model.access.csv"], "license": "LGPL-3", "installable": True}\n`,
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
      ...(v2
        ? [
            '    code = fields.Char(default="v2")',
            '',
            '    def _auto_init(self):',
            '        res = super()._auto_init()',
            '        self.env.cr.execute("SELECT 1 FROM svc_rollout_demo WHERE name = %s", ["poison"])',
            '        if self.env.cr.fetchone():',
            '            raise ValueError("svc rollout test: this tenant holds a poison record")',
            '        return res',
          ]
        : []),
      '',
    ].join('\n'),
    // Translations and tests do not count: a change there alone updates nothing.
    [`${MODULE}/i18n/fr.po`]: `# ${version}\n`,
  };
}

function credentialsIn(text: string) {
  const login = /Login: +(\S+)/.exec(text)?.[1];
  const password = /Password: +(\S+)/.exec(text)?.[1];
  if (!login || !password) throw new Error(`no credentials in:\n${text}`);
  return { login, password };
}

const columnsOf = async (database: string) =>
  (
    await queryIn<{ c: string }>(database, "SELECT column_name AS c FROM information_schema.columns WHERE table_name = 'svc_rollout_demo'")
  ).map((r) => r.c);

describe.each(sources.map((s, i) => ({ ...s, port: 18700 + 50 * i })))('rollouts on Odoo $name', (src) => {
  test('a push changing a model: Odoo restarted gracefully, one tenant updated, one restored and marked, then retried alone', async () => {
    const version = await f.newVersion({
      name: `${src.name}-rollout`,
      source_url: `file://${src.file}`,
      source_sha256: src.sha256,
      os_packages: packagesOf(src.series),
      server_wide_modules: src.series >= 19 ? ['base', 'rpc', 'web'] : ['base', 'web'],
    });
    const host = await f.newHost();
    const setupBody = {
      odoo_version_id: version.id,
      postgresql_server_id: f.pgServerId,
      http_port: src.port,
      workers: 0,
      max_cron_threads: 0,
    };
    expect((await f.runJob(host, 'setup_odoo', setupBody)).state).toBe('completed');

    // The repository and its first deploy: its path is not on the addons path yet, so nothing rolls out.
    const account = await request(f.t.app, f.t.as.admin, { method: 'POST', url: '/api/v1/git-accounts', payload: { access_token: TOKEN } });
    const repoName = `acme/rollout-${src.series}`;
    const remote: TestRepo = await git.repo(repoName);
    remote.commit(addon(1), 'v1');
    const created = await request(f.t.app, f.t.as.admin, {
      method: 'POST',
      url: '/api/v1/git-repositories',
      payload: { name: repoName, branch_name: 'main', git_account_id: account.json().id, root_server_id: host },
    });
    expect(created.statusCode, created.body).toBe(201);
    const repo = created.json() as { id: number; deploy_path: string };
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
        if (r?.state === 'done') return r;
        if (Date.now() > deadline) throw new Error(`the rollout did not end: ${res.body}`);
        await new Promise((ok) => setTimeout(ok, 500));
      }
    };
    const first = await rolloutOf(await push());
    expect(first.error).toMatch(/is not on the addons path/);

    // setup_odoo puts the deploy path on the addons path; a template with the addon, two tenants.
    expect((await f.runJob(host, 'setup_odoo', setupBody)).state).toBe('completed');
    const templateDb = `svc_odoo_r_tpl${src.series}_${Date.now().toString(36)}`;
    const template = await request(f.t.app, f.t.as.operator, {
      method: 'POST',
      url: '/api/v1/database-templates',
      payload: { name: `rollout ${src.name}`, postgresql_server_id: f.pgServerId, template_db_name: templateDb, root_server_id: host },
    });
    expect(template.statusCode, template.body).toBe(201);
    const built = await f.runJob(template.json().id, 'build', { modules: [MODULE] }, 'database-templates');
    expect(built.state, JSON.stringify(built)).toBe('completed');
    const tenants: { id: number; database: string; oid: bigint | null; login: string; password: string }[] = [];
    for (const name of ['a', 'b']) {
      const database = `svc_odoo_r_${name}${src.series}_${Date.now().toString(36)}`;
      const email = `rollout-${name}-${src.series}-${Date.now()}@example.com`;
      const partner = await request(f.t.app, f.t.as.operator, { method: 'POST', url: '/api/v1/partners', payload: { name, email } });
      const sub = await request(f.t.app, f.t.as.operator, {
        method: 'POST',
        url: '/api/v1/subscriptions',
        payload: {
          name: `Rollout ${name}`,
          partner_id: partner.json().id,
          database_template_id: template.json().id,
          database_name: database,
          is_trial: name === 'b',
          trial_end_date: new Date(Date.now() + 14 * 86_400_000).toISOString(),
        },
      });
      expect(sub.statusCode, sub.body).toBe(201);
      const id = sub.json().id as number;
      const act = (a: string) => request(f.t.app, f.t.as.operator, { method: 'POST', url: `/api/v1/subscriptions/${id}/actions/${a}` });
      expect((await act('confirm')).statusCode).toBe(200);
      const job = await waitForJob(f.t.app, f.t.as.user, (await act('deploy')).json().job_id, 10 * 60_000);
      expect(job.state, job.error).toBe('completed');
      const { database_oid: oid } = await f.t.ctx.db.subscription.findUniqueOrThrow({ where: { id } });
      tenants.push({ id, database, oid, ...credentialsIn(textOf(await smtp.waitFor(email))) });
    }
    const [a, b] = tenants as [(typeof tenants)[0], (typeof tenants)[0]];
    await queryIn(a.database, "INSERT INTO svc_rollout_demo (name) VALUES ('alpha')");
    await queryIn(b.database, "INSERT INTO svc_rollout_demo (name) VALUES ('poison')");

    // The push of v2, with Odoo's health asked all along: the graceful restart refuses nothing.
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
    const commitId = await push();
    const rollout = await rolloutOf(commitId);
    polling = false;
    await poller;
    expect(health.failed, `health answers: ${health.ok}`).toEqual([]);
    expect(health.ok).toBeGreaterThan(10);

    expect(rollout.error).toBeNull();
    expect(rollout.counts).toEqual({ updated: 1, unchanged: 0, failed: 1, pending: 0, superseded: 0 });
    const byId = new Map(rollout.tenants.map((t: { subscription_id: number }) => [t.subscription_id, t]));
    // Trials first (the default order): b, then a.
    expect(rollout.tenants.map((t: { subscription_id: number }) => t.subscription_id)).toEqual([b.id, a.id]);
    expect(byId.get(a.id)).toMatchObject({ state: 'updated', modules: [MODULE], error: null });
    expect(byId.get(b.id)).toMatchObject({ state: 'failed', modules: [MODULE] });
    expect((byId.get(b.id) as { error: string }).error).toMatch(/poison record/);
    for (const t of rollout.tenants) expect(t.duration_ms).toBeGreaterThan(0);

    // a: the new field, through the running Odoo (its registry reloaded).
    expect(await columnsOf(a.database)).toContain('code');
    const uid = JSON.parse((await jsonRpc(src.port, 'common', 'authenticate', [a.database, a.login, a.password, {}])).body).result;
    expect(uid).toBe(2);
    const read = await jsonRpc(src.port, 'object', 'execute_kw', [
      a.database,
      uid,
      a.password,
      'svc.rollout.demo',
      'search_read',
      [[]],
      { fields: ['name', 'code'] },
    ]);
    expect(JSON.parse(read.body).result, read.body).toEqual([expect.objectContaining({ name: 'alpha' })]);
    // b: as it was (no new column, its data), marked in its chatter; no copy or flag left behind.
    expect(await columnsOf(b.database)).not.toContain('code');
    expect(await queryIn(b.database, 'SELECT name FROM svc_rollout_demo')).toEqual([{ name: 'poison' }]);
    const sub = await f.t.ctx.db.subscription.findUniqueOrThrow({ where: { id: b.id } });
    const [found] = await adminQuery<{ oid: string }>('SELECT oid::text FROM pg_database WHERE datname = $1', [b.database]);
    expect(String(sub.database_oid)).toBe(found!.oid);
    const messages = await f.t.ctx.db.message.findMany({ where: { model_name: 'svc.subscription', rec_id: b.id } });
    expect(messages.some((m) => m.body.startsWith('update_failed') && m.body.includes('poison record'))).toBe(true);
    const databases = (await adminQuery<{ datname: string }>('SELECT datname FROM pg_database')).map((d) => d.datname);
    expect(databases.filter((d) => [a, b].some((x) => d.startsWith(`svcrb_${x.oid}_`)))).toEqual([]);
    const logs = await f.t.ctx.db.actionLog.findMany({
      where: { model_name: 'svc.subscription', rec_id: { in: [a.id, b.id] }, input_text: { startsWith: 'rollout' } },
    });
    expect(logs.map((l) => `${l.rec_id}:${l.status}`).sort()).toEqual([`${a.id}:success`, `${b.id}:failure`].sort());
    expect(JSON.stringify(logs)).not.toContain(a.password);

    // While a tenant's maintenance flag is there (as during its update), it answers the maintenance
    // page and RPC a clear error; the other tenant answers as usual.
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
    const rpc = await jsonRpc(src.port, 'common', 'authenticate', [a.database, a.login, a.password, {}]);
    expect(rpc.body).toContain('is being updated');
    await rm(flag);
    const after = await page(a.database);
    expect(after.status).toBe(200);
    await after.arrayBuffer();

    // b's data fixed, b retried alone: updated.
    await queryIn(b.database, "UPDATE svc_rollout_demo SET name = 'fixed'");
    const retried = await request(f.t.app, f.t.as.operator, {
      method: 'POST',
      url: `/api/v1/rollouts/${rollout.id}/actions/retry_tenant`,
      payload: { subscription_id: b.id },
    });
    expect(retried.statusCode, retried.body).toBe(202);
    const again = await rolloutOf(commitId);
    expect(again.counts).toMatchObject({ updated: 2, failed: 0, pending: 0 });
    expect(await columnsOf(b.database)).toContain('code');
    // The template was updated after the rollout (-u all): the next copies have the new field.
    await vi.waitUntil(async () => (await columnsOf(templateDb)).includes('code'), { timeout: 5 * 60_000, interval: 1000 });
  });
});
