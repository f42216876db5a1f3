// Packages are apps (issue 48, DESIGN §23), on the real Odoo (18.0 and 19.0): a trial package names
// Odoo modules, the template built for it installs them, and a trial deployed from it has them
// installed. The core tarballs hold only modules Odoo installs with base (web, bus, base_setup,
// web_tour, rpc: all auto_install), so each source here is the core tarball with two small addons of
// the test's own in odoo/addons (as a full Odoo source holds crm, sale...). setup_odoo lists the
// modules on the host's addons path; a package naming one the source lacks (crm) is refused with its
// name at save, and a build asked for it fails naming it before it makes anything; a package naming
// one its built template lacks is refused until the template's `update` installs it.
// Odoo's ports: 20200 (first source), 20300 (second).
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { request } from '../test/helpers/api.js';
import { queryIn } from '../test/helpers/odoo-template.js';
import { adminQuery } from '../test/helpers/pg.js';
import { describeOdooSource, type OdooSource } from '../test/helpers/odoo-source.js';
import { processedTrial } from '../test/helpers/trial.js';
import { waitForJob } from '../test/helpers/api.js';
import { odooSources, useOdooFixture } from './odoo-fixture.js';
import { buildTemplate, newOdooVersion, newTemplate, setupOdoo } from './odoo-host.js';

const DEMO = 'svc_pkg_demo';
const EXTRA = 'svc_pkg_extra';
const sources = odooSources();
const f = useOdooFixture({ SUBSCRIPTION_URL: 'https://{database_name}.packages.test' });

let work = '';
beforeAll(async () => {
  work = await mkdtemp(path.join(tmpdir(), 'svc-odoo-packages-'));
});
afterAll(async () => {
  if (work) await rm(work, { recursive: true, force: true });
});

/** The core tarball with DEMO and EXTRA (depends on base, not auto-installed) in its odoo/addons. */
async function withDemoAddons(src: OdooSource): Promise<OdooSource> {
  const addons = path.join(work, `addons-${src.series}`);
  for (const name of [DEMO, EXTRA]) {
    await mkdir(path.join(addons, name), { recursive: true });
    await writeFile(path.join(addons, name, '__init__.py'), '');
    await writeFile(
      path.join(addons, name, '__manifest__.py'),
      `{"name": "${name}", "version": "1.0", "depends": ["base"], "license": "LGPL-3", "installable": True, "auto_install": False}\n`,
    );
  }
  const top = execFileSync('tar', ['-tzf', src.file], { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 })
    .split('\n')[0]!
    .split('/')[0]!;
  const tar = path.join(work, `odoo-${src.series}-packages.tar`);
  execFileSync('bash', [
    '-c',
    'set -e; gzip -dc "$1" > "$2"; tar -rf "$2" -C "$3" --transform "s,^,$4/odoo/addons/," "$5" "$6"; gzip -1 -f "$2"',
    '-',
    src.file,
    tar,
    addons,
    top,
    DEMO,
    EXTRA,
  ]);
  return describeOdooSource(`${tar}.gz`);
}

describe.each(sources.map((s, i) => ({ ...s, port: 20200 + 100 * i })))('packages on Odoo $name', (core) => {
  const made = { host: 0, templateId: 0, templateDb: '', packageId: 0 };
  const call = (method: 'GET' | 'POST' | 'PATCH', url: string, payload?: object) =>
    request(f.t.app, f.t.as.operator, { method, url, ...(payload ? { payload } : {}) });

  test("a package's module is installed by the template's build and in a trial deployed from it; one the source lacks is refused by name", async () => {
    const src = await withDemoAddons(core);
    const version = await newOdooVersion(f, src, 'packages');
    made.host = await f.newHost();
    await setupOdoo(f, made.host, {
      odoo_version_id: version.id,
      postgresql_server_id: f.pgServerId,
      http_port: core.port,
      workers: 0,
      max_cron_threads: 0,
    });
    // The host's addons path, as setup_odoo listed it.
    const listed = (await f.server(made.host)).odoo_modules as string[];
    expect(listed).toEqual(expect.arrayContaining(['base', 'web', 'base_setup', 'svc_instance', DEMO, EXTRA]));
    expect(listed).not.toContain('crm');

    made.templateDb = `svc_odoo_p_tpl${src.series}_${Date.now().toString(36)}`;
    made.templateId = await newTemplate(f, made.host, `Packages ${src.name}`, made.templateDb);

    // A CRM package on a source without crm: refused at save, naming it.
    const crm = await call('POST', '/api/v1/trial-packages', {
      name: 'CRM',
      url_string: `crm-${src.series}`,
      packages: ['crm'],
      database_template_id: made.templateId,
    });
    expect(crm.statusCode, crm.body).toBe(400);
    expect(crm.json().error.message).toContain('has no module crm');

    const pkg = await call('POST', '/api/v1/trial-packages', {
      name: 'Demo',
      url_string: `demo-${src.series}`,
      packages: [DEMO],
      database_template_id: made.templateId,
    });
    expect(pkg.statusCode, pkg.body).toBe(201);
    made.packageId = pkg.json().id;

    // Built with no modules named: its packages' modules (and svc's own).
    const built = await buildTemplate(f, made.templateId);
    expect((built.result as { modules: string[] }).modules).toEqual(['base', 'svc_instance', DEMO, 'web']);
    const recorded = (await call('GET', `/api/v1/database-templates/${made.templateId}`)).json().modules as string[];
    expect(recorded).toEqual(expect.arrayContaining(['base', 'web', 'svc_instance', DEMO]));
    expect(recorded).not.toContain(EXTRA);
    const inTemplate = await queryIn(made.templateDb, 'SELECT name FROM ir_module_module WHERE state = $1 ORDER BY name', ['installed']);
    expect(inTemplate.map((r) => r.name)).toEqual(recorded);

    // A trial of the package: its instance has the module installed.
    const trial = await processedTrial(f.t, made.packageId);
    const job = await waitForJob(f.t.app, f.t.as.user, trial.deployment_job_id, 10 * 60_000);
    expect(job.state, job.error).toBe('completed');
    const sub = await f.t.ctx.db.subscription.findUniqueOrThrow({ where: { id: trial.subscription_id } });
    expect(sub).toMatchObject({ state: 'running', packages: [DEMO] });
    const states = await queryIn<{ name: string; state: string }>(
      sub.database_name!,
      'SELECT name, state FROM ir_module_module WHERE name = ANY($1)',
      [[DEMO, EXTRA, 'svc_instance']],
    );
    expect(Object.fromEntries(states.map((r) => [r.name, r.state]))).toEqual({
      [DEMO]: 'installed',
      [EXTRA]: 'uninstalled',
      svc_instance: 'installed',
    });
  });

  test("a module the template lacks is refused until the template's update installs it; a build asked for one the source lacks fails naming it", async () => {
    const patch = () => call('PATCH', `/api/v1/trial-packages/${made.packageId}`, { packages: [DEMO, EXTRA] });
    const refused = await patch();
    expect(refused.statusCode, refused.body).toBe(400);
    expect(refused.json().error.message).toContain(`was built without ${EXTRA}`);

    const updated = await f.runJob(made.templateId, 'update', { modules: [EXTRA] }, 'database-templates');
    expect(updated.state, JSON.stringify(updated)).toBe('completed');
    const recorded = (await call('GET', `/api/v1/database-templates/${made.templateId}`)).json().modules as string[];
    expect(recorded).toEqual(expect.arrayContaining([DEMO, EXTRA, 'svc_instance']));
    expect((await patch()).statusCode).toBe(200);

    // The source has no crm: the build fails naming it, before it makes a database.
    const db = `svc_odoo_p_crm${core.series}_${Date.now().toString(36)}`;
    const other = await call('POST', '/api/v1/database-templates', {
      name: `CRM ${core.name}`,
      postgresql_server_id: f.pgServerId,
      template_db_name: db,
      root_server_id: made.host,
    });
    expect(other.statusCode, other.body).toBe(201);
    const failed = await f.runJob(other.json().id, 'build', { modules: ['crm'] }, 'database-templates');
    expect(failed.state).toBe('failed');
    expect(failed.error).toContain('module crm is not on the addons path');
    expect(await adminQuery('SELECT 1 FROM pg_database WHERE datname = $1', [db])).toEqual([]);
  });
});
