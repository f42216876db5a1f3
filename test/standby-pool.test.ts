// The standby pool on real parts: ready copies of an Odoo-shaped template on the real PostgreSQL,
// their filestores on a real sshd host, trials that take them by rename (two worker sets at once),
// stale and failed standbys removed and made again.
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { withSessionLock } from '../src/core/session-lock.js';
import { createStandbyPool, installationPrefix, STANDBY_POOL_LOCK, takeStandby } from '../src/instances/standby-pool.js';
import { startWorkers, type Workers } from '../src/worker.js';
import { request, waitForJob } from './helpers/api.js';
import { useOdooHost } from './helpers/odoo-host.js';
import { databaseRow, get } from './helpers/lifecycle.js';
import { configParameters, createOdooTemplate, queryIn } from './helpers/odoo-template.js';
import { createTrialPackage, processedTrial } from './helpers/trial.js';

const f = useOdooHost({ logo: 'logo bytes' });
const { t } = f;

afterAll(async () => {
  // Standby names are not this test file's (svc_standby_<installation>_<package>_<n>): the pool removes them.
  await t.ctx?.db.trialPackage.updateMany({ data: { standby_pool_size: 0 } });
  await t.ctx?.db.standbyDatabase.updateMany({ data: { state: 'failed', updated_at: new Date(0) } });
  if (t.ctx) await maintain();
});

interface Standby {
  id: number;
  trial_package_id: number;
  database_name: string;
  state: string;
  error: string | null;
}

async function standbys(packageId: number): Promise<Standby[]> {
  const res = await request(t.app, t.as.operator, {
    method: 'GET',
    url: `/api/v1/standby-databases?trial_package_id=${packageId}&limit=200`,
  });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().items;
}

const maintain = () => createStandbyPool(t.ctx).maintain();

describe('the standby pool', () => {
  it('keeps standby_pool_size ready copies per package, each with its own identity and filestore; operators list them', async () => {
    const pkg = await createTrialPackage(t.ctx, { database_template_id: f.fx.templateId, standby_pool_size: 2 });
    const run = await maintain();
    expect(run.failed).toEqual([]);
    const ready = await standbys(pkg.id);
    expect(ready.map((s) => s.state)).toEqual(['ready', 'ready']);
    // svc_standby_<installation>_<package>_<n>: two installations sharing a cluster never clash.
    const prefix = await installationPrefix(t.ctx.db);
    expect(prefix).toMatch(/^svc_standby_[0-9a-f]{8}_$/);
    for (const s of ready) expect(s.database_name).toBe(`${prefix}${pkg.id}_${s.id}`);
    const [a, b, template] = await Promise.all([
      configParameters(ready[0]!.database_name),
      configParameters(ready[1]!.database_name),
      configParameters(f.fx.templateDb),
    ]);
    expect(new Set([a['database.secret'], b['database.secret'], template['database.secret']]).size).toBe(3);
    expect(a).not.toHaveProperty('database.enterprise_code');
    for (const s of ready) expect((await stat(path.join(f.filestore(s.database_name), 'logo'))).isFile()).toBe(true);
    expect((await request(t.app, t.as.user, { method: 'GET', url: '/api/v1/standby-databases' })).statusCode).toBe(403);

    // A second run has nothing to do.
    expect(await maintain()).toEqual({ created: [], failed: [], removed: [] });
    await t.ctx.db.trialPackage.update({ where: { id: pkg.id }, data: { standby_pool_size: 0 } });
    expect((await maintain()).removed).toHaveLength(2);
    for (const s of ready) expect(await databaseRow(s.database_name)).toBeNull();
  });

  it('a trial takes a ready standby by rename and becomes the customer’s; the pool makes a new one', async () => {
    const pkg = await createTrialPackage(t.ctx, { database_template_id: f.fx.templateId, standby_pool_size: 1 });
    await maintain();
    const [standby] = await standbys(pkg.id);
    const before = await configParameters(standby!.database_name);

    const { subscription_id, deployment_job_id } = await processedTrial(t, pkg.id);
    const job = await waitForJob(t.app, t.as.user, deployment_job_id);
    expect(job.state, job.error).toBe('completed');
    expect(job.result.standby).toBe(standby!.database_name);
    const sub = await get(t, subscription_id);
    expect(await databaseRow(standby!.database_name)).toBeNull();
    const params = await configParameters(sub.database_name);
    expect(params['database.secret']).toBe(before['database.secret']);
    expect(params['web.base.url']).toBe(sub.url);
    expect(params['svc.subscription_id']).toBe(String(sub.id));
    const [admin] = await queryIn(sub.database_name, 'SELECT login FROM res_users WHERE id = 2');
    const partner = (await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/partners/${sub.partner_id}` })).json();
    expect(admin!.login).toBe(partner.email);
    await f.smtp.waitFor(partner.email);
    expect((await stat(path.join(f.filestore(sub.database_name), 'logo'))).isFile()).toBe(true);
    await expect(stat(f.filestore(standby!.database_name))).rejects.toThrow(/ENOENT/);

    // The deployment asked the pool for a new one.
    await expect.poll(async () => (await standbys(pkg.id)).map((s) => s.state), { timeout: 30_000 }).toEqual(['ready']);
    expect((await standbys(pkg.id))[0]!.database_name).not.toBe(standby!.database_name);
  });

  it('a changed template makes its standbys stale: they are removed and made again', async () => {
    const pkg = await createTrialPackage(t.ctx, { database_template_id: f.fx.templateId, standby_pool_size: 1 });
    await maintain();
    const [old] = await standbys(pkg.id);
    const patched = await request(t.app, t.as.operator, {
      method: 'PATCH',
      url: `/api/v1/database-templates/${f.fx.templateId}`,
      payload: { name: `Odoo ${Date.now()}` },
    });
    expect(patched.statusCode, patched.body).toBe(200);
    const run = await maintain();
    expect(run.removed).toContainEqual({ database_name: old!.database_name, reason: 'its template changed' });
    expect(await databaseRow(old!.database_name)).toBeNull();
    const [fresh] = await standbys(pkg.id);
    expect(fresh, fresh?.error ?? '').toMatchObject({ state: 'ready' });
    expect(fresh!.database_name).not.toBe(old!.database_name);
  });

  it('a standby copied from older contents (an update advanced content_version, not the record) is not handed out, and is made again', async () => {
    const pkg = await createTrialPackage(t.ctx, { database_template_id: f.fx.templateId, standby_pool_size: 1 });
    await maintain();
    const [old] = await standbys(pkg.id);
    expect(old, old?.error ?? '').toMatchObject({ state: 'ready' });
    // What a successful update does (pools' onOdooChange): the contents' version moves on, updated_at stays.
    await t.ctx.db.$executeRaw`UPDATE database_templates SET content_version = content_version + 1 WHERE id = ${f.fx.templateId}`;
    expect(await takeStandby(t.ctx.db, pkg.id, f.fx.templateId)).toBeNull();
    const run = await maintain();
    expect(run.removed).toContainEqual({ database_name: old!.database_name, reason: "its template's contents changed" });
    expect(await databaseRow(old!.database_name)).toBeNull();
    const [fresh] = await standbys(pkg.id);
    expect(fresh, fresh?.error ?? '').toMatchObject({ state: 'ready' });
    expect((await takeStandby(t.ctx.db, pkg.id, f.fx.templateId))?.id).toBe(fresh!.id);
    await t.ctx.db.trialPackage.update({ where: { id: pkg.id }, data: { standby_pool_size: 0 } });
    await t.ctx.db.standbyDatabase.updateMany({ where: { id: fresh!.id }, data: { state: 'failed', updated_at: new Date(0) } });
  }, 120_000);

  it('a standby that fails to build is shown failed with its error, never handed out, and made again later', async () => {
    const badDb = `${t.ctx.dbName}_nousers`;
    await createOdooTemplate(badDb, { without: 'res_users' });
    const template = await t.ctx.db.databaseTemplate.create({
      data: { name: 'broken', postgresql_server_id: f.fx.serverId, template_db_name: badDb },
    });
    const pkg = await createTrialPackage(t.ctx, { database_template_id: template.id, standby_pool_size: 1 });
    await maintain();
    const [failed] = await standbys(pkg.id);
    expect(failed).toMatchObject({ state: 'failed', error: expect.stringContaining('missing table res_users') });
    expect(await databaseRow(failed!.database_name)).toBeNull();

    const { deployment_job_id } = await processedTrial(t, pkg.id);
    const job = await waitForJob(t.app, t.as.user, deployment_job_id);
    expect(job.state).toBe('failed');
    expect((await standbys(pkg.id)).map((s) => s.id)).toEqual([failed!.id]);

    // Shown a while, then removed and tried again.
    expect((await maintain()).created).toEqual([]);
    await t.ctx.db.standbyDatabase.update({ where: { id: failed!.id }, data: { updated_at: new Date(Date.now() - 6 * 60_000) } });
    const retry = await maintain();
    expect(retry.removed).toContainEqual({ database_name: failed!.database_name, reason: 'failed: made again' });
    expect((await standbys(pkg.id)).map((s) => s.id)).not.toContain(failed!.id);
  });

  it('two worker sets deploying trials at once: each subscription gets its own database and no standby is given twice', async () => {
    const pkg = await createTrialPackage(t.ctx, { database_template_id: f.fx.templateId, standby_pool_size: 3 });
    await maintain();
    const pool = (await standbys(pkg.id)).map((s) => s.database_name);
    expect(pool).toHaveLength(3);
    // Held as a maintaining worker holds it: no refill or removal runs while the trials take their
    // standbys, however slow the machine (a refill 15 s after a take would otherwise race them).
    const holdingThePool = async (work: () => Promise<void>) => {
      const held = async () => {
        await work();
        return true;
      };
      while ((await withSessionLock(t.ctx.config.DATABASE_URL, STANDBY_POOL_LOCK, held)) === null) {
        await new Promise((r) => setTimeout(r, 200)); // a scheduled maintenance run is finishing
      }
    };
    let second: Workers | null = null;
    try {
      second = await startWorkers(t.ctx);
      await holdingThePool(async () => {
        const trials = await Promise.all([1, 2, 3, 4, 5].map(() => processedTrial(t, pkg.id)));
        const jobs = await Promise.all(trials.map((trial) => waitForJob(t.app, t.as.user, trial.deployment_job_id, 60_000)));
        expect(jobs.map((j) => j.state)).toEqual(['completed', 'completed', 'completed', 'completed', 'completed']);
        const taken = jobs.map((j) => j.result.standby).filter(Boolean);
        expect(taken.sort()).toEqual([...pool].sort());
        const names = await Promise.all(trials.map(async (trial) => (await get(t, trial.subscription_id)).database_name));
        expect(new Set(names).size).toBe(5);
        for (const name of names) expect(await databaseRow(name)).not.toBeNull();
        const secrets = await Promise.all(names.map(async (name) => (await configParameters(name))['database.secret']));
        expect(new Set(secrets).size).toBe(5);
      });
    } finally {
      await second?.close();
    }
  });
});
