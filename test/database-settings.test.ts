// A tenant that owns its database sets what every later session on it starts with: `ALTER DATABASE
// <own> SET` and `ALTER ROLE CURRENT_USER IN DATABASE <own> SET` (PostgreSQL refuses an owner
// neither). svc's sessions start with their own settings instead (libpq's startup options, which
// take precedence): on the real PostgreSQL, a database whose tenant set a 1 ms statement timeout, a
// `role` of its own, read-only transactions, a search_path and an idle timeout is still handled by
// svc's maintenance sessions, its tenant session and pg_dump | pg_restore, as the role svc chose.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { insideTenant, onServer, setStorageUsed } from '../src/instances/index.js';
import { connectPostgresqlServer } from '../src/postgresql/index.js';
import { dumpAndRestore } from '../src/instances/index.js';
import { useTestApp } from './helpers/app.js';
import { createOdooTemplate, queryIn, TENANT_ROLE, tenantUrl } from './helpers/odoo-template.js';
import { adminQuery, databaseUrl, dropDatabase } from './helpers/pg.js';
import pg from 'pg';

const t = useTestApp();
const server = { ip: '127.0.0.1', port: 5432, username: 'postgres', password: null };
let hostile: string;

/** What the tenant sets on its own database and on its role there (the settings PostgreSQL applies to every session). */
const TENANT_SETTINGS = (db: string) => `
  ALTER DATABASE "${db}" SET statement_timeout = '1ms';
  ALTER DATABASE "${db}" SET role = ${TENANT_ROLE};
  ALTER DATABASE "${db}" SET default_transaction_read_only = on;
  ALTER DATABASE "${db}" SET search_path = tenant_shadow, public;
  ALTER DATABASE "${db}" SET exit_on_error = on;
  ALTER DATABASE "${db}" SET idle_session_timeout = '1ms';
  ALTER ROLE CURRENT_USER IN DATABASE "${db}" SET lock_timeout = '1ms';
  ALTER ROLE CURRENT_USER IN DATABASE "${db}" SET idle_in_transaction_session_timeout = '1ms';`;

beforeAll(async () => {
  hostile = `${t.ctx.dbName}_hostile`;
  await createOdooTemplate(hostile);
  const client = new pg.Client({ connectionString: tenantUrl(hostile) });
  await client.connect();
  try {
    await client.query(TENANT_SETTINGS(hostile));
  } finally {
    await client.end();
  }
  // svc's first session on a server is on its maintenance database (no tenant owns it): it learns the server's version.
  await onServer(t.ctx.secretBox, server, (query) => query('SELECT 1'));
});

afterAll(async () => {
  for (const db of [hostile, `${t.ctx.dbName}_restored`]) if (db) await dropDatabase(db);
});

describe("a tenant's database and role settings", () => {
  it('a superuser session of svc in the database stays the superuser, untimed and writable', async () => {
    const { client } = await connectPostgresqlServer(t.ctx.secretBox, server, hostile);
    try {
      await client.query('SELECT pg_catalog.pg_sleep(0.05)');
      const { rows } = await client.query(
        `SELECT current_user::text AS cu, session_user::text AS su, current_setting('default_transaction_read_only') AS ro,
                current_setting('search_path') AS path`,
      );
      expect(rows[0]).toEqual({ cu: 'postgres', su: 'postgres', ro: 'off', path: 'pg_catalog,pg_temp' });
      await client.query('BEGIN');
      await client.query('CREATE TEMPORARY TABLE svc_probe (x int)');
      await client.query('SELECT pg_catalog.pg_sleep(0.05)');
      await client.query('COMMIT');
    } finally {
      await client.end();
    }
  });

  it("svc's tenant session works in it as the tenant role (writes, waits), not as the role the database names", async () => {
    const who = await insideTenant(
      t.ctx.secretBox,
      server,
      hostile,
      async (query) => {
        await query('SELECT pg_catalog.pg_sleep(0.05)');
        await setStorageUsed(query, 4242);
        return (await query('SELECT current_user::text AS who')).rows[0]!.who;
      },
      { role: null, deadlineMs: 30_000, what: 'The hostile database' },
    );
    expect(who).toBe(TENANT_ROLE);
    // Read back past the tenant's settings (the test's own client names its own, as svc does).
    const client = new pg.Client({ connectionString: databaseUrl(hostile), options: '-c idle_session_timeout=0 -c statement_timeout=0' });
    await client.connect();
    try {
      const { rows } = await client.query("SELECT value FROM public.ir_config_parameter WHERE key = 'svc.storage_used_bytes'");
      expect(rows).toEqual([{ value: '4242' }]);
    } finally {
      await client.end();
    }
  });

  it('pg_dump | pg_restore copies it whole', async () => {
    const restored = `${t.ctx.dbName}_restored`;
    await adminQuery(`CREATE DATABASE "${restored}" OWNER ${TENANT_ROLE}`);
    const conn = { host: '127.0.0.1', port: 5432, user: 'postgres', password: null };
    await dumpAndRestore(conn, conn, hostile, restored, 60_000, process.env.PATH ?? '');
    expect(await queryIn(restored, "SELECT count(*)::int AS n FROM res_users WHERE login = 'admin'")).toEqual([{ n: 1 }]);
  });
});
