// PostgreSQL servers over the real API on real PostgreSQL: test_connection against the machine's
// own server (ssl off: the plain path) and against a second real cluster started here with ssl=on
// that refuses plain sessions (the TLS path), plus wrong password and refused port.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { request } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';
import { startTlsCluster, type TlsCluster } from './helpers/pg-tls-cluster.js';
import { freePort } from './helpers/sshd.js';
import { connectPostgresqlServer } from '../src/postgresql/postgresql-connection.js';

let tlsCluster: TlsCluster;
beforeAll(async () => {
  tlsCluster = await startTlsCluster();
});
afterAll(() => tlsCluster?.stop());

const t = useTestApp();

async function create(payload: object) {
  const res = await request(t.app, t.as.operator, { method: 'POST', url: '/api/v1/postgresql-servers', payload });
  expect(res.statusCode, res.body).toBe(201);
  return res.json();
}

const testConnection = (id: number) =>
  request(t.app, t.as.operator, { method: 'POST', url: `/api/v1/postgresql-servers/${id}/actions/test_connection` });

describe('PostgreSQL server records', () => {
  it('default port 5432, password encrypted and write-only, readable by users, written by operators', async () => {
    const created = await create({ name: 'db1', ip: 'db1.internal', username: 'odoo', password: 'pg-secret-1' });
    expect(created).toMatchObject({ name: 'db1', ip: 'db1.internal', username: 'odoo', port: 5432, password_set: true });
    expect(JSON.stringify(created)).not.toContain('pg-secret-1');
    const [raw] = await t.ctx.db.$queryRaw<{ password: string }[]>`SELECT password FROM postgresql_servers WHERE id = ${created.id}`;
    expect(raw!.password).toMatch(/^v\d+:/);

    const read = await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/postgresql-servers/${created.id}` });
    expect(read.statusCode).toBe(200);
    expect(read.json()).not.toHaveProperty('password');
    const write = await request(t.app, t.as.user, {
      method: 'PATCH',
      url: `/api/v1/postgresql-servers/${created.id}`,
      payload: { port: 5433 },
    });
    expect(write.statusCode).toBe(403);
  });

  it('refuses a missing ip, a bad port and unknown fields, and creates nothing', async () => {
    for (const payload of [{ username: 'x' }, { ip: '' }, { ip: 'h', port: 70000 }, { ip: 'h', surprise: 1 }]) {
      const res = await request(t.app, t.as.operator, { method: 'POST', url: '/api/v1/postgresql-servers', payload });
      expect(res.statusCode).toBe(400);
      expect(res.json().error.code).toBe('validation_error');
    }
    expect(await t.ctx.db.postgresqlServer.count({ where: { ip: 'h' } })).toBe(0);
  });
});

describe('test_connection', () => {
  it('plain path: the local server (ssl off) reports its version without TLS', async () => {
    const server = await create({ ip: '127.0.0.1', port: 5432, username: 'postgres' });
    const res = await testConnection(server.id);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ ok: true, tls: false, tls_version: null, server_version: expect.stringMatching(/^15\./) });
    expect(res.json().version).toMatch(/^PostgreSQL 15/);
    const log = await t.ctx.db.actionLog.findFirst({ where: { model_name: 'svc.postgresql.server', rec_id: server.id } });
    expect(log).toMatchObject({ action_type: 'database', status: 'success', user_id: t.as.operator.userId });
  });

  it('TLS path: a server that only accepts TLS is reached over TLS with the stored password', async () => {
    // The cluster really refuses plain sessions, so a success below can only be over TLS.
    const plain = new pg.Client({
      host: '127.0.0.1',
      port: tlsCluster.port,
      user: tlsCluster.user,
      password: tlsCluster.password,
      database: 'postgres',
    });
    await expect(plain.connect()).rejects.toThrow(/no encryption/);
    await plain.end().catch(() => {});

    const server = await create({ ip: '127.0.0.1', port: tlsCluster.port, username: tlsCluster.user, password: tlsCluster.password });
    const res = await testConnection(server.id);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ ok: true, tls: true, tls_version: expect.stringMatching(/^TLSv1\.[23]$/) });
    const logs = await t.ctx.db.actionLog.findMany({ where: { model_name: 'svc.postgresql.server', rec_id: server.id } });
    expect(JSON.stringify(logs)).not.toContain(tlsCluster.password);
  });

  it('a wrong password answers 400 user_error carrying the server error', async () => {
    const server = await create({ ip: '127.0.0.1', port: tlsCluster.port, username: tlsCluster.user, password: 'not-the-password' });
    const res = await testConnection(server.id);
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatchObject({ code: 'user_error' });
    expect(res.json().error.message).toContain(`password authentication failed for user "${tlsCluster.user}"`);
    const log = await t.ctx.db.actionLog.findFirst({ where: { model_name: 'svc.postgresql.server', rec_id: server.id } });
    expect(log).toMatchObject({ status: 'failure' });
    expect(log!.output_text).not.toContain('not-the-password');
  });

  it('a refused port answers 400 user_error carrying the connection error', async () => {
    const port = await freePort();
    const server = await create({ ip: '127.0.0.1', port });
    const res = await testConnection(server.id);
    expect(res.statusCode).toBe(400);
    expect(res.json().error.message).toContain(`Could not connect to PostgreSQL at postgres@127.0.0.1:${port}: connect ECONNREFUSED`);
  });

  it('an unknown server is 404', async () => {
    expect((await testConnection(999999)).statusCode).toBe(404);
  });
});

describe('a connection the server ends', () => {
  it('between two queries: the next query fails, the process goes on', async () => {
    const server = await t.ctx.db.postgresqlServer.create({ data: { name: 'local', ip: '127.0.0.1', port: 5432, username: 'postgres' } });
    const { client } = await connectPostgresqlServer(t.ctx.secretBox, server);
    try {
      const [{ pid }] = (await client.query('SELECT pg_backend_pid() AS pid')).rows as [{ pid: number }];
      const ended = new Promise((resolve) => client.once('end', resolve));
      await t.ctx.db.$queryRaw`SELECT pg_terminate_backend(${pid}::int)`;
      await ended; // the server's message has arrived while nothing ran
      await expect(client.query('SELECT 1')).rejects.toThrow();
    } finally {
      await client.end().catch(() => {});
    }
  });
});
