// A template database with the tables and columns of Odoo's models that the service touches
// (ir_config_parameter, ir_model_data, res_users, res_partner, res_company, res_groups and its
// membership and implication tables), as an Odoo install leaves them: the company and its partner,
// the superuser (__system__, id 1) and the administrator (base.user_admin, id 2) with a known
// password, both in Internal User (base.group_user, id 1), the default parameters, and an
// enterprise code.
import pg from 'pg';
import { adminQuery, databaseUrl } from './pg.js';

/** The template administrator's password (what every copy had before the customer login). */
export const TEMPLATE_ADMIN_PASSWORD = 'template-admin-password';
/** Odoo's default is 600,000; tests hash with fewer rounds (the template says how many, as Odoo reads it). */
export const TEST_HASH_ROUNDS = 1000;

export const ODOO_SCHEMA = `
CREATE TABLE res_partner (id serial PRIMARY KEY, name varchar, email varchar, company_id int, active boolean DEFAULT true,
  create_date timestamp, write_date timestamp);
CREATE TABLE res_company (id serial PRIMARY KEY, name varchar NOT NULL, partner_id int NOT NULL REFERENCES res_partner(id),
  create_date timestamp, write_date timestamp);
CREATE TABLE res_users (id serial PRIMARY KEY, login varchar NOT NULL UNIQUE, password varchar, active boolean DEFAULT true,
  share boolean, partner_id int NOT NULL REFERENCES res_partner(id), company_id int NOT NULL REFERENCES res_company(id),
  create_date timestamp, write_date timestamp);
CREATE TABLE ir_model_data (id serial PRIMARY KEY, module varchar NOT NULL, name varchar NOT NULL, model varchar NOT NULL,
  res_id int, noupdate boolean, create_date timestamp, write_date timestamp);
CREATE TABLE ir_config_parameter (id serial PRIMARY KEY, key varchar NOT NULL, value text NOT NULL, create_uid int,
  create_date timestamp, write_uid int, write_date timestamp, CONSTRAINT ir_config_parameter_key_uniq UNIQUE (key));
CREATE TABLE res_groups (id serial PRIMARY KEY, name varchar NOT NULL);
CREATE TABLE res_groups_users_rel (gid int NOT NULL REFERENCES res_groups(id) ON DELETE CASCADE,
  uid int NOT NULL REFERENCES res_users(id) ON DELETE CASCADE, PRIMARY KEY (gid, uid));
CREATE TABLE res_groups_implied_rel (gid int NOT NULL REFERENCES res_groups(id) ON DELETE CASCADE,
  hid int NOT NULL REFERENCES res_groups(id) ON DELETE CASCADE, PRIMARY KEY (gid, hid));
`;

export interface OdooTemplateOptions {
  /** A table (`res_users`) or column (`res_users.share`) left out, to test the refusal. */
  without?: string;
  /** password.hashing.rounds in the template (null: unset, Odoo's default applies). */
  rounds?: number | null;
}

/**
 * The role that owns the tests' Odoo databases, as Odoo's database user does on a real host: an
 * ordinary login role, so a tenant's SQL in them runs without superuser rights.
 */
export const TENANT_ROLE = 'svc_test_tenant';

/** Creates TENANT_ROLE once per cluster (test files run side by side: a concurrent create is fine). */
export async function ensureTenantRole(role = TENANT_ROLE) {
  try {
    await adminQuery(`CREATE ROLE "${role}" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE`);
  } catch (err) {
    if ((err as { code?: string }).code !== '42710' && (err as { code?: string }).code !== '23505') throw err;
  }
}

/** A connection to `database` as the tenant role (trust authentication on the tests' server). */
export function tenantUrl(database: string, role = TENANT_ROLE) {
  const url = new URL(databaseUrl(database));
  url.username = role;
  url.password = '';
  return url.toString();
}

/** Creates `name` as an Odoo-shaped template database on the machine's PostgreSQL, owned (with its tables) by the tenant role. */
export async function createOdooTemplate(name: string, opts: OdooTemplateOptions & { owner?: string } = {}) {
  const owner = opts.owner ?? TENANT_ROLE;
  await ensureTenantRole(owner);
  await adminQuery(`CREATE DATABASE "${name}" OWNER "${owner}"`);
  await fillOdooTemplate({ connectionString: tenantUrl(name, owner) }, opts);
}

/** Gives the (empty) database `connection` reaches Odoo's tables and an install's rows. */
export async function fillOdooTemplate(connection: pg.ClientConfig, opts: OdooTemplateOptions = {}) {
  const client = new pg.Client(connection);
  await client.connect();
  try {
    await client.query(ODOO_SCHEMA);
    await client.query(`
      INSERT INTO res_partner (id, name, email) VALUES (1, 'YourCompany', 'info@yourcompany.example.com'),
        (2, 'OdooBot', 'odoobot@example.com'), (3, 'Mitchell Admin', 'admin@yourcompany.example.com');
      INSERT INTO res_company (id, name, partner_id) VALUES (1, 'YourCompany', 1);
      INSERT INTO res_users (id, login, password, active, share, partner_id, company_id)
        VALUES (1, '__system__', NULL, false, false, 2, 1), (2, 'admin', '${TEMPLATE_ADMIN_PASSWORD}', true, false, 3, 1);
      INSERT INTO ir_model_data (module, name, model, res_id, noupdate) VALUES ('base', 'main_company', 'res.company', 1, true),
        ('base', 'user_root', 'res.users', 1, true), ('base', 'user_admin', 'res.users', 2, true),
        ('base', 'partner_admin', 'res.partner', 3, true), ('base', 'group_user', 'res.groups', 1, true),
        ('base', 'group_portal', 'res.groups', 2, true);
      INSERT INTO res_groups (id, name) VALUES (1, 'Internal User'), (2, 'Portal');
      INSERT INTO res_groups_users_rel (gid, uid) VALUES (1, 1), (1, 2);
      SELECT setval('res_groups_id_seq', 2);
      SELECT setval('res_partner_id_seq', 3); SELECT setval('res_users_id_seq', 2); SELECT setval('res_company_id_seq', 1);
      INSERT INTO ir_config_parameter (key, value) VALUES ('database.secret', 'template-secret'),
        ('database.uuid', 'template-uuid'), ('database.create_date', '2024-01-01 00:00:00'),
        ('web.base.url', 'http://template.example.com:8069'), ('database.enterprise_code', 'M123456789'),
        ('database.expiration_date', '2030-01-01 00:00:00'), ('database.expiration_reason', 'renewal');
    `);
    const rounds = opts.rounds === undefined ? TEST_HASH_ROUNDS : opts.rounds;
    if (rounds !== null)
      await client.query(`INSERT INTO ir_config_parameter (key, value) VALUES ('password.hashing.rounds', $1)`, [String(rounds)]);
    if (opts.without) {
      const [table, column] = opts.without.split('.');
      await client.query(column ? `ALTER TABLE ${table} DROP COLUMN ${column}` : `DROP TABLE ${table} CASCADE`);
    }
  } finally {
    await client.end();
  }
}

/** The config parameters of a database, by key. */
export async function configParameters(database: string): Promise<Record<string, string>> {
  const client = new pg.Client({ connectionString: databaseUrl(database) });
  await client.connect();
  try {
    const { rows } = await client.query<{ key: string; value: string }>('SELECT key, value FROM ir_config_parameter');
    return Object.fromEntries(rows.map((r) => [r.key, r.value]));
  } finally {
    await client.end();
  }
}

/** Runs one query in a database and answers its rows. */
export async function queryIn<R extends pg.QueryResultRow = pg.QueryResultRow>(database: string, sql: string, params: unknown[] = []) {
  const client = new pg.Client({ connectionString: databaseUrl(database) });
  await client.connect();
  try {
    return (await client.query<R>(sql, params)).rows;
  } finally {
    await client.end();
  }
}
