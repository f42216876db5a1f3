// Work inside a customer's (a tenant's) database. A tenant's Odoo administrator runs any SQL as the
// role that owns its tables (Odoo's server actions expose the cursor), so everything in there —
// rules, views, triggers, column defaults, role and database settings — is the tenant's own code.
// The service therefore:
// - signs in there only as that role: never a superuser, nor a role that can become one or read
//   and write the server's files (checked on the server's maintenance connection before each use),
//   so whatever tenant code runs in the service's session has the tenant's rights and no more;
// - names Odoo's tables schema-qualified, in a session whose search_path is pg_catalog's;
// - before touching a table, locks it and checks it is an ordinary table owned by that role, with
//   no rules, no triggers of its own and no forced row security (a view or a rule could forge what
//   the service reads or run code when it writes); the lock keeps it so until the transaction ends;
// - keeps a deadline from outside the session: at its end the backend is terminated from the
//   maintenance connection and the socket closed, so no lock or setting of the tenant holds it.
import type pg from 'pg';
import type { SecretBox } from '../core/crypto.js';
import { UserError } from '../core/errors.js';
import { connectPostgresqlServer, quoteIdent, type DatabaseIdentity, type PostgresqlServerRecord } from '../postgresql/index.js';

/**
 * What the tenant's own database did to the service's work: a table that is not as Odoo makes it,
 * or a deadline its session ran past (a lock the tenant held, say). Unlike a refused role or an
 * unreachable server, the tenant controls it.
 */
export class TenantRefusal extends UserError {}

/** One statement on a connection. */
export type Query = (sql: string, params?: unknown[]) => Promise<{ rows: Record<string, unknown>[] }>;

/** Who the service is inside a tenant's database: a role, and its password (ciphertext; null = none). */
export interface TenantRole {
  role: string;
  password: string | null;
}

/** The template's owner_role (with its password), or null: the database's owner. */
export const tenantRoleOf = (template: { owner_role: string | null; owner_password: string | null }): TenantRole | null =>
  template.owner_role ? { role: template.owner_role, password: template.owner_password } : null;

/** Built-in roles whose members read or write the server's files or run programs on it. */
const PRIVILEGED_ROLES = [
  'pg_read_server_files',
  'pg_write_server_files',
  'pg_execute_server_program',
  'pg_read_all_data',
  'pg_write_all_data',
];

const where = (server: PostgresqlServerRecord) => `${server.ip}:${server.port}`;

/** Why `role` may not be the service's role inside a tenant's database, or null when it may. */
export async function tenantRoleRefusal(query: Query, role: string): Promise<string | null> {
  const { rows } = await query(
    `SELECT r.rolsuper, r.rolcreaterole, r.rolreplication, r.rolcanlogin,
            ARRAY(SELECT p.rolname::text FROM pg_catalog.pg_roles p
                   WHERE p.oid <> r.oid AND pg_catalog.pg_has_role(r.oid, p.oid, 'MEMBER')
                     AND (p.rolsuper OR p.rolcreaterole OR p.rolname = ANY($2::text[]))) AS powers
       FROM pg_catalog.pg_roles r WHERE r.rolname = $1`,
    [role, PRIVILEGED_ROLES],
  );
  const r = rows[0] as { rolsuper: boolean; rolcreaterole: boolean; rolreplication: boolean; rolcanlogin: boolean; powers: string[] };
  if (!r) return `role ${role} does not exist`;
  if (r.rolsuper) return `role ${role} is a superuser`;
  if (r.rolcreaterole) return `role ${role} can create roles (and so grant itself any power)`;
  if (r.rolreplication) return `role ${role} is a replication role`;
  if (r.powers.length > 0) return `role ${role} is a member of ${r.powers.join(', ')}`;
  if (!r.rolcanlogin) return `role ${role} cannot log in`;
  return null;
}

/** The role that owns `database` on the server (null when there is no such database). */
export async function databaseOwner(query: Query, database: string): Promise<string | null> {
  const { rows } = await query('SELECT pg_catalog.pg_get_userbyid(datdba)::text AS owner FROM pg_catalog.pg_database WHERE datname = $1', [
    database,
  ]);
  return (rows[0]?.owner as string | undefined) ?? null;
}

/** A UserError unless `role` may be the service's role inside customer databases. */
export async function assertTenantRole(query: Query, role: string, what: string): Promise<void> {
  const refusal = await tenantRoleRefusal(query, role);
  if (refusal) {
    throw new UserError(
      `${what}: ${refusal}. The service works inside customer databases only as the role that owns them, ` +
        'which must be an ordinary login role (not a superuser, no CREATEROLE or REPLICATION, not a member of such a role ' +
        'or of a role that reads or writes the server files): set owner_role on the database template',
    );
  }
}

export interface TenantSessionOptions {
  /** The deadline of the whole piece of work, in milliseconds. */
  deadlineMs: number;
  /** The role to use; null: the database's owner (found on the maintenance connection). */
  role: TenantRole | null;
  /** For messages: what the database is (e.g. "Database acme_7 of subscription 7"). */
  what: string;
  /**
   * The database must still be this one (its cluster and oid), checked inside the session; or a
   * check run first on the maintenance connection that answers it (a subscription's, say).
   */
  identity?: DatabaseIdentity | ((maintenance: Query) => Promise<DatabaseIdentity>);
  /**
   * The server's maintenance connection, kept open by the caller for many tenants (a usage round):
   * the same checks run on it, one backend fewer per tenant. None: one is opened for this work.
   */
  maintenance?: Query;
}

/**
 * Runs `work` inside `database` as its tenant role, once that role is known to hold no more power
 * than the tenant has; the session is ended from outside when `deadlineMs` passes.
 */
export async function insideTenant<T>(
  secretBox: SecretBox,
  server: PostgresqlServerRecord,
  database: string,
  work: (query: Query) => Promise<T>,
  opts: TenantSessionOptions,
): Promise<T> {
  if (opts.maintenance) return asTenant(secretBox, server, database, work, opts, opts.maintenance);
  const admin = await connect(secretBox, server, 'postgres', `PostgreSQL at ${where(server)}`);
  try {
    return await asTenant(secretBox, server, database, work, opts, (sql, params) => admin.query(sql, params));
  } finally {
    // A connection that fails to close is closed all the same: the server ends a session whose socket is gone.
    await admin.end().catch(() => {});
  }
}

/** insideTenant's work once a maintenance connection is there: the checks on it, then the tenant's session. */
async function asTenant<T>(
  secretBox: SecretBox,
  server: PostgresqlServerRecord,
  database: string,
  work: (query: Query) => Promise<T>,
  opts: TenantSessionOptions,
  adminQuery: Query,
): Promise<T> {
  const identity = typeof opts.identity === 'function' ? await opts.identity(adminQuery) : opts.identity;
  const role = opts.role?.role ?? (await databaseOwner(adminQuery, database));
  if (!role) throw new UserError(`${opts.what}: database ${database} does not exist on ${where(server)}`);
  await assertTenantRole(adminQuery, role, opts.what);
  const asTenantRole = { ip: server.ip, port: server.port, username: role, password: opts.role?.password ?? null };
  const client = await connect(secretBox, asTenantRole, database, `${opts.what} (as ${role})`);
  return underDeadline(client, adminQuery, work, { ...opts, identity });
}

async function connect(secretBox: SecretBox, server: PostgresqlServerRecord, database: string, what: string) {
  try {
    return (await connectPostgresqlServer(secretBox, server, database)).client;
  } catch (err) {
    throw new UserError(`Could not connect to ${what} at ${where(server)}: ${(err as Error).message}`);
  }
}

async function underDeadline<T>(
  client: pg.Client,
  admin: Query,
  work: (query: Query) => Promise<T>,
  opts: TenantSessionOptions & { identity?: DatabaseIdentity },
) {
  let expired = false;
  let pid: number | null = null;
  // From the moment the session exists: the tenant's settings apply inside it, not to the maintenance connection.
  const timer = setTimeout(() => {
    expired = true;
    const ended = pid === null ? Promise.resolve() : admin('SELECT pg_catalog.pg_terminate_backend($1)', [pid]).then(() => {});
    // The work is told it ran out of time (TenantRefusal below) whatever these do: ending the client
    // closes the session from this side when ending its backend failed.
    ended.catch(() => {}).finally(() => client.end().catch(() => {}));
  }, opts.deadlineMs);
  try {
    // One round trip, in this order: the search_path first, before any name is looked up (the
    // tenant's role or database may set its own); who and where the session is; its deadline inside.
    const results = (await client.query(
      `SET search_path = pg_catalog, pg_temp;
       SELECT pg_catalog.pg_backend_pid() AS pid, pg_catalog.current_setting('is_superuser') AS superuser,
              d.oid::text AS oid, (SELECT system_identifier::text FROM pg_catalog.pg_control_system()) AS cluster
         FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database();
       SET statement_timeout = ${Math.ceil(opts.deadlineMs)}`,
    )) as unknown as pg.QueryResult[];
    const session = results[1]!.rows[0] as { pid: number; superuser: string; oid: string; cluster: string };
    pid = session.pid;
    if (session.superuser !== 'off') throw new UserError(`${opts.what}: the session is a superuser's; nothing was done`);
    if (opts.identity && (String(opts.identity.oid) !== session.oid || opts.identity.systemIdentifier !== session.cluster)) {
      throw new UserError(`${opts.what}: the database under that name is no longer the one the service made; nothing was done`);
    }
    return await work((sql, params) => client.query(sql, params));
  } catch (err) {
    if (expired) {
      throw new TenantRefusal(
        `${opts.what}: not done within ${Math.round(opts.deadlineMs / 1000)} s (a lock or a setting of the tenant's?): its session was ended`,
      );
    }
    throw err;
  } finally {
    clearTimeout(timer);
    // A connection that fails to close is closed all the same: the server ends a session whose socket is gone.
    await client.end().catch(() => {});
  }
}

export type LockMode = 'ACCESS SHARE' | 'ROW EXCLUSIVE';

/**
 * Locks Odoo's `tables` (in schema public) for the rest of the transaction and checks each is an
 * ordinary table of the session's role with no rules, no triggers but PostgreSQL's own (foreign
 * keys) and no forced row security. Call inside a transaction, before using them.
 */
export async function lockTenantTables(query: Query, tables: readonly string[], mode: LockMode): Promise<void> {
  await query(`LOCK TABLE ${tables.map((t) => `public.${quoteIdent(t)}`).join(', ')} IN ${mode} MODE`);
  const { rows } = await query(
    `SELECT c.relname::text AS name, c.relkind::text AS kind, c.relhasrules AS rules, c.relforcerowsecurity AS forced,
            pg_catalog.pg_get_userbyid(c.relowner)::text AS owner, current_user::text AS me,
            EXISTS (SELECT 1 FROM pg_catalog.pg_trigger t WHERE t.tgrelid = c.oid AND NOT t.tgisinternal) AS triggers
       FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = 'public' AND c.relname = ANY($1::text[])`,
    [tables],
  );
  const problems = rows.flatMap((r) => {
    const why: string[] = [];
    if (r.kind !== 'r') why.push('not an ordinary table');
    if (r.rules) why.push('has rules');
    if (r.triggers) why.push('has triggers');
    if (r.forced) why.push('forces row security');
    if (r.owner !== r.me) why.push(`is owned by ${r.owner}, not ${r.me}`);
    return why.length > 0 ? [`${r.name} ${why.join(', ')}`] : [];
  });
  if (problems.length > 0) {
    throw new TenantRefusal(`The database's tables are not as Odoo makes them: ${problems.join('; ')}. Nothing was done`);
  }
}
