// Pools (issue 49, DESIGN §22) on real parts without Odoo: a template's copy made on another host of
// its pool (real PostgreSQL, the tests' sshd as the hosts, the filestore streamed between two host
// directories), which copies count (ready and in step), a copy made again after the template's
// contents changed, a copy that cannot be made, a host that leaves the pool; and drain's bookkeeping
// (what it moves next, resumed by a second request, ending with what stayed and why). Drains moving
// real tenants run on the real Odoo: test-odoo/odoo-fleet.test.ts.
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readyTemplateHosts } from '../src/instances/index.js';
import { place } from '../src/placement/index.js';
import { lookAtDrain, nextToMove } from '../src/pools/drain-service.js';
import { createTemplateCopies } from '../src/pools/template-copies.js';
import { request, waitForJob } from './helpers/api.js';
import { useOdooHost } from './helpers/odoo-host.js';
import { TENANT_ROLE } from './helpers/odoo-template.js';
import { adminQuery } from './helpers/pg.js';

const LOGO = Buffer.alloc(30_000, 7);
const f = useOdooHost({ 'ab/logo': LOGO, 'cd/readme': 'template file' });
const { t } = f;
const dirs: string[] = [];
const HOST_ROLE = 'svc_t_pool_host';
let version: { id: number };
const audit = { user_id: null, job_id: 'test' };

beforeAll(async () => {
  version = await t.ctx.db.odooVersion.create({
    data: { name: `18.0-pools-${Date.now()}`, source_url: 'https://example.com/odoo.tar.gz', source_sha256: 'a'.repeat(64) },
  });
  try {
    await adminQuery(`CREATE ROLE "${HOST_ROLE}" LOGIN NOSUPERUSER CREATEDB NOCREATEROLE`);
  } catch (err) {
    if ((err as { code?: string }).code !== '42710' && (err as { code?: string }).code !== '23505') throw err;
  }
  // The fixture's host is the template's own: an Odoo host of `version` on the local server, its role owning the template.
  await t.ctx.db.rootServer.update({
    where: { id: f.rootServerId },
    data: { odoo_state: 'running', odoo_version_id: version.id, odoo_postgresql_server_id: f.fx.serverId, odoo_db_user: TENANT_ROLE },
  });
  const [who] = await adminQuery<{ cluster: string; oid: string }>(
    'SELECT (SELECT system_identifier::text FROM pg_control_system()) AS cluster, oid::text AS oid FROM pg_database WHERE datname = $1',
    [f.fx.templateDb],
  );
  await t.ctx.db.databaseTemplate.update({
    where: { id: f.fx.templateId },
    data: { template_system_identifier: who!.cluster, template_oid: BigInt(who!.oid), owner_role: TENANT_ROLE, content_version: 1 },
  });
});
afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  const copies = await adminQuery<{ datname: string }>(
    "SELECT datname FROM pg_database WHERE datname LIKE 'svc\\_standby\\_%\\_t' || $1 || '\\_%'",
    [String(f.fx.templateId)],
  );
  for (const { datname } of copies) await adminQuery(`DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`);
});

async function basePath() {
  const base = await mkdtemp(path.join(tmpdir(), 'svc-pool-host-'));
  dirs.push(base);
  await mkdir(path.join(base, 'data', 'filestore'), { recursive: true });
  return base;
}

/** Another Odoo host of the pool: the fixture's sshd, a base path of its own, `role` on the local server. */
async function poolHost(role = HOST_ROLE) {
  const {
    id: _i,
    uuid: _u,
    created_at: _c,
    updated_at: _a,
    ...like
  } = await t.ctx.db.rootServer.findUniqueOrThrow({
    where: { id: f.rootServerId },
  });
  const base = await basePath();
  return t.ctx.db.rootServer.create({
    data: { ...like, name: `pool host ${base}`, odoo_db_user: role, odoo_base_path: base, cordoned_at: null, cordon_reason: null },
  });
}

const copyOf = (hostId: number) =>
  t.ctx.db.databaseTemplateCopy.findUniqueOrThrow({
    where: { database_template_id_root_server_id: { database_template_id: f.fx.templateId, root_server_id: hostId } },
  });
const dbExists = async (name: string) => (await adminQuery('SELECT 1 FROM pg_database WHERE datname = $1', [name])).length === 1;

describe("a template's copies on the hosts of its pool", () => {
  const copies = () => createTemplateCopies(t.ctx);
  let host: Awaited<ReturnType<typeof poolHost>>;

  it('sync makes the copy: owned by the host role through and through, closed to others, with the filestore; then it counts', async () => {
    host = await poolHost();
    expect((await readyTemplateHosts(t.ctx.db, f.fx.templateId)).map((h) => h.root_server_id)).toEqual([f.rootServerId]);

    const result = await copies().sync(f.fx.templateId, audit);
    expect(result.failed).toEqual([]);
    expect(result.made.map((m) => m.root_server_id)).toContain(host.id);
    const copy = await copyOf(host.id);
    expect(copy).toMatchObject({ state: 'ready', content_version: 1, owner_role: HOST_ROLE, postgresql_server_id: f.fx.serverId });
    expect(copy.database_name).toMatch(new RegExp(`^svc_standby_[0-9a-f]{8}_t${f.fx.templateId}_h${host.id}_v1$`));
    const [db] = await adminQuery<{ owner: string; acl: string | null; oid: string }>(
      'SELECT pg_get_userbyid(datdba) AS owner, datacl::text AS acl, oid::text AS oid FROM pg_database WHERE datname = $1',
      [copy.database_name],
    );
    expect(db!.owner).toBe(HOST_ROLE);
    expect(db!.oid).toBe(String(copy.oid));
    expect(db!.acl).not.toMatch(/(^|[{,])=/); // PUBLIC has no CONNECT
    // Every table of the copy is the host role's, as in a template that host built.
    const { default: pg } = await import('pg');
    const client = new pg.Client({ host: '127.0.0.1', port: 5432, user: 'postgres', database: copy.database_name });
    await client.connect();
    const owners = (await client.query("SELECT DISTINCT tableowner FROM pg_tables WHERE schemaname = 'public'")).rows.map(
      (r) => r.tableowner,
    );
    await client.end();
    expect(owners).toEqual([HOST_ROLE]);
    const files = path.join(host.odoo_base_path!, 'data', 'filestore', copy.database_name);
    expect(await readFile(path.join(files, 'ab/logo'))).toEqual(LOGO);
    expect(await readFile(path.join(files, 'cd/readme'), 'utf8')).toBe('template file');

    const ready = await readyTemplateHosts(t.ctx.db, f.fx.templateId);
    expect(ready.map((h) => h.root_server_id)).toEqual([f.rootServerId, host.id]);
    const there = ready[1]!;
    expect(there).toMatchObject({ copy_id: copy.id, template_db_name: copy.database_name, postgresql_server_id: f.fx.serverId });
    expect(there.template).toMatchObject({
      template_db_name: copy.database_name,
      owner_role: HOST_ROLE,
      root_server_id: host.id,
      template_oid: copy.oid,
    });

    const view = await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/database-templates/${f.fx.templateId}/copies` });
    expect(view.statusCode, view.body).toBe(200);
    expect(view.json().items.find((c: { root_server_id: number }) => c.root_server_id === host.id)).toMatchObject({
      state: 'ready',
      in_step: true,
    });

    // In step: nothing to do.
    const again = await copies().sync(f.fx.templateId, audit);
    expect(again.in_step).toContain(host.id);
    expect(again.made).toEqual([]);
  });

  it('a copy of an older version of the template is not used, and the next sync makes it again (the old one removed)', async () => {
    const old = await copyOf(host.id);
    // What a successful update does to the template.
    await t.ctx.db.$executeRaw`UPDATE database_templates SET content_version = content_version + 1 WHERE id = ${f.fx.templateId}`;
    expect((await readyTemplateHosts(t.ctx.db, f.fx.templateId)).map((h) => h.root_server_id)).toEqual([f.rootServerId]);
    expect(await createTemplateCopies(t.ctx).needingSync(60_000)).toContain(f.fx.templateId);

    const result = await createTemplateCopies(t.ctx).sync(f.fx.templateId, audit);
    expect(result.made.map((m) => m.root_server_id)).toContain(host.id);
    const now = await copyOf(host.id);
    expect(now).toMatchObject({ state: 'ready', content_version: 2 });
    expect(now.database_name).toMatch(/_v2$/);
    expect(await dbExists(old.database_name)).toBe(false);
    expect(existsSync(path.join(host.odoo_base_path!, 'data', 'filestore', old.database_name))).toBe(false);
    expect((await readyTemplateHosts(t.ctx.db, f.fx.templateId)).map((h) => h.root_server_id)).toEqual([f.rootServerId, host.id]);
  });

  it('a copy that cannot be made is failed with why, leaves nothing behind, and is not used; the other hosts keep theirs', async () => {
    const broken = await poolHost('svc_t_no_such_role');
    const result = await createTemplateCopies(t.ctx).sync(f.fx.templateId, audit);
    expect(result.in_step).toContain(host.id);
    expect(result.failed).toEqual([
      { root_server_id: broken.id, error: expect.stringContaining('role svc_t_no_such_role does not exist') },
    ]);
    const copy = await copyOf(broken.id);
    expect(copy.state).toBe('failed');
    expect(await dbExists(copy.database_name)).toBe(false);
    expect((await readyTemplateHosts(t.ctx.db, f.fx.templateId)).map((h) => h.root_server_id)).not.toContain(broken.id);
    // Tried again by the sweep only after the retry period.
    expect(await createTemplateCopies(t.ctx).needingSync(60 * 60_000)).not.toContain(f.fx.templateId);
    expect(await createTemplateCopies(t.ctx).needingSync(0)).toContain(f.fx.templateId);
    await t.ctx.db.rootServer.update({ where: { id: broken.id }, data: { odoo_state: 'failed' } });
  });

  it('a host that left the pool (another Odoo version) loses its copy', async () => {
    const copy = await copyOf(host.id);
    const other = await t.ctx.db.odooVersion.create({
      data: { name: `19.0-pools-${Date.now()}`, source_url: 'https://example.com/odoo.tar.gz', source_sha256: 'b'.repeat(64) },
    });
    await t.ctx.db.rootServer.update({ where: { id: host.id }, data: { odoo_version_id: other.id } });
    const result = await createTemplateCopies(t.ctx).sync(f.fx.templateId, audit);
    expect(result.removed).toContainEqual({ root_server_id: host.id, database_name: copy.database_name, reason: 'the host left the pool' });
    expect(await dbExists(copy.database_name)).toBe(false);
    expect(await t.ctx.db.databaseTemplateCopy.count({ where: { root_server_id: host.id } })).toBe(0);
  });
});

describe('drain', () => {
  // Tenants deployed by the deployment job while the fixture's host is a plain host (no Odoo to sign in through).
  const subs: { id: number }[] = [];
  beforeAll(async () => {
    await t.ctx.db.rootServer.update({ where: { id: f.rootServerId }, data: { odoo_state: 'not_installed' } });
    for (let i = 0; i < 4; i++) subs.push(await f.fx.deployed());
    await t.ctx.db.rootServer.update({ where: { id: f.rootServerId }, data: { odoo_state: 'running' } });
  }, 120_000);

  it('what it moves next: running and idle tenants, not those moving or whose move failed, at most the free slots', () => {
    const look = {
      left: [
        { id: 1, state: 'running', operation: null },
        { id: 2, state: 'running', operation: 'move' },
        { id: 3, state: 'suspended', operation: null },
        { id: 4, state: 'running', operation: null },
        { id: 5, state: 'running', operation: null },
        { id: 6, state: 'running', operation: null },
      ],
      moving: [2],
      moved: 7,
      failed: [4],
    };
    expect(nextToMove(look, [], 2)).toEqual([1, 5]);
    expect(nextToMove(look, [5], 3)).toEqual([1, 6]);
    expect(nextToMove(look, [], 0)).toEqual([]);
  });

  it('reads its state from the host: tenants left, moves under way, done and failed since it began', async () => {
    const host = await poolHost();
    const [sub, gone] = [subs[0]!, subs[1]!];
    await t.ctx.db.subscription.update({ where: { id: sub.id }, data: { root_server_id: host.id } });
    const began = new Date(Date.now() - 1000);
    const row = (state: 'moving' | 'done' | 'failed', subscription_id: number, created_at = new Date()) =>
      t.ctx.db.subscriptionMove.create({
        data: {
          subscription_id,
          state,
          database_name: 'x',
          from_postgresql_server_id: f.fx.serverId,
          from_root_server_id: host.id,
          to_postgresql_server_id: f.fx.serverId,
          to_root_server_id: f.rootServerId,
          created_at,
        },
      });
    await row('done', gone.id);
    await row('failed', sub.id);
    await row('done', gone.id, new Date(began.getTime() - 60_000)); // before the drain: not its
    let look = await lookAtDrain(t.ctx.db, { root_server_id: host.id, created_at: began });
    expect(look).toEqual({ left: [{ id: sub.id, state: 'running', operation: null }], moving: [], moved: 1, failed: [sub.id] });
    await row('moving', sub.id);
    look = await lookAtDrain(t.ctx.db, { root_server_id: host.id, created_at: began });
    expect(look.moving).toEqual([sub.id]);
    expect(look.failed).toEqual([]);
  });

  it('cordons the host; a second drain answers the one under way (waiting on its move); it ends naming what stayed and why', async () => {
    // The pool's other hosts are cordoned: nowhere to move to.
    const host = await poolHost();
    const [moving, idle, suspended] = [subs[1]!, subs[2]!, subs[3]!];
    const ids = [moving.id, idle.id, suspended.id];
    await t.ctx.db.subscription.updateMany({ where: { id: { in: ids } }, data: { root_server_id: host.id } });
    await t.ctx.db.subscription.update({ where: { id: suspended.id }, data: { state: 'suspended' } });
    await t.ctx.db.rootServer.updateMany({
      where: { odoo_version_id: version.id, id: { not: host.id } },
      data: { cordoned_at: new Date(), cordon_reason: 'test' },
    });
    // A move of one tenant under way (an operator's, say): the drain waits for it rather than start another.
    await t.ctx.db.subscription.update({ where: { id: moving.id }, data: { operation: 'move' } });
    const move = await t.ctx.db.subscriptionMove.create({
      data: {
        subscription_id: moving.id,
        database_name: 'x',
        from_postgresql_server_id: f.fx.serverId,
        from_root_server_id: host.id,
        to_postgresql_server_id: f.fx.serverId,
        to_root_server_id: f.rootServerId,
        created_at: new Date(Date.now() + 60_000), // counts as the drain's
      },
    });
    const drain = (payload?: object) =>
      request(t.app, t.as.operator, {
        method: 'POST',
        url: `/api/v1/root-servers/${host.id}/actions/drain`,
        ...(payload ? { payload } : {}),
      });

    const first = await drain({ batch_size: 2 });
    expect(first.statusCode, first.body).toBe(202);
    const cordoned = await t.ctx.db.rootServer.findUniqueOrThrow({ where: { id: host.id } });
    expect(cordoned.cordoned_at).not.toBeNull();
    expect(cordoned.cordon_reason).toBe('drain');
    const second = await drain();
    expect(second.statusCode, second.body).toBe(202);
    const listed = async () =>
      (await request(t.app, t.as.operator, { method: 'GET', url: `/api/v1/root-servers/${host.id}/drains` })).json().items;
    expect(await listed()).toMatchObject([{ state: 'draining', batch_size: 2 }]);

    // The move fails: the drain does not try it again, and ends.
    await t.ctx.db.subscriptionMove.update({ where: { id: move.id }, data: { state: 'failed' } });
    await t.ctx.db.subscription.update({ where: { id: moving.id }, data: { operation: null } });
    const job = await waitForJob(t.app, t.as.user, second.json().job_id, 60_000);
    expect(job.state, job.error).toBe('completed');
    const items = await listed();
    expect(items).toHaveLength(1);
    expect(items[0]).toMatchObject({ state: 'failed', batch_size: 2, moved: 0, failed_subscription_ids: [moving.id] });
    expect(items[0].left_over).toContain(`subscription ${moving.id}: its move failed (see its moves)`);
    expect(items[0].left_over).toContain(`subscription ${idle.id}: No host fits subscription ${idle.id}`);
    expect(items[0].left_over).toContain(`subscription ${suspended.id}: it is suspended: only a running instance is moved`);
    // No move was started by the drain: the tenants are where they were.
    expect(await t.ctx.db.subscriptionMove.count({ where: { from_root_server_id: host.id } })).toBe(1);
  });

  it('stop_drain: no further move starts, the drain is stopped, the host stays cordoned; 409 when none runs', async () => {
    const host = await poolHost();
    const sub = subs[0]!;
    await t.ctx.db.subscription.update({ where: { id: sub.id }, data: { root_server_id: host.id, operation: 'move' } });
    await t.ctx.db.subscriptionMove.create({
      data: {
        subscription_id: sub.id,
        database_name: 'x',
        from_postgresql_server_id: f.fx.serverId,
        from_root_server_id: host.id,
        to_postgresql_server_id: f.fx.serverId,
        to_root_server_id: f.rootServerId,
        created_at: new Date(Date.now() + 60_000),
      },
    });
    const started = await request(t.app, t.as.operator, { method: 'POST', url: `/api/v1/root-servers/${host.id}/actions/drain` });
    expect(started.statusCode, started.body).toBe(202);
    const stop = () => request(t.app, t.as.operator, { method: 'POST', url: `/api/v1/root-servers/${host.id}/actions/stop_drain` });
    const stopped = await stop();
    expect(stopped.statusCode, stopped.body).toBe(200);
    expect(stopped.json()).toMatchObject({ state: 'stopped', moved: 0 });
    const job = await waitForJob(t.app, t.as.user, started.json().job_id, 60_000);
    expect(job.state, job.error).toBe('completed');
    expect(job.result).toMatchObject({ state: 'stopped' });
    expect((await t.ctx.db.rootServer.findUniqueOrThrow({ where: { id: host.id } })).cordoned_at).not.toBeNull();
    expect((await stop()).statusCode).toBe(409);
  });

  it('a move to a host holds its room until it switches or fails: the next move of a batch finds the host full', async () => {
    const from = await poolHost();
    const target = await poolHost();
    await t.ctx.db.rootServer.update({ where: { id: target.id }, data: { capacity_tenants: 1, cordoned_at: null, cordon_reason: null } });
    const candidates = [{ root_server_id: target.id, postgresql_server_id: f.fx.serverId }];
    // Each as the drain places a tenant: the move it records is its reservation.
    const placeOne = (id: number) =>
      place(t.ctx.db, { candidates, what: `subscription ${id} (drain)`, exceptSubscription: id, reserve: async () => {} });
    const [first, second] = [subs[2]!, subs[3]!];
    expect((await placeOne(first.id)).candidate.root_server_id).toBe(target.id);
    const move = await t.ctx.db.subscriptionMove.create({
      data: {
        subscription_id: first.id,
        database_name: 'x',
        from_postgresql_server_id: f.fx.serverId,
        from_root_server_id: from.id,
        to_postgresql_server_id: f.fx.serverId,
        to_root_server_id: target.id,
      },
    });
    await expect(placeOne(second.id)).rejects.toThrow(/No host fits .*full: 1 tenant\(s\) of 1/);
    // Failed: its room is free again.
    await t.ctx.db.subscriptionMove.update({ where: { id: move.id }, data: { state: 'failed' } });
    expect((await placeOne(second.id)).candidate.root_server_id).toBe(target.id);
  });

  it('a host that runs no Odoo: 409', async () => {
    const {
      id: _i,
      uuid: _u,
      created_at: _c,
      updated_at: _a,
      ...like
    } = await t.ctx.db.rootServer.findUniqueOrThrow({ where: { id: f.rootServerId } });
    const bare = await t.ctx.db.rootServer.create({ data: { ...like, odoo_version_id: null, odoo_state: 'not_installed' } });
    const res = await request(t.app, t.as.operator, { method: 'POST', url: `/api/v1/root-servers/${bare.id}/actions/drain` });
    expect(res.statusCode, res.body).toBe(409);
  });

  it('a move refused with a conflict (here: no database template) is left over with why; the drain goes on and ends', async () => {
    const host = await poolHost();
    await poolHost(); // somewhere with room to move to
    const tenant = subs[0]!;
    const before = await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: tenant.id } });
    await t.ctx.db.subscription.update({
      where: { id: tenant.id },
      data: { root_server_id: host.id, database_template_id: null, operation: null, state: 'running' },
    });
    try {
      const res = await request(t.app, t.as.operator, { method: 'POST', url: `/api/v1/root-servers/${host.id}/actions/drain` });
      expect(res.statusCode, res.body).toBe(202);
      const job = await waitForJob(t.app, t.as.user, res.json().job_id, 60_000);
      expect(job.state, job.error).toBe('completed');
      const [drain] = (await request(t.app, t.as.operator, { method: 'GET', url: `/api/v1/root-servers/${host.id}/drains` })).json().items;
      expect(drain).toMatchObject({ state: 'failed', moved: 0 });
      expect(drain.left_over).toContain(`subscription ${tenant.id}: Subscription ${tenant.id} has no database template`);
    } finally {
      await t.ctx.db.subscription.update({
        where: { id: tenant.id },
        data: { root_server_id: before.root_server_id, database_template_id: before.database_template_id },
      });
    }
  });
});
