// move and move_back on the real Odoo (18.0 and 19.0), between two PostgreSQL clusters and two Odoo
// host directories of this machine: refusals (409) before the subscription runs, to where it is, to
// a cluster where its database name is taken and to a host without room (a 1 MB tmpfs); a move the
// tenant's own SQL makes fail during the copy leaves the instance where it was, open and answering;
// a move keeps every record and file written before it, the customer signs in at the new place
// with the same password, the old copy stays closed until its keep period ends and is dropped then;
// move_back brings it home with what was written after the move. A file Odoo removed after the first
// filestore pass is removed from the new filestore too (the move held at its freeze by a lock on the
// database's row, the file removed meanwhile). Between two hosts of one PostgreSQL server (A and C)
// the database is not copied: a move that fails in the freeze leaves the instance answering on A, a
// move and its move_back keep the same database (its oid), and the keep periods that end drop only
// the old host's filestore, never the database.
// Odoo's ports: 19100 (host A), 19150 (host B) and 19125 (host C) for the first source, 19200/19250/19225 for the second.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, rmdirSync, rmSync, statSync } from 'node:fs';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { request, waitForJob } from '../test/helpers/api.js';
import { credentialsIn } from '../test/helpers/customer-credentials.js';
import { queryIn } from '../test/helpers/odoo-template.js';
import { adminQuery, databaseUrl } from '../test/helpers/pg.js';
import { type LocalCluster, startLocalCluster } from '../test/helpers/pg-cluster.js';
import { textOf, useSmtpServer } from '../test/helpers/smtp.js';
import { freePort } from '../test/helpers/sshd.js';
import { jsonRpc, odooSources, useOdooFixture, rpcResult } from './odoo-fixture.js';
import { newOdooVersion } from './odoo-host.js';

const sources = odooSources();
const smtp = useSmtpServer();
const f = useOdooFixture({
  get SMTP_URL() {
    return smtp.url;
  },
  SUBSCRIPTION_URL: 'https://{database_name}.odoo.test',
} as Record<string, string>);

let cluster: LocalCluster;
let pgB: number;
beforeAll(async () => {
  cluster = startLocalCluster(await freePort());
  const res = await request(f.t.app, f.t.as.operator, {
    method: 'POST',
    url: '/api/v1/postgresql-servers',
    payload: { name: 'second cluster', ip: '127.0.0.1', port: cluster.port, username: 'postgres' },
  });
  expect(res.statusCode, res.body).toBe(201);
  pgB = res.json().id;
}, 120_000);
afterAll(() => cluster?.stop());

/** Another record of the machine's PostgreSQL server (as the fixture's). */
async function localServerRecord(name: string): Promise<number> {
  const res = await request(f.t.app, f.t.as.operator, {
    method: 'POST',
    url: '/api/v1/postgresql-servers',
    payload: { name, ip: '127.0.0.1', port: 5432, username: 'postgres' },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().id;
}

const ports = (i: number) => ({ portA: 19100 + 100 * i, portB: 19150 + 100 * i, portC: 19125 + 100 * i });
describe.each(sources.map((s, i) => ({ ...s, ...ports(i), index: i })))('move on Odoo $name', (src) => {
  test('refusals, a failed move that changes nothing, a move and a move back that keep every record and file', async () => {
    const version = await newOdooVersion(f, src, 'move');
    const setup = async (pgServer: number, port: number, base?: string) => {
      const host = await f.newHost();
      const res = await f.runJob(host, 'setup_odoo', {
        odoo_version_id: version.id,
        postgresql_server_id: pgServer,
        http_port: port,
        workers: 0,
        max_cron_threads: 0,
        ...(base ? { base_path: base } : {}),
      });
      expect(res.state, JSON.stringify(res)).toBe('completed');
      return host;
    };
    // Each version's hosts A and C on the machine's PostgreSQL under a record of their own: setup_odoo's
    // sizing counts the hosts of one record at their worst (pools full, an update process each), and
    // four would not fit in Debian's 100 connections. They are never busy at once here.
    const pgA = src.index === 0 ? f.pgServerId : await localServerRecord(`local for ${src.name}`);
    const baseB = `${f.base}/host-b-${src.series}`;
    const hostA = await setup(pgA, src.portA);
    const hostB = await setup(pgB, src.portB, baseB);

    const templateDb = `svc_odoo_m_tpl${src.series}_${Date.now().toString(36)}`;
    const template = await request(f.t.app, f.t.as.operator, {
      method: 'POST',
      url: '/api/v1/database-templates',
      payload: { name: `Odoo ${src.name} move`, postgresql_server_id: pgA, template_db_name: templateDb, root_server_id: hostA },
    });
    expect(template.statusCode, template.body).toBe(201);
    expect((await f.runJob(template.json().id, 'build', { modules: ['base'] }, 'database-templates')).state).toBe('completed');

    const database = `svc_odoo_m_c${src.series}_${Date.now().toString(36)}`;
    const email = `move-${src.series}-${Date.now()}@example.com`;
    const partner = await request(f.t.app, f.t.as.operator, {
      method: 'POST',
      url: '/api/v1/partners',
      payload: { name: 'Jane', email },
    });
    const created = await request(f.t.app, f.t.as.operator, {
      method: 'POST',
      url: '/api/v1/subscriptions',
      payload: { name: 'Paid', partner_id: partner.json().id, database_template_id: template.json().id, database_name: database },
    });
    expect(created.statusCode, created.body).toBe(201);
    const id = created.json().id as number;
    const act = (name: string, payload?: object) =>
      request(f.t.app, f.t.as.operator, { method: 'POST', url: `/api/v1/subscriptions/${id}/actions/${name}`, payload });
    const run = async (name: string, payload?: object) => {
      const res = await act(name, payload);
      expect(res.statusCode, res.body).toBe(202);
      return waitForJob(f.t.app, f.t.as.operator, res.json().job_id, 10 * 60_000);
    };

    expect((await act('confirm')).statusCode).toBe(200);
    const early = await act('move', { root_server_id: hostB });
    expect(early.statusCode, early.body).toBe(409);
    expect(early.body).toContain('only the instance of a running subscription is moved');
    expect((await run('deploy')).state).toBe('completed');
    const { login, password } = credentialsIn(textOf(await smtp.waitFor(email)));

    // Refusals: where it already is, and a cluster where its name is taken.
    const same = await act('move', { root_server_id: hostA });
    expect(same.statusCode, same.body).toBe(409);
    expect(same.body).toContain(`already on root server ${hostA}`);
    await cluster.query('postgres', `CREATE DATABASE "${database}"`);
    const taken = await act('move', { root_server_id: hostB });
    expect(taken.statusCode, taken.body).toBe(409);
    expect(taken.body).toContain(`already has a database named ${database}`);
    await cluster.query('postgres', `DROP DATABASE "${database}"`);
    // No room: a host like B whose data directory is a 1 MB file system.
    const small = `${f.base}/small-${src.series}`;
    mkdirSync(`${small}/data`, { recursive: true });
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', `${small}/data`]);
    try {
      // Full: no filestore fits (the database goes to the second cluster's disk, measured apart).
      execFileSync('sh', ['-c', `dd if=/dev/zero of=${small}/data/fill bs=4k 2>/dev/null; true`]);
      const {
        id: _id,
        uuid: _uuid,
        created_at: _c,
        updated_at: _u,
        ...likeB
      } = await f.t.ctx.db.rootServer.findUniqueOrThrow({
        where: { id: hostB },
      });
      const full = await f.t.ctx.db.rootServer.create({ data: { ...likeB, name: 'full', odoo_base_path: small } });
      const refused = await act('move', { root_server_id: full.id });
      expect(refused.statusCode, refused.body).toBe(409);
      expect(refused.json().error.message).toMatch(new RegExp(`^Root server ${full.id} has no room: 0\\.00 GB free in ${small}/data`));
      await f.t.ctx.db.rootServer.delete({ where: { id: full.id } });
    } finally {
      execFileSync('umount', [`${small}/data`]);
    }
    const noHost = await act('move', { postgresql_server_id: pgA });
    expect(noHost.statusCode, noHost.body).toBe(409);

    // Records and a file before the move.
    const rpc = (port: number, db: string, uid: number, model: string, method: string, args: unknown[], kw: object = {}) =>
      jsonRpc(port, 'object', 'execute_kw', [db, uid, password, model, method, args, kw]).then((r) => rpcResult(r.body));
    const uid = rpcResult((await jsonRpc(src.portA, 'common', 'authenticate', [database, login, password, {}])).body) as number;
    await rpc(src.portA, database, uid, 'res.partner', 'create', [{ name: 'Before the move' }]);
    const fileText = `move ${Date.now()}`;
    await rpc(src.portA, database, uid, 'ir.attachment', 'create', [
      { name: 'probe.txt', datas: Buffer.from(fileText).toString('base64') },
    ]);
    const [stored] = await queryIn<{ store_fname: string }>(database, "SELECT store_fname FROM ir_attachment WHERE name = 'probe.txt'");

    // The tenant's own SQL fails the copy on the other cluster (its CHECK runs there, as the copy's
    // own role): the move fails before the switch and the instance is where it was, open and answering.
    const [{ owner } = { owner: '' }] = await adminQuery<{ owner: string }>(
      'SELECT pg_get_userbyid(datdba) AS owner FROM pg_database WHERE datname = $1',
      [database],
    );
    await queryIn(
      database,
      `SET ROLE "${owner}";
       CREATE FUNCTION public.svc_here(i int) RETURNS bool LANGUAGE sql AS $fn$ SELECT inet_server_port() = 5432 $fn$;
       CREATE TABLE public.svc_pinned (id int CHECK (public.svc_here(id)));
       INSERT INTO public.svc_pinned VALUES (1);
       RESET ROLE`,
    );
    const failed = await run('move', { root_server_id: hostB });
    expect(failed.state).toBe('failed');
    expect(failed.error).toContain('svc_pinned');
    const stayed = (await request(f.t.app, f.t.as.operator, { method: 'GET', url: `/api/v1/subscriptions/${id}` })).json();
    expect(stayed).toMatchObject({ state: 'running', postgresql_server_id: pgA, root_server_id: hostA });
    expect(await cluster.query('postgres', 'SELECT 1 FROM pg_database WHERE datname = $1', [database])).toEqual([]);
    expect(() => statSync(`${baseB}/data/filestore/${database}`)).toThrow();
    expect(await rpc(src.portA, database, uid, 'res.partner', 'search_count', [[['name', '=', 'Before the move']]])).toBe(1);
    await queryIn(database, 'DROP TABLE public.svc_pinned; DROP FUNCTION public.svc_here(int)');

    // The move, held at its freeze (after the first filestore pass) by a lock on the database's row
    // in pg_database, while Odoo removes a file as its garbage collection would.
    await rpc(src.portA, database, uid, 'ir.attachment', 'create', [{ name: 'gone.txt', datas: Buffer.from('gone').toString('base64') }]);
    const [gone] = await queryIn<{ store_fname: string }>(database, "SELECT store_fname FROM ir_attachment WHERE name = 'gone.txt'");
    const baseA = (await f.t.ctx.db.rootServer.findUniqueOrThrow({ where: { id: hostA } })).odoo_base_path ?? f.base;
    const holder = new pg.Client({ connectionString: databaseUrl('postgres') });
    await holder.connect();
    let moved: Awaited<ReturnType<typeof run>>;
    try {
      await holder.query(`BEGIN; ALTER DATABASE "${database}" WITH CONNECTION LIMIT -1`);
      const started = await act('move', { root_server_id: hostB });
      expect(started.statusCode, started.body).toBe(202);
      await expect
        .poll(
          async () =>
            (
              await adminQuery(
                "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'ALTER DATABASE%' AND query LIKE $1",
                [`%"${database}"%CONNECTION LIMIT 0%`],
              )
            ).length,
          { timeout: 5 * 60_000, interval: 200 },
        )
        .toBe(1);
      await queryIn(database, "DELETE FROM ir_attachment WHERE name = 'gone.txt'");
      rmSync(`${baseA}/data/filestore/${database}/${gone!.store_fname}`);
      await holder.query('ROLLBACK');
      moved = await waitForJob(f.t.app, f.t.as.operator, started.json().job_id, 10 * 60_000);
    } finally {
      await holder.end();
    }
    expect(moved.state, JSON.stringify(moved)).toBe('completed');
    expect(existsSync(`${baseB}/data/filestore/${database}/${gone!.store_fname}`)).toBe(false);
    const r = moved.result as { freeze_seconds: number; postgresql_server_id: number; root_server_id: number };
    expect(r).toMatchObject({ postgresql_server_id: pgB, root_server_id: hostB });
    expect(r.freeze_seconds).toBeGreaterThan(0);
    const after = (await request(f.t.app, f.t.as.operator, { method: 'GET', url: `/api/v1/subscriptions/${id}` })).json();
    expect(after).toMatchObject({ state: 'running', postgresql_server_id: pgB, root_server_id: hostB });
    // The copy is a role of its own there, not host B's.
    const movedRole = (await f.t.ctx.db.subscription.findUniqueOrThrow({ where: { id } })).database_role;
    expect(movedRole).toMatch(/^svc_db_\d+$/);
    expect(
      await cluster.query('postgres', 'SELECT pg_get_userbyid(datdba) AS owner FROM pg_database WHERE datname = $1', [database]),
    ).toEqual([{ owner: movedRole }]);
    expect(await rpc(src.portB, database, uid, 'res.partner', 'search_count', [[['name', '=', 'Before the move']]])).toBe(1);
    expect(rpcResult((await jsonRpc(src.portB, 'common', 'authenticate', [database, login, password, {}])).body)).toBe(uid);
    const [att] = await rpc(src.portB, database, uid, 'ir.attachment', 'search_read', [[['name', '=', 'probe.txt']]], {
      fields: ['datas'],
    });
    expect(Buffer.from(att.datas, 'base64').toString()).toBe(fileText);
    expect(statSync(`${baseB}/data/filestore/${database}/${stored!.store_fname}`).isFile()).toBe(true);
    const [old] = await adminQuery<{ datallowconn: boolean }>('SELECT datallowconn FROM pg_database WHERE datname = $1', [database]);
    expect(old).toEqual({ datallowconn: false }); // kept, closed
    const moves = (await request(f.t.app, f.t.as.operator, { method: 'GET', url: `/api/v1/subscriptions/${id}/moves` })).json().items;
    expect(moves[0]).toMatchObject({ state: 'done', from_root_server_id: hostA, to_root_server_id: hostB, old_dropped_at: null });
    expect(moves[1]).toMatchObject({ state: 'failed', step: 'freeze' });
    const keep = (Date.parse(moves[0].keep_until) - Date.parse(moves[0].switched_at)) / 86_400_000;
    expect(keep).toBeCloseTo(3, 1);

    // Written at the new place, then back home with it: the stale old copy is replaced.
    await rpc(src.portB, database, uid, 'res.partner', 'create', [{ name: 'After the move' }]);
    const back = await run('move_back');
    expect(back.state, JSON.stringify(back)).toBe('completed');
    expect(
      await rpc(src.portA, database, uid, 'res.partner', 'search_count', [[['name', 'in', ['Before the move', 'After the move']]]]),
    ).toBe(2);
    const home = (await request(f.t.app, f.t.as.operator, { method: 'GET', url: `/api/v1/subscriptions/${id}` })).json();
    expect(home).toMatchObject({ postgresql_server_id: pgA, root_server_id: hostA });

    // The keep period of the copy left on the second cluster ends: dropped, with its filestore.
    const [backMove] = (await request(f.t.app, f.t.as.operator, { method: 'GET', url: `/api/v1/subscriptions/${id}/moves` })).json().items;
    await f.t.ctx.db.subscriptionMove.update({ where: { id: backMove.id }, data: { keep_until: new Date(Date.now() - 1000) } });
    const { moveJobs } = await import('../src/moves/move-job-specs.js');
    const dropId = await f.t.ctx.queues.enqueue(moveJobs.moves_sweep, { user_id: null });
    expect((await waitForJob(f.t.app, f.t.as.operator, dropId, 5 * 60_000)).state).toBe('completed');
    expect(await cluster.query('postgres', 'SELECT 1 FROM pg_database WHERE datname = $1', [database])).toEqual([]);
    expect(await cluster.query('postgres', 'SELECT 1 FROM pg_roles WHERE rolname = $1', [movedRole])).toEqual([]);
    expect(() => statSync(`${baseB}/data/filestore/${database}`)).toThrow();
    expect(await rpc(src.portA, database, uid, 'res.partner', 'search_count', [[['name', '=', 'After the move']]])).toBe(1);
    const noneLeft = await act('move_back');
    expect(noneLeft.statusCode, noneLeft.body).toBe(409);

    // Host C reads the databases of A's PostgreSQL server: the database is not copied, only served
    // by C as its own role. A move that fails in the freeze (C cannot take the credentials file)
    // leaves it answering on A: A's credentials file is written back, the database opened again.
    const baseC = `${f.base}/host-c-${src.series}`;
    const hostC = await setup(pgA, src.portC, baseC);
    const oidOf = async () =>
      (await adminQuery<{ oid: string }>('SELECT oid::text FROM pg_database WHERE datname = $1', [database]))[0]?.oid;
    const oid = await oidOf();
    const blocker = `${baseC}/config/tenant-roles/${database}.svc-new`;
    mkdirSync(blocker, { recursive: true });
    const refused = await run('move', { root_server_id: hostC });
    expect(refused.state).toBe('failed');
    rmdirSync(blocker);
    expect(await oidOf()).toBe(oid);
    expect(await adminQuery('SELECT datallowconn, datconnlimit FROM pg_database WHERE datname = $1', [database])).toEqual([
      { datallowconn: true, datconnlimit: -1 },
    ]);
    expect(await rpc(src.portA, database, uid, 'res.partner', 'search_count', [[['name', '=', 'After the move']]])).toBe(1);
    expect(existsSync(`${baseC}/data/filestore/${database}`)).toBe(false);

    const toC = await run('move', { root_server_id: hostC });
    expect(toC.state, JSON.stringify(toC)).toBe('completed');
    expect(toC.result).toMatchObject({ postgresql_server_id: pgA, root_server_id: hostC });
    expect(await oidOf()).toBe(oid); // the same database
    expect(rpcResult((await jsonRpc(src.portC, 'common', 'authenticate', [database, login, password, {}])).body)).toBe(uid);
    await rpc(src.portC, database, uid, 'res.partner', 'create', [{ name: 'On host C' }]);
    expect(statSync(`${baseC}/data/filestore/${database}/${stored!.store_fname}`).isFile()).toBe(true);
    expect(existsSync(`${baseA}/config/tenant-roles/${database}`)).toBe(false); // A no longer serves it

    // Home again with what was written on C; C's filestore, kept, is dropped when its keep period ends: the database stays.
    const backFromC = await run('move_back');
    expect(backFromC.state, JSON.stringify(backFromC)).toBe('completed');
    expect(await oidOf()).toBe(oid);
    expect(await rpc(src.portA, database, uid, 'res.partner', 'search_count', [[['name', '=', 'On host C']]])).toBe(1);
    const [keptOnC] = (await request(f.t.app, f.t.as.operator, { method: 'GET', url: `/api/v1/subscriptions/${id}/moves` })).json().items;
    await f.t.ctx.db.subscriptionMove.update({ where: { id: keptOnC.id }, data: { keep_until: new Date(Date.now() - 1000) } });
    const sweep = await f.t.ctx.queues.enqueue(moveJobs.moves_sweep, { user_id: null });
    expect((await waitForJob(f.t.app, f.t.as.operator, sweep, 5 * 60_000)).state).toBe('completed');
    expect(existsSync(`${baseC}/data/filestore/${database}`)).toBe(false);
    expect(await oidOf()).toBe(oid);
    expect(await rpc(src.portA, database, uid, 'res.partner', 'search_count', [[['name', '=', 'On host C']]])).toBe(1);
  });
});
