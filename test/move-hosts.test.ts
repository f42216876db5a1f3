// Moves on real parts without Odoo: the filestore passes between two host directories over a real
// sshd (the last pass also removes what the old filestore no longer has, and nothing outside it),
// the room check on a target PostgreSQL server whose data is on a full disk (a second cluster on a
// tmpfs), and the checks of a move between two Odoo hosts of one PostgreSQL server. The moves
// themselves run on the real Odoo: test-odoo/odoo-move.test.ts.
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sendFilestore } from '../src/moves/move-copy.js';
import { request } from './helpers/api.js';
import { act } from './helpers/lifecycle.js';
import { useOdooHost } from './helpers/odoo-host.js';
import { type LocalCluster, startLocalCluster } from './helpers/pg-cluster.js';
import { freePort } from './helpers/sshd.js';

const f = useOdooHost({ 'ab/logo': Buffer.alloc(40_000, 1) });
const { t } = f;
const dirs: string[] = [];
let version: { id: number };

beforeAll(async () => {
  version = await t.ctx.db.odooVersion.create({
    data: { name: `18.0-move-hosts-${Date.now()}`, source_url: 'https://example.com/odoo.tar.gz', source_sha256: 'a'.repeat(64) },
  });
});
afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

/** A base path of its own, with the filestores' directory. */
async function basePath() {
  const base = await mkdtemp(path.join(tmpdir(), 'svc-move-host-'));
  dirs.push(base);
  await mkdir(path.join(base, 'data', 'filestore'), { recursive: true });
  return base;
}

/** Another record of the fixture's sshd (commands as root) as an Odoo host running `version` on PostgreSQL server `pgId`. */
async function odooHost(pgId: number, base: string) {
  const {
    id: _id,
    uuid: _uuid,
    created_at: _c,
    updated_at: _u,
    ...like
  } = await t.ctx.db.rootServer.findUniqueOrThrow({ where: { id: f.rootServerId } });
  return t.ctx.db.rootServer.create({
    data: {
      ...like,
      name: `odoo host ${base}`,
      odoo_state: 'running',
      odoo_version_id: version.id,
      odoo_postgresql_server_id: pgId,
      odoo_db_user: 'svc_t_odoo_host',
      odoo_base_path: base,
      odoo_http_port: 18069,
    },
  });
}

/** A running subscription deployed by the deployment job, placed on an Odoo host (the fixture's directory) on the local server. */
async function onOdooHost() {
  const sub = await f.fx.deployed();
  const host = await odooHost(sub.postgresql_server_id as number, f.base);
  await t.ctx.db.subscription.update({ where: { id: sub.id }, data: { root_server_id: host.id } });
  return { sub, host };
}

describe('the filestore passes of a move', () => {
  it('the last pass removes from the new filestore what the old one no longer has, and nothing outside it', async () => {
    const from = await t.ctx.db.rootServer.findUniqueOrThrow({ where: { id: f.rootServerId } });
    const to = await odooHost(f.fx.serverId, await basePath());
    const name = `${t.ctx.dbName}_files`;
    const src = f.filestore(name);
    const dst = path.join(to.odoo_base_path!, 'data', 'filestore', name);
    const put = async (dir: string, file: string, content = file) => {
      await mkdir(path.dirname(path.join(dir, file)), { recursive: true });
      await writeFile(path.join(dir, file), content);
    };
    for (const file of ['ab/kept', 'ab/removed', 'cd/kept']) await put(src, file);
    const audit = { user_id: null, job_id: 'test' };

    await sendFilestore(t.ctx, from, to, name, audit);
    expect(existsSync(path.join(dst, 'ab/removed'))).toBe(true);
    // Odoo removes a file and adds one while the instance runs; something outside the filestore is linked from it.
    await rm(path.join(src, 'ab/removed'));
    await put(src, 'ef/added');
    const outside = await basePath();
    await put(outside, 'precious');
    await symlink(outside, path.join(dst, 'link'));

    const said = await sendFilestore(t.ctx, from, to, name, audit, { mirror: true });
    expect(said).toContain(`1 file(s) removed from ${dst}`);
    expect(existsSync(path.join(dst, 'ab/removed'))).toBe(false);
    for (const file of ['ab/kept', 'cd/kept', 'ef/added']) expect(await readFile(path.join(dst, file), 'utf8')).toBe(file);
    expect(await readFile(path.join(outside, 'precious'), 'utf8')).toBe('precious');
    expect(existsSync(path.join(dst, 'link'))).toBe(true);
  });
});

describe('the room check of a move', () => {
  let cluster: LocalCluster;
  beforeAll(async () => {
    cluster = startLocalCluster(await freePort(), { tmpfsMb: 96 });
  }, 120_000);
  afterAll(() => cluster?.stop());

  it("a target PostgreSQL server whose data disk is full: 409 naming it and the database's size; nothing recorded", async () => {
    const { sub } = await onOdooHost();
    const pg = await request(t.app, t.as.operator, {
      method: 'POST',
      url: '/api/v1/postgresql-servers',
      payload: { name: 'full disk', ip: '127.0.0.1', port: cluster.port, username: 'postgres' },
    });
    expect(pg.statusCode, pg.body).toBe(201);
    const target = await odooHost(pg.json().id, await basePath());
    cluster.fillDisk(2 * 1024 * 1024);

    const res = await act(t, sub.id, 'move', { root_server_id: target.id });
    expect(res.statusCode, res.body).toBe(409);
    expect(res.json().error.message).toMatch(
      new RegExp(
        `^PostgreSQL server ${pg.json().id} has no room: 0\\.00 GB free where it keeps its data, the database needs \\d+\\.\\d\\d GB`,
      ),
    );
    expect(await t.ctx.db.subscriptionMove.count({ where: { subscription_id: sub.id } })).toBe(0);
  });
});

describe('a move between two Odoo hosts of one PostgreSQL server', () => {
  it('a database without a role of its own: 409 saying so; nothing recorded', async () => {
    const { sub } = await onOdooHost();
    const other = await odooHost(sub.postgresql_server_id as number, await basePath());
    const res = await act(t, sub.id, 'move', { root_server_id: other.id });
    expect(res.statusCode, res.body).toBe(409);
    expect(res.json().error.message).toContain(`Subscription ${sub.id}'s database has no role of its own`);
    expect(await t.ctx.db.subscriptionMove.count({ where: { subscription_id: sub.id } })).toBe(0);
  });

  it('to a host that keeps the old copy of its last move: 409 naming move_back; nothing recorded', async () => {
    const { sub, host } = await onOdooHost();
    const other = await odooHost(sub.postgresql_server_id as number, await basePath());
    const last = await t.ctx.db.subscriptionMove.create({
      data: {
        subscription_id: sub.id,
        database_name: sub.database_name,
        state: 'done',
        from_postgresql_server_id: sub.postgresql_server_id as number,
        from_root_server_id: other.id,
        to_postgresql_server_id: sub.postgresql_server_id as number,
        to_root_server_id: host.id,
        keep_until: new Date(Date.now() + 86_400_000),
      },
    });
    await t.ctx.db.subscription.update({
      where: { id: sub.id },
      data: { database_role: 'svc_db_1', database_role_password: await t.ctx.secretBox.encrypt('x') },
    });
    const res = await act(t, sub.id, 'move', { root_server_id: other.id });
    expect(res.statusCode, res.body).toBe(409);
    expect(res.json().error.message).toContain(`Root server ${other.id} keeps the old copy of move ${last.id}`);
    expect(await t.ctx.db.subscriptionMove.count({ where: { subscription_id: sub.id } })).toBe(1);
  });
});
