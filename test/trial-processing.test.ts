// Trial requests, partners, subscriptions and their processing and deployment, through the REST
// API and the real BullMQ workers, on real PostgreSQL and Redis. The deployment job connects to the
// real PostgreSQL server (a postgresql_servers row for 127.0.0.1:5432) and creates the customer
// database from a real template database made here; the test checks the copy and drops it.
import { describe, expect, it } from 'vitest';
import pg from 'pg';
import { actionsOf, request, waitForJob } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';
import { act, useLifecycle } from './helpers/lifecycle.js';
import { adminQuery, databaseUrl, dropDatabase } from './helpers/pg.js';
import { createTrialPackage } from './helpers/trial.js';
import { trialJobs } from '../src/trial/trial-job-specs.js';
import { processTrialRequest } from '../src/trial/trial-processing.js';

const t = useTestApp({ workers: true });
const actOnRequest = actionsOf(t, 'trial-requests');
// A real template database with content, on the real server, and its database template.
const fx = useLifecycle(t);
let n = 0;

/** Customer database names start with the company slug: keep them inside this file's namespace. */
const company = () => `${t.ctx.dbName} Co ${++n}`;

async function createRequest(packageId: number, data: Record<string, unknown> = {}) {
  const res = await request(t.app, t.as.operator, {
    method: 'POST',
    url: '/api/v1/trial-requests',
    payload: {
      name: 'Jane Doe',
      company_name: company(),
      email: `jane-${++n}@example.com`,
      mobile: '+49 170 1234567',
      company_size: '11-30',
      trial_package_id: packageId,
      ...data,
    },
  });
  expect(res.statusCode).toBe(201);
  return res.json();
}

async function databaseExists(name: string) {
  return (await adminQuery('SELECT 1 FROM pg_database WHERE datname = $1', [name])).length === 1;
}

async function messagesOf(resource: string, id: number) {
  const res = await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/${resource}/${id}/messages?limit=200` });
  expect(res.statusCode).toBe(200);
  return res.json().items as {
    body: string;
    message_type: string;
    subtype_xmlid: string;
    tracking_values: { field: string; old_value: string | null; new_value: string | null }[];
  }[];
}

describe('REST resources and groups', () => {
  it('users read, operators write; no token → 401; trial verifications are read only', async () => {
    for (const resource of ['trial-packages', 'trial-requests', 'trial-verifications', 'partners', 'subscriptions', 'database-templates']) {
      expect((await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/${resource}` })).statusCode).toBe(200);
      expect((await request(t.app, null, { method: 'GET', url: `/api/v1/${resource}` })).statusCode).toBe(401);
    }
    const pkgBody = { name: 'P', url_string: `p-${++n}` };
    expect((await request(t.app, t.as.user, { method: 'POST', url: '/api/v1/trial-packages', payload: pkgBody })).statusCode).toBe(403);
    expect((await request(t.app, t.as.operator, { method: 'POST', url: '/api/v1/trial-packages', payload: pkgBody })).statusCode).toBe(201);
    expect(
      (await request(t.app, t.as.user, { method: 'POST', url: '/api/v1/partners', payload: { name: 'X', email: 'x@example.com' } }))
        .statusCode,
    ).toBe(403);
    expect((await request(t.app, t.as.operator, { method: 'POST', url: '/api/v1/trial-verifications', payload: {} })).statusCode).toBe(404);
  });

  it('trial packages: url_string unique (409) and validated (400)', async () => {
    const body = {
      name: 'CRM',
      url_string: `crm-${++n}`,
      packages: ['crm'],
      auto_run_subscription: false,
      model_limits: { 'res.partner': 100 },
    };
    const created = await request(t.app, t.as.operator, { method: 'POST', url: '/api/v1/trial-packages', payload: body });
    expect(created.statusCode).toBe(201);
    expect(created.json()).toMatchObject({ ...body, active: true, trial_duration_days: 14, database_template_id: null });
    expect((await request(t.app, t.as.operator, { method: 'POST', url: '/api/v1/trial-packages', payload: body })).statusCode).toBe(409);
    const bad = await request(t.app, t.as.operator, {
      method: 'POST',
      url: '/api/v1/trial-packages',
      payload: { name: 'x', url_string: 'Not A Slug' },
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.code).toBe('validation_error');
  });

  it('trial verifications never show the code hash or the access token', async () => {
    const pkg = await createTrialPackage(t.ctx);
    await t.ctx.db.$executeRaw`
      INSERT INTO trial_verifications (contact_name, company_name, email, mobile, company_size, trial_package_id, access_token, code_hash, code_expiry, ip_address, updated_at)
      VALUES ('J', 'C', 'v@example.com', '+1 555', '1-5', ${pkg.id}, ${'a'.repeat(64)}, ${'b'.repeat(64)}, now(), '10.0.0.1', now())`;
    const list = await request(t.app, t.as.user, { method: 'GET', url: '/api/v1/trial-verifications?email=V@example.com' });
    expect(list.statusCode).toBe(200);
    const [item] = list.json().items;
    expect(item).toMatchObject({ email: 'v@example.com', company_size: '1-5', state: 'pending', ip_address: '10.0.0.1' });
    expect(JSON.stringify(list.json())).not.toMatch(/aaaaaaaa|bbbbbbbb|code_hash|access_token/);
    const one = await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/trial-verifications/${item.id}` });
    expect(one.json()).not.toHaveProperty('code_hash');
    expect(one.json()).not.toHaveProperty('access_token');
  });

  it('partners: e-mail stored lower-cased and unique whatever the case (409)', async () => {
    const a = await request(t.app, t.as.operator, {
      method: 'POST',
      url: '/api/v1/partners',
      payload: { name: 'Ann', email: 'Ann@Example.com' },
    });
    expect(a.statusCode).toBe(201);
    expect(a.json().email).toBe('ann@example.com');
    const b = await request(t.app, t.as.operator, {
      method: 'POST',
      url: '/api/v1/partners',
      payload: { name: 'Ann 2', email: 'ANN@example.com' },
    });
    expect(b.statusCode).toBe(409);
  });
});

describe('trial requests', () => {
  it('(email, trial package) is unique in the database: 409, whatever the case of the e-mail', async () => {
    const pkg = await createTrialPackage(t.ctx);
    const first = await createRequest(pkg.id, { email: 'Dup@Example.com' });
    expect(first).toMatchObject({
      email: 'dup@example.com',
      state: 'new',
      company_size: '11-30',
      links: { partner: null, subscription: null },
    });
    const again = await request(t.app, t.as.operator, {
      method: 'POST',
      url: '/api/v1/trial-requests',
      payload: {
        name: 'J',
        company_name: 'C',
        email: 'DUP@example.com',
        mobile: '+1 555 0100',
        company_size: '1-5',
        trial_package_id: pkg.id,
      },
    });
    expect(again.statusCode).toBe(409);
    expect(again.json().error.code).toBe('conflict');
    const indexes = await t.ctx.db.$queryRaw<{ count: number }[]>`
      SELECT count(*)::int AS count FROM pg_indexes WHERE indexname = 'trial_requests_email_trial_package_id_key'`;
    expect(indexes).toEqual([{ count: 1 }]);
  });

  it('cancel (New → Cancelled) and reset_to_new (Cancelled → New), tracked; other moves 409', async () => {
    const pkg = await createTrialPackage(t.ctx);
    const req = await createRequest(pkg.id);
    expect((await actOnRequest(req.id, 'reset_to_new')).statusCode).toBe(409);
    expect((await actOnRequest(req.id, 'cancel')).json().state).toBe('cancelled');
    expect((await actOnRequest(req.id, 'cancel')).statusCode).toBe(409);
    expect((await actOnRequest(req.id, 'create_subscription')).statusCode).toBe(409);
    expect((await actOnRequest(req.id, 'reset_to_new')).json().state).toBe('new');
    expect((await actOnRequest(req.id, 'cancel', undefined, t.as.user)).statusCode).toBe(403);

    const states = (await messagesOf('trial-requests', req.id))
      .flatMap((m) => m.tracking_values)
      .filter((t) => t.field === 'state')
      .map((t) => `${t.old_value}→${t.new_value}`)
      .reverse();
    expect(states).toEqual(['null→new', 'new→cancelled', 'cancelled→new']);
  });

  it('PATCH records tracked fields in the chatter; state is not writable', async () => {
    const pkg = await createTrialPackage(t.ctx);
    const req = await createRequest(pkg.id);
    const res = await request(t.app, t.as.operator, {
      method: 'PATCH',
      url: `/api/v1/trial-requests/${req.id}`,
      payload: { mobile: '+33 6 12 34 56 78', company_size: '100+', notes: 'VIP' },
    });
    expect(res.statusCode).toBe(200);
    const [latest] = await messagesOf('trial-requests', req.id);
    expect(latest!.tracking_values).toEqual(
      expect.arrayContaining([
        { field: 'mobile', old_value: '+49 170 1234567', new_value: '+33 6 12 34 56 78' },
        { field: 'company_size', old_value: '11-30', new_value: '100+' },
      ]),
    );
    expect(
      (await request(t.app, t.as.operator, { method: 'PATCH', url: `/api/v1/trial-requests/${req.id}`, payload: { state: 'done' } }))
        .statusCode,
    ).toBe(400);
  });
});

describe('processing and deployment', () => {
  it('create_subscription: partner created, trial subscription from the package, deployment creates the database from the template', async () => {
    // What the package gives its trial subscriptions.
    const given = {
      packages: ['crm', 'sales', 'website'],
      user_limit: 5,
      storage_limit_gb: 10,
      stage_limit: 3,
      trial_duration_days: 30,
      grace_period_days: 7,
      model_limits: { 'res.partner': 500 },
      database_template_id: fx.templateId,
    };
    const pkg = await createTrialPackage(t.ctx, given);
    const req = await createRequest(pkg.id);
    // No Auto Run Subscription: nothing happens on its own.
    expect(await t.ctx.queues.queue('trials').getJobCounts()).toMatchObject({ waiting: 0, active: 0 });

    const res = await actOnRequest(req.id, 'create_subscription');
    expect(res.statusCode).toBe(200);
    const result = res.json();
    expect(result).toMatchObject({
      partner_created: true,
      trial_request: { state: 'done' },
      deployment_job_id: expect.stringMatching(/^deployments-/),
    });
    expect(result.trial_request.links).toEqual({
      partner: `/api/v1/partners/${result.partner_id}`,
      subscription: `/api/v1/subscriptions/${result.subscription_id}`,
    });
    const partner = (await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/partners/${result.partner_id}` })).json();
    expect(partner).toMatchObject({ name: 'Jane Doe', email: req.email, company_name: req.company_name, mobile: '+49 170 1234567' });

    const sub = (await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/subscriptions/${result.subscription_id}` })).json();
    expect(sub).toMatchObject({ partner_id: result.partner_id, is_trial: true, ...given });
    expect(['confirmed', 'deploying', 'running']).toContain(sub.state);
    expect(Date.parse(sub.grace_end_date) - Date.parse(sub.trial_end_date)).toBe(7 * 86_400_000);
    expect(Math.round((Date.parse(sub.trial_end_date) - Date.parse(sub.created_at)) / 86_400_000)).toBe(30);

    const job = await waitForJob(t.app, t.as.user, result.deployment_job_id);
    expect(job).toMatchObject({ state: 'completed', result: { database_name: sub.database_name, template_db_name: fx.templateDb } });
    expect(job.progress).toEqual({ step: 'done' });
    const deployed = (await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/subscriptions/${sub.id}` })).json();
    expect(deployed.state).toBe('running');

    // The customer database really exists, as a copy of the template made the customer's.
    expect(await databaseExists(sub.database_name)).toBe(true);
    const client = new pg.Client({ connectionString: databaseUrl(sub.database_name) });
    await client.connect();
    expect((await client.query('SELECT name FROM res_company')).rows).toEqual([{ name: req.company_name }]);
    await client.end();
    await dropDatabase(sub.database_name);

    const log = await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/action-logs?model_name=svc.subscription&rec_id=${sub.id}` });
    // Newest first.
    expect(log.json().items).toEqual(
      ['svc.* config parameters', 'becomes', 'new identity of', `TEMPLATE "${fx.templateDb}"`, 'choose the host of'].map((step) =>
        expect.objectContaining({ action_type: 'deployment', status: 'success', input_text: expect.stringContaining(step) }),
      ),
    );
    const subStates = (await messagesOf('subscriptions', sub.id))
      .flatMap((m) => m.tracking_values)
      .filter((t) => t.field === 'state')
      .map((t) => t.new_value)
      .reverse();
    expect(subStates).toEqual(['draft', 'confirmed', 'deploying', 'running']);
    const reqStates = (await messagesOf('trial-requests', req.id))
      .flatMap((m) => m.tracking_values)
      .filter((t) => t.field === 'state')
      .map((t) => t.new_value)
      .reverse();
    expect(reqStates).toEqual(['new', 'processing', 'done']);

    // A request that has a subscription: 409.
    const again = await actOnRequest(req.id, 'create_subscription');
    expect(again.statusCode).toBe(409);
  });

  it('reuses the partner with the same e-mail, whatever its case', async () => {
    const existing = await request(t.app, t.as.operator, {
      method: 'POST',
      url: '/api/v1/partners',
      payload: { name: 'Existing', email: 'reuse@example.com' },
    });
    const pkg = await createTrialPackage(t.ctx, { database_template_id: fx.templateId });
    const req = await createRequest(pkg.id, { email: 'ReUse@Example.COM' });
    const partners = await t.ctx.db.partner.count();
    const res = await actOnRequest(req.id, 'create_subscription');
    expect(res.json()).toMatchObject({ partner_id: existing.json().id, partner_created: false });
    expect(await t.ctx.db.partner.count()).toBe(partners);
    const job = await waitForJob(t.app, t.as.user, res.json().deployment_job_id);
    await dropDatabase(job.result.database_name);
  });

  it('Auto Run Subscription: a new request is processed by a background job and deployed', async () => {
    const pkg = await createTrialPackage(t.ctx, { auto_run_subscription: true, database_template_id: fx.templateId });
    const req = await createRequest(pkg.id);
    const read = async (url: string) => (await request(t.app, t.as.user, { method: 'GET', url })).json();
    await expect.poll(async () => (await read(`/api/v1/trial-requests/${req.id}`)).state, { timeout: 20_000 }).toBe('done');
    const current = await read(`/api/v1/trial-requests/${req.id}`);
    expect(current.subscription_id).not.toBeNull();
    const subUrl = `/api/v1/subscriptions/${current.subscription_id}`;
    await expect.poll(async () => (await read(subUrl)).state, { timeout: 20_000 }).toBe('running');
    const sub = await read(subUrl);
    expect(await databaseExists(sub.database_name)).toBe(true);
    await dropDatabase(sub.database_name);
  });

  it('a processing job whose worker died after the commit queues the missing deployment when it runs again', async () => {
    const pkg = await createTrialPackage(t.ctx, { database_template_id: fx.templateId });
    const req = await createRequest(pkg.id);
    // The state a crash between the commit and the queueing leaves: processed, nothing queued.
    const stopped = { ...t.ctx, queues: { ...t.ctx.queues, enqueue: () => Promise.reject(new Error('worker died')) } };
    const first = await processTrialRequest(stopped as typeof t.ctx, req.id, null);
    expect(first.deployment_job_id).toBeNull();
    expect((await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: first.subscription_id } })).state).toBe('confirmed');

    const again = await t.ctx.queues.enqueue(trialJobs.process_trial_request, { trial_request_id: req.id, user_id: null });
    const rerun = await waitForJob(t.app, t.as.user, again);
    expect(rerun).toMatchObject({ state: 'completed', result: { resumed: true, deployment_job_id: expect.any(String) } });
    const deployment = await waitForJob(t.app, t.as.user, rerun.result.deployment_job_id);
    expect(deployment.state).toBe('completed');
    expect((await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: first.subscription_id } })).state).toBe('running');
    expect(await t.ctx.db.subscription.count({ where: { trial_requests: { some: { id: req.id } } } })).toBe(1);
    // Once deployed, running it again changes nothing.
    expect(
      (
        await waitForJob(
          t.app,
          t.as.user,
          await t.ctx.queues.enqueue(trialJobs.process_trial_request, { trial_request_id: req.id, user_id: null }),
        )
      ).result,
    ).toEqual({
      skipped: expect.stringMatching(/already has subscription/),
    });
    await dropDatabase(deployment.result.database_name);
  });

  it('a failure leaves the request New with the error in its chatter, and nothing half-made', async () => {
    const pkg = await createTrialPackage(t.ctx); // no database template
    const req = await createRequest(pkg.id, { email: 'nofail@example.com' });
    const res = await actOnRequest(req.id, 'create_subscription');
    expect(res.statusCode).toBe(400);
    expect(res.json().error.message).toMatch(/has a database template/);
    expect((await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/trial-requests/${req.id}` })).json()).toMatchObject({
      state: 'new',
      subscription_id: null,
      partner_id: null,
    });
    expect(await t.ctx.db.partner.count({ where: { email: 'nofail@example.com' } })).toBe(0);
    const [latest] = await messagesOf('trial-requests', req.id);
    expect(latest).toMatchObject({
      body: expect.stringMatching(/^Processing failed: .*database template/),
      subtype_xmlid: 'mail.mt_alert',
    });

    // The request's own template overrides the package's: processing now succeeds.
    await request(t.app, t.as.operator, {
      method: 'PATCH',
      url: `/api/v1/trial-requests/${req.id}`,
      payload: { database_template_id: fx.templateId },
    });
    const ok = await actOnRequest(req.id, 'create_subscription');
    expect(ok.statusCode).toBe(200);
    await dropDatabase((await waitForJob(t.app, t.as.user, ok.json().deployment_job_id)).result.database_name);
  });

  it('five concurrent create_subscription calls: one subscription, the others 409', async () => {
    const pkg = await createTrialPackage(t.ctx, { database_template_id: fx.templateId });
    const req = await createRequest(pkg.id);
    const results = await Promise.all(Array.from({ length: 5 }, () => actOnRequest(req.id, 'create_subscription')));
    expect(results.map((r) => r.statusCode).sort()).toEqual([200, 409, 409, 409, 409]);
    expect(await t.ctx.db.subscription.count({ where: { trial_requests: { some: { id: req.id } } } })).toBe(1);
    const ok = results.find((r) => r.statusCode === 200)!;
    await dropDatabase((await waitForJob(t.app, t.as.user, ok.json().deployment_job_id)).result.database_name);
  });

  it("a failed deployment: subscription failed, error in its chatter and the request's, action log; deploy again once fixed", async () => {
    const [server] = await t.ctx.db.$queryRaw<{ id: number }[]>`SELECT id FROM postgresql_servers LIMIT 1`;
    const missing = await t.ctx.db.databaseTemplate.create({
      data: { name: 'broken', postgresql_server_id: server!.id, template_db_name: `${t.ctx.dbName}_missing` },
    });
    const pkg = await createTrialPackage(t.ctx, { database_template_id: missing.id });
    const req = await createRequest(pkg.id);
    const res = await actOnRequest(req.id, 'create_subscription');
    const job = await waitForJob(t.app, t.as.user, res.json().deployment_job_id);
    expect(job.state).toBe('failed');
    expect(job.error).toMatch(/does not exist/);
    expect(job.progress).toEqual({ step: 'creating_database' });
    const subId = res.json().subscription_id;
    expect((await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/subscriptions/${subId}` })).json().state).toBe('failed');
    expect((await messagesOf('subscriptions', subId))[0]!.body).toMatch(/^Deployment failed: .*does not exist/);
    expect((await messagesOf('trial-requests', req.id))[0]!.body).toMatch(new RegExp(`^Deployment of subscription ${subId} failed`));
    const log = (
      await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/action-logs?model_name=svc.subscription&rec_id=${subId}` })
    ).json();
    expect(log.items[0]).toMatchObject({
      action_type: 'deployment',
      status: 'failure',
      output_text: expect.stringMatching(/does not exist/),
    });

    await request(t.app, t.as.operator, {
      method: 'PATCH',
      url: `/api/v1/subscriptions/${subId}`,
      payload: { database_template_id: fx.templateId },
    });
    const redeploy = await act(t, subId, 'deploy');
    expect(redeploy.statusCode).toBe(202);
    const second = await waitForJob(t.app, t.as.user, redeploy.json().job_id);
    expect(second.state).toBe('completed');
    expect((await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/subscriptions/${subId}` })).json().state).toBe('running');
    await dropDatabase(second.result.database_name);
  });
});

describe('subscription state methods', () => {
  it('confirm, cancel, reset_to_draft; wrong states 409; deploy needs confirmed or failed', async () => {
    const partner = (
      await request(t.app, t.as.operator, {
        method: 'POST',
        url: '/api/v1/partners',
        payload: { name: 'S', email: `s-${++n}@example.com` },
      })
    ).json();
    const created = await request(t.app, t.as.operator, {
      method: 'POST',
      url: '/api/v1/subscriptions',
      payload: { name: 'Manual', partner_id: partner.id },
    });
    expect(created.statusCode).toBe(201);
    const id = created.json().id;
    expect(created.json()).toMatchObject({ state: 'draft', is_trial: false, backup_state: 'none' });
    expect((await act(t, id, 'deploy')).statusCode).toBe(409);
    expect((await act(t, id, 'reset_to_draft')).statusCode).toBe(409);
    expect((await act(t, id, 'confirm')).json().state).toBe('confirmed');
    expect((await act(t, id, 'confirm')).statusCode).toBe(409);
    expect((await act(t, id, 'cancel')).json().state).toBe('cancelled');
    expect((await act(t, id, 'reset_to_draft')).json().state).toBe('draft');
    expect((await act(t, id, 'confirm', undefined, t.as.user)).statusCode).toBe(403);
    expect((await act(t, 999999, 'confirm')).statusCode).toBe(404);
    expect(
      (await request(t.app, t.as.operator, { method: 'PATCH', url: `/api/v1/subscriptions/${id}`, payload: { state: 'running' } }))
        .statusCode,
    ).toBe(400);
  });
});
