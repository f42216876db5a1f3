// Where a subscription lives, and the checks of move, move_back and the per-host base path that need
// no Odoo (the moves themselves run against the real Odoo: test-odoo/odoo-move.test.ts).
import { describe, expect, it } from 'vitest';
import { moveJobs } from '../src/moves/move-job-specs.js';
import { request, waitForJob } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';
import { act, useLifecycle } from './helpers/lifecycle.js';
import { freePort } from './helpers/sshd.js';

const t = useTestApp({ workers: true });
const fx = useLifecycle(t);

describe('where a subscription lives', () => {
  it("the deployment records its template's PostgreSQL server on it; a subscription not yet deployed has none", async () => {
    const sub = await fx.deployed();
    const template = await t.ctx.db.databaseTemplate.findUniqueOrThrow({ where: { id: sub.database_template_id as number } });
    expect(sub).toMatchObject({ postgresql_server_id: template.postgresql_server_id, root_server_id: null });
    const draft = await request(t.app, t.as.operator, {
      method: 'POST',
      url: '/api/v1/subscriptions',
      payload: { name: 'Draft', partner_id: (await fx.partner()).id, database_template_id: template.id },
    });
    expect(draft.json()).toMatchObject({ postgresql_server_id: null, root_server_id: null });
  });
});

describe('move and move_back', () => {
  it('a body naming no target: 400; a subscription without an Odoo host: 409 saying so; nothing recorded', async () => {
    const sub = await fx.deployed();
    const empty = await act(t, sub.id, 'move', {});
    expect(empty.statusCode, empty.body).toBe(400);
    expect(empty.json().error.message).toContain('root_server_id');
    const noHost = await act(t, sub.id, 'move', { root_server_id: 1 });
    expect(noHost.statusCode, noHost.body).toBe(409);
    expect(noHost.json().error.message).toBe(`Subscription ${sub.id} has no Odoo host: only an instance served by one is moved`);
    expect(await t.ctx.db.subscriptionMove.count({ where: { subscription_id: sub.id } })).toBe(0);
    expect((await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: sub.id } })).operation).toBeNull();
  });

  it('a suspended subscription is not moved (409 naming its state); one never moved has nothing to move back to (409)', async () => {
    const sub = await fx.deployed();
    expect((await act(t, sub.id, 'suspend')).statusCode).toBe(200);
    const res = await act(t, sub.id, 'move', { root_server_id: 1 });
    expect(res.statusCode, res.body).toBe(409);
    expect(res.json().error.message).toContain('is suspended: only the instance of a running subscription is moved');
    const back = await act(t, sub.id, 'move_back');
    expect(back.statusCode, back.body).toBe(409);
    expect(back.json().error.message).toBe(`Subscription ${sub.id} was never moved: there is nothing to move back to`);
  });

  it('a move whose job was lost with Redis is queued again by the sweep: it fails cleanly and the subscription is released', async () => {
    const sub = await fx.deployed();
    const gone = await t.ctx.db.postgresqlServer.create({ data: { name: 'gone', ip: '127.0.0.1', port: await freePort() } });
    const host = await t.ctx.db.rootServer.create({ data: { ip: '127.0.0.1', port: await freePort(), state: 'confirmed' } });
    const move = await t.ctx.db.subscriptionMove.create({
      data: {
        subscription_id: sub.id,
        database_name: sub.database_name,
        from_postgresql_server_id: sub.postgresql_server_id as number,
        from_root_server_id: host.id,
        to_postgresql_server_id: gone.id,
        to_root_server_id: host.id,
      },
    });
    // Claimed for the move, and no job anywhere (as after Redis restarted empty).
    await t.ctx.db.subscription.update({ where: { id: sub.id }, data: { operation: 'move', operation_job_id: `move:${move.id}` } });
    const sweep = await waitForJob(t.app, t.as.operator, await t.ctx.queues.enqueue(moveJobs.moves_sweep, { user_id: null }), 30_000);
    expect(sweep.result).toMatchObject({ requeued: [move.id] });
    await expect
      .poll(async () => (await t.ctx.db.subscriptionMove.findUniqueOrThrow({ where: { id: move.id } })).state, { timeout: 60_000 })
      .toBe('failed');
    const after = await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: sub.id } });
    expect(after).toMatchObject({
      state: 'running',
      operation: null,
      operation_job_id: null,
      postgresql_server_id: sub.postgresql_server_id,
    });
  });

  it('the lists of a subscription that does not exist: 404', async () => {
    for (const list of ['moves', 'staging-instances']) {
      const res = await request(t.app, t.as.operator, { method: 'GET', url: `/api/v1/subscriptions/999999/${list}` });
      expect(res.statusCode, `${list}: ${res.body}`).toBe(404);
    }
    expect((await request(t.app, t.as.user, { method: 'GET', url: '/api/v1/subscriptions/1/moves' })).statusCode).toBe(403);
  });
});

describe('the base path of an Odoo host', () => {
  it('another base_path than the one Odoo was set up in is refused (409); nothing is queued', async () => {
    const server = await t.ctx.db.rootServer.create({
      data: { ip: '127.0.0.1', state: 'confirmed', odoo_state: 'running', odoo_base_path: '/srv/odoo-a', odoo_http_port: 8069 },
    });
    const version = await t.ctx.db.odooVersion.create({
      data: { name: `18.0-base-${Date.now()}`, source_url: 'https://example.com/odoo.tar.gz', source_sha256: 'a'.repeat(64) },
    });
    const pg = await t.ctx.db.postgresqlServer.findFirstOrThrow();
    const setup = (base_path: string) =>
      request(t.app, t.as.operator, {
        method: 'POST',
        url: `/api/v1/root-servers/${server.id}/actions/setup_odoo`,
        payload: { odoo_version_id: version.id, postgresql_server_id: pg.id, base_path },
      });
    const other = await setup('/srv/odoo-b');
    expect(other.statusCode, other.body).toBe(409);
    expect(other.json().error.message).toContain('lives in /srv/odoo-a: base_path cannot change');
    const bad = await setup('/srv/../etc');
    expect(bad.statusCode, bad.body).toBe(400);
  });
});
