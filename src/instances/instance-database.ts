// Customer databases on a PostgreSQL server, by identity: a copy of a template is recorded by the
// cluster's system identifier and its oid the moment it exists, and renamed or dropped only when
// the database under its name is still that one.
import type { SecretBox } from '../core/crypto.js';
import type { Db } from '../core/db.js';
import { UserError } from '../core/errors.js';
import { sleep } from '../core/sleep.js';
import {
  connectPostgresqlServer,
  quoteIdent,
  type PostgresqlServerRecord,
  findDatabase,
  ownDatabase,
  sameDatabase,
  SYSTEM_DATABASES,
  type DatabaseIdentity,
  type FoundDatabase,
} from '../postgresql/index.js';
import type { Query } from './odoo-database.js';
import { assertTemplateIdentity, type TemplateIdentityRecord } from './template-identity.js';
import { assertTenantRole, databaseOwner } from './tenant-session.js';

export type { Query };

/** A database the service made: its name now and who it is. */
export interface MadeDatabase extends DatabaseIdentity {
  name: string;
}

/** ALTER and RENAME are short; copying or dropping a large database is not. */
const STATEMENT_TIMEOUT = '30s';
export const LONG_STATEMENT_TIMEOUT = '15min';

export const serverWhere = (server: PostgresqlServerRecord) => `${server.username ?? 'postgres'}@${server.ip}:${server.port}`;

/**
 * Runs `work` on a connection to the server's maintenance database (`postgres`), as the server
 * record's role; connection failures are UserErrors. It never connects into a customer's database:
 * work in there goes through insideTenant (tenant-session.ts), as the tenant's own role.
 */
export async function onServer<T>(
  secretBox: SecretBox,
  server: PostgresqlServerRecord,
  work: (query: Query) => Promise<T>,
  opts: { timeout?: string } = {},
): Promise<T> {
  let client;
  try {
    ({ client } = await connectPostgresqlServer(secretBox, server));
  } catch (err) {
    throw new UserError(`Could not connect to PostgreSQL at ${serverWhere(server)}: ${(err as Error).message}`);
  }
  try {
    await client.query(`SET statement_timeout = '${opts.timeout ?? STATEMENT_TIMEOUT}'`);
    return await work((sql, params) => client.query(sql, params));
  } finally {
    // A connection that fails to close is closed all the same: the server ends a session whose socket is gone.
    await client.end().catch(() => {});
  }
}

/** Ends every session on `database` but this connection's own (an Odoo reconnects); answers how many. */
export const END_SESSIONS =
  'SELECT count(pg_terminate_backend(pid))::int AS ended FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()';

export async function endSessions(query: Query, database: string): Promise<number> {
  const { rows } = await query(END_SESSIONS, [database]);
  return rows[0]!.ended as number;
}

/**
 * CREATE DATABASE <name> OWNER <owner> TEMPLATE <template>. PostgreSQL copies only a database nobody
 * is connected to: the sessions on the template (its Odoo's, which reconnects) are ended first, and
 * again a few times if one came back before the copy started.
 */
export async function createDatabaseFrom(query: Query, template: string, name: string, owner: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    await endSessions(query, template);
    try {
      await query(`CREATE DATABASE ${quoteIdent(name)} OWNER ${quoteIdent(owner)} TEMPLATE ${quoteIdent(template)}`);
      return;
    } catch (err) {
      if (attempt >= 5 || !/being accessed by other users/.test((err as Error).message)) throw err;
      await sleep(200 * attempt);
    }
  }
}

/**
 * Refuses a template that is not an ordinary database of the operator's: PostgreSQL's own, the
 * service's own, a customer's database (a copy would hand one tenant's data to another) or a
 * standby; answers who it is (which template-identity.ts compares with the template's record).
 */
export async function assertTemplateDatabase(db: Db, query: Query, name: string, where: string): Promise<FoundDatabase> {
  if (SYSTEM_DATABASES.includes(name)) throw new UserError(`Template database ${name} is PostgreSQL's own: it is never a template`);
  const found = await findDatabase(query, name);
  if (!found) throw new UserError(`Template database ${name} does not exist on ${where}`);
  if (sameDatabase(found, await ownDatabase(db))) {
    throw new UserError(`Template database ${name} on ${where} is the service's own database`);
  }
  const tenant = await db.subscription.findFirst({
    where: { database_system_identifier: found.systemIdentifier, database_oid: found.oid },
    select: { id: true },
  });
  if (tenant) {
    throw new UserError(
      `Template database ${name} on ${where} is the database of subscription ${tenant.id}: a customer's database is never a template`,
    );
  }
  const standby = await db.standbyDatabase.findFirst({
    where: { system_identifier: found.systemIdentifier, oid: found.oid },
    select: { id: true },
  });
  if (standby) throw new UserError(`Template database ${name} on ${where} is standby ${standby.id}: a standby is never a template`);
  return found;
}

/** The role a copy of `template` is owned by: the template's owner_role, else the template database's owner. */
export async function copyOwner(query: Query, template: { template_db_name: string; owner_role: string | null }, where: string) {
  const owner = template.owner_role ?? (await databaseOwner(query, template.template_db_name));
  if (!owner) throw new UserError(`Template database ${template.template_db_name} does not exist on ${where}`);
  await assertTenantRole(query, owner, `Copies of template ${template.template_db_name} on ${where}`);
  return owner;
}

/**
 * CREATE DATABASE <name> OWNER <tenant role> TEMPLATE <template>, after the template and the role
 * are checked; answers who the copy is.
 */
export async function copyTemplate(
  db: Db,
  query: Query,
  template: TemplateIdentityRecord & { owner_role: string | null },
  name: string,
  where: string,
): Promise<MadeDatabase> {
  await assertTemplateIdentity(db, template, await assertTemplateDatabase(db, query, template.template_db_name, where), where);
  const owner = await copyOwner(query, template, where);
  await query(`SET statement_timeout = '${LONG_STATEMENT_TIMEOUT}'`);
  await createDatabaseFrom(query, template.template_db_name, name, owner);
  const found = await findDatabase(query, name);
  if (!found) throw new UserError(`Database ${name} was not found after CREATE DATABASE on ${where}`);
  return { name, systemIdentifier: found.systemIdentifier, oid: found.oid };
}

/** The database under `made.name`, when it is still the one made; null when the name is free. */
async function stillMade(query: Query, made: MadeDatabase) {
  const found = await findDatabase(query, made.name);
  if (found && !sameDatabase(found, made)) {
    throw new UserError(
      `Database ${made.name} is no longer the one the service made (oid ${found.oid}, made as ${made.oid}): nothing was done`,
    );
  }
  return found;
}

/** ALTER DATABASE ... RENAME TO, only when the database is still the one made. */
export async function renameMadeDatabase(query: Query, made: MadeDatabase, to: string): Promise<MadeDatabase> {
  if (!(await stillMade(query, made))) throw new UserError(`Database ${made.name} does not exist any more`);
  await query(`ALTER DATABASE ${quoteIdent(made.name)} RENAME TO ${quoteIdent(to)}`);
  return { ...made, name: to };
}

/** The role of a customer database that has one of its own (tenant-role.ts): named after its oid. */
export const tenantRoleName = (db: Pick<DatabaseIdentity, 'oid'>) => `svc_db_${db.oid}`;

/** A role svc made for one customer database (tenant-role.ts): it owns that database only. */
const OWN_ROLE = /^svc_db_\d+$/;

/**
 * DROP DATABASE IF EXISTS ... WITH (FORCE), then the role of its own that owned it (never `keep`,
 * the role of a database that stays).
 */
export async function dropDatabaseAndItsRole(query: Query, name: string, keep: string | null = null): Promise<void> {
  const owner = await databaseOwner(query, name);
  await query(`DROP DATABASE IF EXISTS ${quoteIdent(name)} WITH (FORCE)`);
  if (owner && OWN_ROLE.test(owner) && owner !== keep) await query(`DROP ROLE IF EXISTS ${quoteIdent(owner)}`);
}

/**
 * DROP DATABASE ... WITH (FORCE) when the database is still the one made, then its own role if it
 * has one; false when the database was gone already.
 */
export async function dropMadeDatabase(query: Query, made: MadeDatabase): Promise<boolean> {
  if (!(await stillMade(query, made))) {
    await query(`DROP ROLE IF EXISTS ${quoteIdent(tenantRoleName(made))}`);
    return false;
  }
  await query(`SET statement_timeout = '${LONG_STATEMENT_TIMEOUT}'`);
  await query(`DROP DATABASE ${quoteIdent(made.name)} WITH (FORCE)`);
  await query(`DROP ROLE IF EXISTS ${quoteIdent(tenantRoleName(made))}`);
  return true;
}

/** A database's encoding and collation, as a copy of it is made with (null: no such database). */
export interface DatabaseLocale {
  enc: string;
  datcollate: string;
  datctype: string;
}

export async function databaseLocale(query: Query, name: string): Promise<DatabaseLocale | null> {
  const { rows } = await query(
    'SELECT pg_catalog.pg_encoding_to_char(encoding) AS enc, datcollate, datctype FROM pg_catalog.pg_database WHERE datname = $1',
    [name],
  );
  return (rows[0] as DatabaseLocale | undefined) ?? null;
}

/** An empty database (from template0) owned by `owner`, with `locale`: what a copy is restored into. */
export async function createEmptyDatabase(query: Query, name: string, owner: string, locale: DatabaseLocale): Promise<void> {
  const lit = (s: string) => `'${s.replaceAll("'", "''")}'`;
  await query(
    `CREATE DATABASE ${quoteIdent(name)} OWNER ${quoteIdent(owner)} TEMPLATE template0 ENCODING ${lit(locale.enc)} LC_COLLATE ${lit(locale.datcollate)} LC_CTYPE ${lit(locale.datctype)}`,
  );
}
