// One PostgreSQL role per customer database on an Odoo host svc set up. A tenant's Odoo
// administrator runs SQL (server actions expose the cursor) with the rights of the role Odoo
// connects as; when every tenant of a host shared the host's role, one tenant could read another's
// live queries, drop or copy its database, or change the password every tenant signs in with. So a
// copy of the template is handed to a role of its own — the database and everything in it the
// template's owner owned — and the host's Odoo connects to it as that role (svc's addon reads the
// credentials from a file per database: tenant-credentials.ts). The role owns that database and
// nothing else: NOSUPERUSER NOCREATEDB NOCREATEROLE, a member of no role; CONNECT and TEMPORARY on
// the database are the owner's only (PUBLIC's default grant is revoked).
//
// The role is named after the database's oid (svc_db_<oid>): unique in its cluster and kept by a
// rename, so a standby taken under a customer's name, a leftover or a drop always finds its role
// from the identity svc records anyway. A standby's role cannot log in (NOLOGIN, no password): a
// standby carries no usable credential until a trial takes it and svc sets one.
import { randomBytes } from 'node:crypto';
import type { SecretBox } from '../core/crypto.js';
import { UserError } from '../core/errors.js';
import {
  connectPostgresqlServer,
  quoteIdent,
  scramVerifier,
  type DatabaseIdentity,
  type PostgresqlServerRecord,
} from '../postgresql/index.js';
import { onServer, serverWhere, tenantRoleName, type MadeDatabase, type Query } from './instance-database.js';
import { databaseOwner } from './tenant-session.js';

export { tenantRoleName };

/** A password for a tenant's role: letters, digits, - and _ (it goes into a JSON file on the host as it is). */
export const newRolePassword = () => randomBytes(24).toString('base64url');

// INHERIT: the owner of a database gets CREATE on its schema public through the implicit pg_database_owner.
const ROLE_OPTIONS = 'NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS INHERIT';

/** LOGIN with a SCRAM verifier of `password` (the password itself never reaches a statement PostgreSQL could log), or NOLOGIN. */
const loginClause = (password: string | null) =>
  password === null ? 'NOLOGIN PASSWORD NULL' : `LOGIN PASSWORD '${scramVerifier(password)}'`;

/**
 * Creates the role, or takes over one of that name that owns nothing (left by a drop that did not
 * finish); a role of that name that owns something is refused.
 */
async function ensureRole(query: Query, role: string, password: string | null) {
  const { rows } = await query(
    `SELECT r.oid::text AS oid, EXISTS (SELECT 1 FROM pg_catalog.pg_shdepend d WHERE d.refobjid = r.oid AND d.deptype = 'o') AS owns
       FROM pg_catalog.pg_roles r WHERE r.rolname = $1`,
    [role],
  );
  const found = rows[0] as { oid: string; owns: boolean } | undefined;
  if (found?.owns) throw new UserError(`Role ${role} already exists and owns objects: it is not this database's, nothing was done`);
  await query(`${found ? 'ALTER' : 'CREATE'} ROLE ${quoteIdent(role)} WITH ${ROLE_OPTIONS} ${loginClause(password)}`);
}

/**
 * Gives `database` and every object in it that `from` owns to the database's own role (made here;
 * NOLOGIN when `password` is null), as the server record's role, inside the database.
 * One transaction: either all of it belongs to the tenant's role, or nothing changed.
 */
export async function handOverToTenantRole(
  secretBox: SecretBox,
  server: PostgresqlServerRecord,
  database: MadeDatabase,
  from: string,
  password: string | null,
): Promise<string> {
  const role = tenantRoleName(database);
  await onServer(secretBox, server, (query) => ensureRole(query, role, password));
  let client;
  try {
    ({ client } = await connectPostgresqlServer(secretBox, server, database.name));
  } catch (err) {
    throw new UserError(`Could not connect to ${database.name} on ${serverWhere(server)}: ${(err as Error).message}`);
  }
  try {
    // The session started with svc's role and search_path over the database's settings (connectPostgresqlServer).
    await client.query("SET statement_timeout = '5min'");
    const { rows } = await client.query(
      'SELECT oid::text AS oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database()',
    );
    if (rows[0]?.oid !== String(database.oid)) {
      throw new UserError(`Database ${database.name} is no longer the one the service made: nothing was handed over`);
    }
    await client.query('BEGIN');
    await client.query(handOverBlock(from, role));
    await client.query(`ALTER DATABASE ${quoteIdent(database.name)} OWNER TO ${quoteIdent(role)}`);
    await client.query(`REVOKE ALL ON DATABASE ${quoteIdent(database.name)} FROM PUBLIC`);
    await client.query('COMMIT');
    return role;
  } catch (err) {
    // The error that failed the transaction is the one told; a ROLLBACK that fails too means the
    // connection is gone, and the transaction with it.
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    // A connection that fails to close is closed all the same: the server ends a session whose socket is gone.
    await client.end().catch(() => {});
  }
}

/** A PL/pgSQL block: each kind of object `from` owns in the current database goes to `to`; anything left over fails it. */
function handOverBlock(from: string, to: string): string {
  const lit = (s: string) => `'${s.replaceAll("'", "''")}'`;
  return `DO $svc$
DECLARE
  from_role oid := (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = ${lit(from)});
  target text := ${lit(to)};
  r record;
  left_over text;
BEGIN
  IF from_role IS NULL THEN RAISE EXCEPTION 'role % does not exist', ${lit(from)}; END IF;
  FOR r IN SELECT nspname FROM pg_catalog.pg_namespace
            WHERE nspowner = from_role AND nspname NOT LIKE 'pg\\_%' AND nspname <> 'information_schema' LOOP
    EXECUTE pg_catalog.format('ALTER SCHEMA %I OWNER TO %I', r.nspname, target);
  END LOOP;
  -- Tables take their indexes and the sequences of their columns with them.
  FOR r IN SELECT c.oid::pg_catalog.regclass AS rel FROM pg_catalog.pg_class c
            WHERE c.relowner = from_role AND (c.relkind IN ('r', 'p', 'v', 'm', 'f')
               OR (c.relkind = 'S' AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
                     WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.objid = c.oid
                       AND d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.deptype IN ('a', 'i')))) LOOP
    EXECUTE pg_catalog.format('ALTER TABLE %s OWNER TO %I', r.rel, target);
  END LOOP;
  FOR r IN SELECT p.oid::pg_catalog.regprocedure AS fn, p.prokind FROM pg_catalog.pg_proc p WHERE p.proowner = from_role LOOP
    EXECUTE pg_catalog.format(CASE WHEN r.prokind = 'a' THEN 'ALTER AGGREGATE %s OWNER TO %I' ELSE 'ALTER ROUTINE %s OWNER TO %I' END, r.fn, target);
  END LOOP;
  FOR r IN SELECT t.oid::pg_catalog.regtype AS typ FROM pg_catalog.pg_type t
            WHERE t.typowner = from_role AND (t.typtype IN ('d', 'e', 'r')
               OR (t.typtype = 'c' AND (SELECT c.relkind FROM pg_catalog.pg_class c WHERE c.oid = t.typrelid) = 'c')) LOOP
    EXECUTE pg_catalog.format('ALTER TYPE %s OWNER TO %I', r.typ, target);
  END LOOP;
  FOR r IN SELECT m.oid FROM pg_catalog.pg_largeobject_metadata m WHERE m.lomowner = from_role LOOP
    EXECUTE pg_catalog.format('ALTER LARGE OBJECT %s OWNER TO %I', r.oid, target);
  END LOOP;
  SELECT pg_catalog.string_agg(DISTINCT d.classid::pg_catalog.regclass::text, ', ') INTO left_over
    FROM pg_catalog.pg_shdepend d
   WHERE d.refobjid = from_role AND d.deptype = 'o'
     AND d.dbid = (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database())
     -- An extension (Odoo makes pg_trgm) has no ALTER ... OWNER: it stays the template owner's, whose rights
     -- over it (update, drop) the tenant does not get; its objects above are the tenant's.
     AND d.classid <> 'pg_catalog.pg_extension'::pg_catalog.regclass;
  IF left_over IS NOT NULL THEN
    RAISE EXCEPTION 'objects of kinds svc does not hand over are owned by %: %', ${lit(from)}, left_over;
  END IF;
END
$svc$`;
}

/** The standby's role can log in from now on, with this password. */
export function letTenantRoleLogIn(
  secretBox: SecretBox,
  server: PostgresqlServerRecord,
  database: Pick<DatabaseIdentity, 'oid'>,
  password: string,
) {
  return onServer(secretBox, server, (query) => query(`ALTER ROLE ${quoteIdent(tenantRoleName(database))} ${loginClause(password)}`));
}

/** Whether copies of `template` get roles of their own: those an Odoo host svc set up serves. */
export const hasTenantRoles = (template: { root_server: { odoo_db_user: string | null } | null }) =>
  Boolean(template.root_server?.odoo_db_user);

/**
 * The database's own role, able to log in with `password`: a copy is handed over from `from` (the
 * template's owner) now; a standby was handed over when it was made and only gets its login.
 */
export async function giveTenantRole(
  secretBox: SecretBox,
  server: PostgresqlServerRecord,
  database: MadeDatabase,
  from: string,
  password: string,
): Promise<string> {
  const role = tenantRoleName(database);
  const owner = await onServer(secretBox, server, (query) => databaseOwner(query, database.name));
  if (owner !== role) return handOverToTenantRole(secretBox, server, database, from, password);
  await letTenantRoleLogIn(secretBox, server, database, password);
  return role;
}
