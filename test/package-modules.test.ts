// Packages are apps (issue 48, DESIGN §23): a trial package's and a subscription's `packages` are Odoo
// modules by technical name. A name of another shape is a 400; a module its template's host does not
// have, or its built template lacks, is a 400 naming it (and naming the host or the template); a
// template or host whose modules are not known yet refuses nothing. `build` installs the union of the
// packages of the trial packages that use the template (and base, web, svc_instance); the host's
// module list comes from its Odoo configuration's addons_path (src/odoo/host/list-modules.sh, run over
// the tests' sshd as root). A deployment from a template known to lack the subscription's modules
// fails naming them and leaves nothing. Real PostgreSQL, Redis and sshd.
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildModules, listHostModules, packageModulesOf } from '../src/odoo/odoo-modules.js';
import { odooLayout } from '../src/odoo/odoo-layout.js';
import { openRemoteSession } from '../src/servers/index.js';
import { takeStandby } from '../src/instances/index.js';
import { confirmedRootServer, request, waitForJob } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';
import { act, useLifecycle } from './helpers/lifecycle.js';
import { adminQuery } from './helpers/pg.js';
import { TEST_USERS, useSshd } from './helpers/sshd.js';

const sshd = useSshd();
const t = useTestApp({ workers: true });
const fx = useLifecycle(t);

const call = (method: 'GET' | 'POST' | 'PATCH', url: string, payload?: object) =>
  request(t.app, t.as.operator, { method, url, ...(payload ? { payload } : {}) });

let seq = 0;
const pkgBody = (data: Record<string, unknown>) => ({ name: 'CRM', url_string: `crm-${++seq}-${Date.now().toString(36)}`, ...data });

/** A template on the lifecycle's server, its record saying which modules it was built with (none: not known). */
async function template(modules: string[], hostModules?: string[]) {
  const host =
    hostModules === undefined
      ? null
      : await t.ctx.db.rootServer.create({ data: { name: 'odoo host', ip: '127.0.0.1', state: 'confirmed', odoo_modules: hostModules } });
  const created = await call('POST', '/api/v1/database-templates', {
    name: 'Odoo',
    postgresql_server_id: fx.serverId,
    template_db_name: `tpl_${++seq}`,
    ...(host ? { root_server_id: host.id } : {}),
  });
  expect(created.statusCode, created.body).toBe(201);
  await t.ctx.db.databaseTemplate.update({ where: { id: created.json().id }, data: { modules } });
  return { id: created.json().id as number, db: created.json().template_db_name as string, hostId: host?.id ?? null };
}

const refusedNaming = (res: { statusCode: number; json(): { error: { message: string; details: unknown } } }, ...names: string[]) => {
  expect(res.statusCode, JSON.stringify(res.json())).toBe(400);
  const { message, details } = res.json().error;
  for (const name of names) expect(message).toContain(name);
  expect(details).toMatchObject({ fields: [{ field: 'body.packages' }] });
};

describe('a package names Odoo modules', () => {
  it('refuses names that are not technical module names (400), on trial packages and subscriptions', async () => {
    for (const bad of [['CRM'], ['crm app'], ['crm;rm -rf /'], ['_crm'], [''], ['sale-management']]) {
      const res = await call('POST', '/api/v1/trial-packages', pkgBody({ packages: bad }));
      expect(res.statusCode, `${JSON.stringify(bad)}: ${res.body}`).toBe(400);
      const partner = await fx.partner();
      const sub = await call('POST', '/api/v1/subscriptions', { name: 'S', partner_id: partner.id, packages: bad });
      expect(sub.statusCode, `${JSON.stringify(bad)}: ${sub.body}`).toBe(400);
    }
    expect((await call('POST', '/api/v1/trial-packages', pkgBody({ packages: ['crm', 'sale_management', 'l10n_be'] }))).statusCode).toBe(
      201,
    );
  });

  it('refuses a module its built template lacks (400 naming it and the template); a template not built by svc refuses nothing', async () => {
    const built = await template(['base', 'crm', 'mail', 'svc_instance', 'web']);
    const res = await call(
      'POST',
      '/api/v1/trial-packages',
      pkgBody({ packages: ['crm', 'sale', 'website'], database_template_id: built.id }),
    );
    refusedNaming(res, 'sale, website', `Template ${built.id}`, built.db);
    expect(res.json().error.message).not.toContain('crm');
    // Its dependencies count: mail is installed with crm.
    const ok = await call('POST', '/api/v1/trial-packages', pkgBody({ packages: ['crm', 'mail'], database_template_id: built.id }));
    expect(ok.statusCode, ok.body).toBe(201);

    // PATCH: adding a module the template lacks, or moving to a template that lacks one.
    refusedNaming(await call('PATCH', `/api/v1/trial-packages/${ok.json().id}`, { packages: ['crm', 'sale'] }), 'sale');
    const bare = await template(['base', 'svc_instance', 'web']);
    refusedNaming(await call('PATCH', `/api/v1/trial-packages/${ok.json().id}`, { database_template_id: bare.id }), 'crm, mail', bare.db);
    const after = (await call('GET', `/api/v1/trial-packages/${ok.json().id}`)).json();
    expect(after).toMatchObject({ packages: ['crm', 'mail'], database_template_id: built.id });

    const unknown = await template([]);
    const free = await call('POST', '/api/v1/trial-packages', pkgBody({ packages: ['sale'], database_template_id: unknown.id }));
    expect(free.statusCode, free.body).toBe(201);
    // A template rebuilt without a module since does not block a change of something else.
    await t.ctx.db.databaseTemplate.update({ where: { id: unknown.id }, data: { modules: ['base', 'web'] } });
    expect((await call('PATCH', `/api/v1/trial-packages/${free.json().id}`, { name: 'Sales' })).statusCode).toBe(200);
    refusedNaming(await call('PATCH', `/api/v1/trial-packages/${free.json().id}`, { packages: ['sale', 'crm'] }), 'crm, sale');
  });

  it("refuses a module the template's Odoo host does not have (400 naming it and the host), before the template's own list", async () => {
    const onHost = await template([], ['base', 'crm', 'mail', 'sale', 'svc_instance', 'web']);
    const res = await call(
      'POST',
      '/api/v1/trial-packages',
      pkgBody({ packages: ['crm', 'not_a_module'], database_template_id: onHost.id }),
    );
    refusedNaming(res, 'not_a_module', `root server ${onHost.hostId}`);
    expect(
      (await call('POST', '/api/v1/trial-packages', pkgBody({ packages: ['sale'], database_template_id: onHost.id }))).statusCode,
    ).toBe(201);
    const unlisted = await template([], []);
    expect(
      (await call('POST', '/api/v1/trial-packages', pkgBody({ packages: ['not_a_module'], database_template_id: unlisted.id }))).statusCode,
    ).toBe(201);
  });

  it("checks a subscription's modules the same way, and keeps a deployed subscription's modules as deployed (409)", async () => {
    const built = await template(['base', 'crm', 'svc_instance', 'web']);
    const partner = await fx.partner();
    const body = { name: 'S', partner_id: partner.id, database_template_id: built.id };
    refusedNaming(await call('POST', '/api/v1/subscriptions', { ...body, packages: ['crm', 'sale'] }), 'sale', built.db);
    const sub = await call('POST', '/api/v1/subscriptions', { ...body, packages: ['crm'] });
    expect(sub.statusCode, sub.body).toBe(201);
    refusedNaming(await call('PATCH', `/api/v1/subscriptions/${sub.json().id}`, { packages: ['sale'] }), 'sale');

    await t.ctx.db.databaseTemplate.update({ where: { id: fx.templateId }, data: { modules: ['base', 'crm', 'svc_instance', 'web'] } });
    try {
      const deployed = await fx.deployed({ packages: ['crm'] });
      const patched = await call('PATCH', `/api/v1/subscriptions/${deployed.id}`, { packages: ['crm', 'base'] });
      expect(patched.statusCode, patched.body).toBe(409);
      expect(patched.json().error.message).toContain('packages cannot change');
      // The same modules in another order change nothing: accepted.
      expect((await call('PATCH', `/api/v1/subscriptions/${deployed.id}`, { packages: ['crm'], name: 'Renamed' })).statusCode).toBe(200);
    } finally {
      await t.ctx.db.databaseTemplate.update({ where: { id: fx.templateId }, data: { modules: [] } });
    }
  });

  it('a deployment from a template known to lack the modules fails naming them, and makes no database', async () => {
    const partner = await fx.partner();
    const database = `${t.ctx.dbName}_lacking`;
    const created = await call('POST', '/api/v1/subscriptions', {
      name: 'Lacking',
      partner_id: partner.id,
      database_template_id: fx.templateId,
      database_name: database,
      packages: ['crm'],
    });
    expect(created.statusCode, created.body).toBe(201);
    const id = created.json().id as number;
    expect((await act(t, id, 'confirm')).statusCode).toBe(200);
    // The template was rebuilt without crm after the subscription was written.
    await t.ctx.db.databaseTemplate.update({ where: { id: fx.templateId }, data: { modules: ['base', 'svc_instance', 'web'] } });
    try {
      const job = await waitForJob(t.app, t.as.user, (await act(t, id, 'deploy')).json().job_id);
      expect(job.state).toBe('failed');
      expect(job.error).toContain(`lacks module crm`);
      expect(await adminQuery('SELECT 1 FROM pg_database WHERE datname = $1', [database])).toEqual([]);
    } finally {
      await t.ctx.db.databaseTemplate.update({ where: { id: fx.templateId }, data: { modules: [] } });
    }
  });
});

describe('build and the host', () => {
  it("build's modules: those asked, the union of the packages of the trial packages using the template, and svc's own", async () => {
    const a = await template([]);
    const b = await template([]);
    for (const [packages, templateId] of [
      [['crm'], a.id],
      [['sale', 'crm'], a.id],
      [[], a.id],
      [['website'], b.id],
    ] as const) {
      const res = await call('POST', '/api/v1/trial-packages', pkgBody({ packages, database_template_id: templateId }));
      expect(res.statusCode, res.body).toBe(201);
    }
    expect(await packageModulesOf(t.ctx.db, a.id)).toEqual(['crm', 'sale']);
    expect(await buildModules(t.ctx.db, a.id)).toEqual(['base', 'crm', 'sale', 'svc_instance', 'web']);
    expect(await buildModules(t.ctx.db, a.id, ['contacts', 'crm'])).toEqual(['base', 'contacts', 'crm', 'sale', 'svc_instance', 'web']);
    expect(await buildModules(t.ctx.db, b.id)).toEqual(['base', 'svc_instance', 'web', 'website']);
    // The template's record shows what it was built with.
    await t.ctx.db.databaseTemplate.update({ where: { id: b.id }, data: { modules: ['base', 'web', 'website'] } });
    expect((await call('GET', `/api/v1/database-templates/${b.id}`)).json().modules).toEqual(['base', 'web', 'website']);
  });

  it('a standby copied before the template gained modules is not handed out (the template record changed with them)', async () => {
    const tpl = await template(['base', 'crm', 'svc_instance', 'web']);
    const pkg = await call('POST', '/api/v1/trial-packages', pkgBody({ packages: ['crm'], database_template_id: tpl.id }));
    expect(pkg.statusCode, pkg.body).toBe(201);
    const standby = async () => {
      const row = await t.ctx.db.databaseTemplate.findUniqueOrThrow({ where: { id: tpl.id } });
      return t.ctx.db.standbyDatabase.create({
        data: {
          trial_package_id: pkg.json().id,
          database_template_id: tpl.id,
          template_version: row.updated_at,
          postgresql_server_id: fx.serverId,
          database_name: `svc_standby_pkgtest_${++seq}_${Date.now().toString(36)}`,
          state: 'ready',
        },
      });
    };
    const before = await standby();
    expect((await takeStandby(t.ctx.db, pkg.json().id, tpl.id))?.id).toBe(before.id);
    const old = await standby();
    // What build and update write when they read the template's modules.
    await t.ctx.db.databaseTemplate.update({ where: { id: tpl.id }, data: { modules: ['base', 'crm', 'sale', 'svc_instance', 'web'] } });
    expect(await takeStandby(t.ctx.db, pkg.json().id, tpl.id)).toBeNull();
    const fresh = await standby();
    expect((await takeStandby(t.ctx.db, pkg.json().id, tpl.id))?.id).toBe(fresh.id);
    await t.ctx.db.standbyDatabase.deleteMany({ where: { id: { in: [before.id, old.id, fresh.id] } } });
  });

  describe('the modules on the host', () => {
    let dir: string;
    beforeAll(async () => {
      dir = await mkdtemp(path.join(tmpdir(), 'svc-modules-'));
    });
    afterAll(async () => {
      await rm(dir, { recursive: true, force: true });
    });

    it("are the folders holding a __manifest__.py in each directory of the configuration's addons_path, recorded on the host", async () => {
      const manifest = async (addons: string, name: string) => {
        await mkdir(path.join(dir, addons, name), { recursive: true });
        await writeFile(path.join(dir, addons, name, '__manifest__.py'), "{'name': 'x'}\n");
      };
      await manifest('odoo/addons', 'base');
      await manifest('odoo/addons', 'web');
      await manifest('addons', 'crm');
      await mkdir(path.join(dir, 'addons', 'not_a_module', 'static'), { recursive: true }); // no manifest
      await writeFile(path.join(dir, 'addons', 'README.md'), 'a file, not a module\n');
      await manifest('svc-addons', 'svc_instance');
      const layout = odooLayout(dir, 18_999);
      await mkdir(path.join(dir, 'config'), { recursive: true });
      const addonsPath = ['odoo/addons', 'addons', 'missing', 'svc-addons'].map((d) => path.join(dir, d)).join(',');
      await writeFile(layout.config, `[options]\ndb_user = x\naddons_path = ${addonsPath}\nhttp_port = 18999\n`);

      const host = await confirmedRootServer(t.app, t.as.operator, sshd, {
        username: TEST_USERS.sudoNoPassword.name,
        password: TEST_USERS.sudoNoPassword.password,
        sudo_user: true,
        sudo_user_no_password: true,
      });
      const server = await t.ctx.db.rootServer.findUniqueOrThrow({ where: { id: host.id } });
      const session = await openRemoteSession(t.ctx, server, { user_id: null });
      try {
        expect(await listHostModules(t.ctx, session, host.id, layout)).toEqual(['base', 'crm', 'svc_instance', 'web']);
        expect((await call('GET', `/api/v1/root-servers/${host.id}`)).json().odoo_modules).toEqual(['base', 'crm', 'svc_instance', 'web']);
        // A configuration without addons_path (not setup_odoo's): nothing listed, nothing refused for it.
        await writeFile(odooLayout(dir, 18_997).config, '[options]\ndb_user = x\n');
        expect(await listHostModules(t.ctx, session, host.id, odooLayout(dir, 18_997))).toEqual([]);
        // No configuration: the step fails saying so.
        await expect(listHostModules(t.ctx, session, host.id, odooLayout(dir, 18_998))).rejects.toThrow(
          /No Odoo configuration at .*odoo-18998\.conf/,
        );
      } finally {
        session.close();
      }
    });
  });
});
