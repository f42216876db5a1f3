// A subscription acts only on the database its deployment created, on real PostgreSQL clusters:
// the machine's own and a second one started here (an operator's "own" cluster). An operator who
// names a victim database (the service's own, another customer's, one made again under a name)
// through a server record, a template or a database name reaches nothing.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request, waitForJob } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';
import { act, canConnect, databaseRow, useLifecycle } from './helpers/lifecycle.js';
import { adminQuery, dropDatabase } from './helpers/pg.js';
import { startTlsCluster, type TlsCluster } from './helpers/pg-tls-cluster.js';
import { fillOdooTemplate } from './helpers/odoo-template.js';

const t = useTestApp({ workers: true, env: { BACKUP_POLL_MS: '20' } });
const fx = useLifecycle(t, { backups: 'real' });
let other: TlsCluster;

beforeAll(async () => {
  other = await startTlsCluster();
});
afterAll(() => other?.stop());

const post = (url: string, payload: object, caller = t.as.operator) => request(t.app, caller, { method: 'POST', url, payload });
const patch = (url: string, payload: object) => request(t.app, t.as.operator, { method: 'PATCH', url, payload });

async function jobOf(res: { statusCode: number; body: string; json(): { job_id: string } }) {
  expect(res.statusCode, res.body).toBe(202);
  return waitForJob(t.app, t.as.user, res.json().job_id, 30_000);
}

/** A subscription named `databaseName`, deployed from `templateId`. */
async function deployFrom(templateId: number, databaseName: string) {
  const partner = await fx.partner();
  const created = await post('/api/v1/subscriptions', {
    name: `On ${databaseName}`,
    partner_id: partner.id,
    database_template_id: templateId,
    database_name: databaseName,
  });
  expect(created.statusCode, created.body).toBe(201);
  const id = created.json().id as number;
  expect((await act(t, id, 'confirm')).statusCode).toBe(200);
  return { id, job: await jobOf(await act(t, id, 'deploy')) };
}

/** Backups svc's backup server was asked for of `dbName` (it records each request as it takes it). */
const backupsOf = async (dbName: string) => (await fx.backups.backups(dbName)).map((b) => b.id);

describe('a PostgreSQL server record holding subscription databases', () => {
  it('cannot change ip or port (409 naming the field); other fields still change', async () => {
    await fx.deployed();
    const url = `/api/v1/postgresql-servers/${fx.serverId}`;
    for (const [field, value] of [
      ['port', 5433],
      ['ip', 'localhost'],
    ] as const) {
      const res = await patch(url, { [field]: value });
      expect(res.statusCode, res.body).toBe(409);
      expect(res.json().error.details.fields).toEqual([{ field, message: expect.any(String) }]);
    }
    const renamed = await patch(url, { name: 'still here' });
    expect(renamed.statusCode, renamed.body).toBe(200);
    expect(renamed.json()).toMatchObject({ ip: '127.0.0.1', port: 5432 });
  });

  it('holding a moved subscription or the old copy a move keeps: its ip and port cannot change either (409)', async () => {
    const sub = await fx.deployed();
    const elsewhere = (
      await post('/api/v1/postgresql-servers', { name: 'moved to', ip: '127.0.0.2', port: 5432, username: 'postgres' })
    ).json();
    const kept = (
      await post('/api/v1/postgresql-servers', { name: 'moved from', ip: '127.0.0.3', port: 5432, username: 'postgres' })
    ).json();
    // As a move leaves them: the subscription on one server, the old copy kept on the other.
    await t.ctx.db.subscription.update({ where: { id: sub.id }, data: { postgresql_server_id: elsewhere.id } });
    const root = await t.ctx.db.rootServer.create({ data: { ip: '127.0.0.1' } });
    await t.ctx.db.subscriptionMove.create({
      data: {
        subscription_id: sub.id,
        state: 'done',
        database_name: sub.database_name,
        from_postgresql_server_id: kept.id,
        from_root_server_id: root.id,
        to_postgresql_server_id: elsewhere.id,
        to_root_server_id: root.id,
        keep_until: new Date(Date.now() + 86_400_000),
      },
    });
    for (const server of [elsewhere, kept]) {
      const res = await patch(`/api/v1/postgresql-servers/${server.id}`, { port: 5433 });
      expect(res.statusCode, `${server.name}: ${res.body}`).toBe(409);
    }
  });

  it("pointed at the service's own cluster after a deploy on the operator's own: suspend, backup and drop touch nothing", async () => {
    // The operator's cluster, a template there, and a subscription named after the service's own database.
    const server = await post('/api/v1/postgresql-servers', {
      name: 'mine',
      ip: '127.0.0.1',
      port: other.port,
      username: other.user,
      password: other.password,
    });
    expect(server.statusCode, server.body).toBe(201);
    const on = (database: string) => ({
      host: '127.0.0.1',
      port: other.port,
      user: other.user,
      password: other.password,
      database,
      ssl: { rejectUnauthorized: false },
    });
    // Owned, as Odoo's are, by an ordinary role with a password (the service works inside as it).
    const client = new pg.Client(on('postgres'));
    await client.connect();
    await client.query("CREATE ROLE bait_owner LOGIN PASSWORD 'bait-owner-pw'");
    await client.query('CREATE DATABASE bait_template OWNER bait_owner');
    await client.end();
    await fillOdooTemplate({ ...on('bait_template'), user: 'bait_owner', password: 'bait-owner-pw' });
    const template = await post('/api/v1/database-templates', {
      name: 'bait',
      postgresql_server_id: server.json().id,
      template_db_name: 'bait_template',
      owner_role: 'bait_owner',
      owner_password: 'bait-owner-pw',
    });
    expect(template.statusCode, template.body).toBe(201);
    const victim = t.ctx.dbName;
    const { id, job } = await deployFrom(template.json().id, victim);
    expect(job.state, job.error).toBe('completed');

    const move = await patch(`/api/v1/postgresql-servers/${server.json().id}`, { port: 5432, username: 'postgres' });
    expect(move.statusCode, move.body).toBe(409);
    // As a changed DNS record or a hand-edited row would move it.
    await t.ctx.db.postgresqlServer.update({ where: { id: server.json().id }, data: { port: 5432, username: 'postgres', password: null } });

    const suspend = await act(t, id, 'suspend');
    expect(suspend.statusCode, suspend.body).toBe(400);
    expect(suspend.json().error.message).toMatch(/is not the cluster database .* was created on.*nothing was done/);
    expect(await databaseRow(victim)).toEqual({ datallowconn: true, datconnlimit: -1 });

    const backup = await jobOf(await act(t, id, 'backup'));
    expect(backup.state).toBe('failed');
    expect(backup.error).toMatch(/is not the cluster/);
    expect(await backupsOf(victim)).toEqual([]);

    expect((await act(t, id, 'cancel')).statusCode).toBe(200);
    const drop = await jobOf(await act(t, id, 'drop_database', { skip_backup: true }, t.as.admin));
    expect(drop.state).toBe('failed');
    expect(drop.error).toMatch(/is not the cluster/);
    expect(await canConnect(victim)).toBe(true);
    expect((await t.app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
  });
});

describe('a database made again under a subscription database name', () => {
  it('is not the subscription’s: suspend and drop refuse and leave it as it is', async () => {
    const sub = await fx.deployed();
    await dropDatabase(sub.database_name);
    await adminQuery(`CREATE DATABASE "${sub.database_name}"`);

    const suspend = await act(t, sub.id, 'suspend');
    expect(suspend.statusCode, suspend.body).toBe(400);
    expect(suspend.json().error.message).toMatch(/is not the one the deployment of subscription \d+ created/);
    expect(await databaseRow(sub.database_name)).toEqual({ datallowconn: true, datconnlimit: -1 });

    expect((await act(t, sub.id, 'cancel')).statusCode).toBe(200);
    const drop = await jobOf(await act(t, sub.id, 'drop_database', { skip_backup: true }, t.as.admin));
    expect(drop.state).toBe('failed');
    expect(await canConnect(sub.database_name)).toBe(true);
  });
});

describe('templates', () => {
  it("refuses PostgreSQL's and the service's own databases as names (400 naming template_db_name), on create and update", async () => {
    for (const name of ['postgres', 'template0', 'template1', t.ctx.dbName]) {
      const res = await post('/api/v1/database-templates', { name: 'x', postgresql_server_id: fx.serverId, template_db_name: name });
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json().error.details.fields.map((f: { field: string }) => f.field)).toEqual(['template_db_name']);
      const upd = await patch(`/api/v1/database-templates/${fx.templateId}`, { template_db_name: name });
      expect(upd.statusCode, upd.body).toBe(400);
    }
    const listed = await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/database-templates/${fx.templateId}` });
    expect(listed.json().template_db_name).toBe(fx.templateDb);
  });

  it("a deployment refuses the service's own database and a customer's database as its template, and creates nothing", async () => {
    const tenant = await fx.deployed();
    const cases = [
      { source: t.ctx.dbName, message: /is the service's own database/ },
      { source: tenant.database_name, message: new RegExp(`is the database of subscription ${tenant.id}`) },
    ];
    for (const [n, { source, message }] of cases.entries()) {
      // Written past the API, as a template record from before this check would be.
      const template = await t.ctx.db.databaseTemplate.create({
        data: { name: `copy ${n}`, postgresql_server_id: fx.serverId, template_db_name: source },
      });
      const target = `${t.ctx.dbName}_copy${n}`;
      const { job } = await deployFrom(template.id, target);
      expect(job.state).toBe('failed');
      expect(job.error).toMatch(message);
      expect(await databaseRow(target)).toBeNull();
    }
  });

  it('cannot be deleted while subscription databases made from it exist (409)', async () => {
    await fx.deployed();
    const res = await request(t.app, t.as.operator, { method: 'DELETE', url: `/api/v1/database-templates/${fx.templateId}` });
    expect(res.statusCode, res.body).toBe(409);
  });

  it("a subscription's database_name is never PostgreSQL's own (400)", async () => {
    const partner = await fx.partner();
    for (const name of ['postgres', 'template0', 'template1']) {
      const res = await post('/api/v1/subscriptions', { name: 'x', partner_id: partner.id, database_name: name });
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json().error.details.fields.map((f: { field: string }) => f.field)).toEqual(['body.database_name']);
    }
  });
});

describe('subscriptions deployed before databases were identified', () => {
  it('adopt the database they find while their server record is unchanged, and refuse once it changed', async () => {
    const sub = await fx.deployed();
    const forget = () =>
      t.ctx.db.subscription.update({ where: { id: sub.id }, data: { database_system_identifier: null, database_oid: null } });
    await forget();
    const suspend = await act(t, sub.id, 'suspend');
    expect(suspend.statusCode, suspend.body).toBe(200);
    const [own] = await adminQuery<{ oid: string }>('SELECT oid::text FROM pg_database WHERE datname = $1', [sub.database_name]);
    const row = await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: sub.id } });
    expect(row.database_oid).toBe(BigInt(own!.oid));
    expect(row.database_system_identifier).toMatch(/^\d+$/);

    await forget();
    await t.ctx.db.postgresqlServer.update({ where: { id: fx.serverId }, data: { updated_at: new Date() } });
    const reactivate = await act(t, sub.id, 'reactivate');
    expect(reactivate.statusCode, reactivate.body).toBe(400);
    expect(reactivate.json().error.message).toMatch(/was changed since/);
    expect(await databaseRow(sub.database_name)).toEqual({ datallowconn: false, datconnlimit: 0 });
  });
});
