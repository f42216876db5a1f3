// The three measurements of a usage round: the sizes of every subscription database of a PostgreSQL
// server in one query, the active users and limited records inside one running database, and the
// filestore sizes of every customer of an Odoo host in one SSH command. A measurement that cannot
// be taken is reported with its reason; it never stops the others.
import type { AppContext } from '../context.js';
import { UserError } from '../core/errors.js';
import { shellQuote } from '../core/ssh.js';
import type { PostgresqlServer, RootServer, Subscription } from '../generated/prisma/client.js';
import { filestorePath, lockTenantTables, onServer, serverWhere, writeRoundParams } from '../instances/index.js';
import { clusterIdentifier, quoteIdent } from '../postgresql/index.js';
import { basePathOf, openRemoteSession, requireConfirmed } from '../servers/index.js';
import { onInstance, type SharedSession } from '../subscriptions/index.js';

type Deps = Pick<AppContext, 'db' | 'secretBox' | 'config'>;
type Tenant = Pick<Subscription, 'id' | 'database_name' | 'database_system_identifier' | 'database_oid'>;

/** A size per subscription id, or the reason it could not be read. */
export type Sizes = Map<number, number | { missing: string }>;

/**
 * pg_database_size of each tenant's database, found by its oid on the cluster it was created on
 * (a name can be pointed elsewhere; an oid on a cluster cannot).
 */
export async function databaseSizes(deps: Deps, server: PostgresqlServer, tenants: readonly Tenant[]): Promise<Sizes> {
  return onServer(deps.secretBox, server, async (query) => {
    const cluster = await clusterIdentifier(query);
    const { rows } = await query(
      'SELECT oid::text AS oid, pg_database_size(oid)::text AS size FROM pg_database WHERE oid = ANY($1::oid[])',
      [tenants.map((t) => String(t.database_oid))],
    );
    const byOid = new Map(rows.map((r) => [String(r.oid), Number(r.size)]));
    const sizes: Sizes = new Map();
    for (const t of tenants) {
      const size = byOid.get(String(t.database_oid));
      if (t.database_system_identifier !== cluster)
        sizes.set(t.id, { missing: `${serverWhere(server)} is not the cluster ${t.database_name} was created on` });
      else if (size === undefined)
        sizes.set(t.id, { missing: `database ${t.database_name} (oid ${t.database_oid}) not found on ${serverWhere(server)}` });
      else sizes.set(t.id, size);
    }
    return sizes;
  });
}

/** Odoo's model name as its table: res.partner → res_partner. */
const TABLE_OF_MODEL = /^[a-z][a-z0-9_]*(\.[a-z0-9_]+)*$/;

export interface InstanceCounts {
  active_users: number;
  record_counts: Record<string, number>;
  missing: Record<string, string>;
  /** Package parameters found changed inside the instance and put back: key → the value found. */
  restored: Record<string, string | null>;
  /** Schemas besides Odoo's (public) and PostgreSQL's own, by name: made by the tenant's SQL. */
  other_schemas: string[];
}

/**
 * Active internal users, without __system__ (id 1), as Odoo decides it (its share field is computed
 * from this): members of base.group_user, directly or through a group implying it (19.0 stores only
 * the groups given; 18.0 stores the implied ones too). Not the stored share column, which a
 * tenant's SQL (or an ORM write the addon now refuses) can set on an internal user.
 */
const INTERNAL_USERS = `WITH RECURSIVE internal(gid) AS (
    SELECT res_id FROM public.ir_model_data WHERE module = 'base' AND name = 'group_user' AND model = 'res.groups'
    UNION
    SELECT r.gid FROM public.res_groups_implied_rel r JOIN internal i ON r.hid = i.gid
  )
  SELECT count(*)::int FROM public.res_users u
   WHERE u.active AND u.id <> 1
     AND EXISTS (SELECT 1 FROM public.res_groups_users_rel m JOIN internal i ON i.gid = m.gid WHERE m.uid = u.id)`;
/** The tables INTERNAL_USERS reads. */
const USER_TABLES = ['res_users', 'res_groups_users_rel', 'res_groups_implied_rel', 'ir_model_data'];

/**
 * Schemas that are neither Odoo's (public) nor PostgreSQL's own (kind 'schema'). Odoo makes none; a
 * tenant's SQL (a code server action) can, e.g. one named after the role it connects as, which
 * comes before public in the default search_path and can shadow Odoo's tables for code that does not
 * name public. With them, which of the tables $1 exist in public (kind 'table'): one look.
 */
const SCHEMAS_AND_TABLES = `SELECT 'schema' AS kind, nspname::text AS name FROM pg_catalog.pg_namespace
  WHERE nspname NOT IN ('public', 'pg_catalog', 'information_schema', 'pg_toast')
    AND nspname !~ '^pg_(toast_)?temp_[0-9]+$'
  UNION ALL
  SELECT 'table', c.relname::text FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
   WHERE n.nspname = 'public' AND c.relname = ANY($1::text[])
  ORDER BY 1, 2`;

/**
 * Inside one running database: the schemas that are not Odoo's (`other_schemas`), then in one
 * read-only snapshot internal active users (INTERNAL_USERS) and the rows of each model the package
 * limits, in one statement. A model without a table is reported missing, not an error. The tables
 * are locked and checked first (Odoo's plain tables, no view, rule or row security that could forge
 * a count; see tenant-session.ts). Then, in a second transaction (writeRoundParams): `storageUsed`
 * (database and filestore, when both were measured) as svc.storage_used_bytes, for svc's addon to
 * refuse new files when full, and `expected` (the package parameters as svc last wrote them; null
 * while a sync is pending): any found changed are put back (`restored`). A failure there is
 * reported as missing `storage_used_bytes` (when one was to be written) and `package_params` (when
 * checked), and takes nothing else with it. `shared`: the round's placement and maintenance connection.
 * About a dozen statements in all: the cost of a round is mostly its round trips.
 */
export async function instanceCounts(
  deps: Deps,
  sub: Subscription,
  models: readonly string[],
  storageUsed: number | null = null,
  expected: Record<string, string | null> | null = null,
  shared: SharedSession = {},
): Promise<InstanceCounts> {
  return onInstance(
    deps,
    sub,
    async (query) => {
      const counts: InstanceCounts = { active_users: 0, record_counts: {}, missing: {}, restored: {}, other_schemas: [] };
      const tableOf = new Map<string, string>();
      for (const model of models) {
        if (TABLE_OF_MODEL.test(model)) tableOf.set(model, model.replaceAll('.', '_'));
        else counts.missing[`model:${model}`] = 'not an Odoo model name';
      }
      const { rows } = await query(SCHEMAS_AND_TABLES, [[...tableOf.values()]]);
      const present = new Set(rows.filter((r) => r.kind === 'table').map((r) => String(r.name)));
      counts.other_schemas = rows.filter((r) => r.kind === 'schema').map((r) => String(r.name));
      for (const [model, table] of tableOf) {
        if (present.has(table)) continue;
        counts.missing[`model:${model}`] = `no table ${table}`;
        tableOf.delete(model);
      }
      const limited = [...tableOf];
      await query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      try {
        await lockTenantTables(query, [...new Set([...USER_TABLES, ...tableOf.values()])], 'ACCESS SHARE');
        const columns = limited.map(([, table], i) => `, (SELECT count(*) FROM public.${quoteIdent(table)})::bigint::text AS m${i}`);
        const { rows: found } = await query(`SELECT (${INTERNAL_USERS}) AS users${columns.join('')}`);
        counts.active_users = Number(found[0]!.users);
        for (const [i, [model]] of limited.entries()) counts.record_counts[model] = Number(found[0]![`m${i}`]);
        await query('COMMIT');
      } catch (err) {
        // The error that led here is the one thrown; a ROLLBACK that fails means the connection is gone, which ends the transaction too.
        await query('ROLLBACK').catch(() => {});
        throw err;
      }
      if (storageUsed !== null || expected) {
        await query('BEGIN');
        try {
          counts.restored = await writeRoundParams(query, storageUsed, expected);
          await query('COMMIT');
        } catch (err) {
          // The error that led here is the one reported; a ROLLBACK that fails means the connection is gone, which ends the transaction too.
          await query('ROLLBACK').catch(() => {});
          if (storageUsed !== null) counts.missing.storage_used_bytes = `svc.storage_used_bytes not written: ${(err as Error).message}`;
          if (expected) counts.missing.package_params = `svc.* parameters not checked: ${(err as Error).message}`;
        }
      }
      return counts;
    },
    undefined,
    shared,
  );
}

/**
 * The filestore of each database on the Odoo host, in one command: `du` in bytes, counting hard
 * links in every directory (a customer's files count as theirs even when shared with the template).
 */
export async function filestoreSizes(deps: Deps, server: RootServer, databases: readonly string[]): Promise<Map<string, number>> {
  requireConfirmed(server);
  const dirs = databases.map((d) => shellQuote(filestorePath(basePathOf(deps.config, server), d)));
  const session = await openRemoteSession(deps, server, { user_id: null }).catch((err: Error) => {
    throw new UserError(`Odoo host ${server.name ?? server.ip} (root server ${server.id}) could not be reached: ${err.message}`);
  });
  try {
    // A directory that does not exist is left out of the answer (du says so on stderr).
    const res = await session.check(`du -sbl -- ${dirs.join(' ')} 2>/dev/null; true`, `du on root server ${server.id}`, {
      timeoutMs: 5 * 60_000,
      label: `du -sbl of ${databases.length} filestore(s)`,
    });
    const sizes = new Map<string, number>();
    for (const line of res.stdout.split('\n')) {
      const match = /^(\d+)\t(.+)$/.exec(line);
      if (match) sizes.set(match[2]!.slice(match[2]!.lastIndexOf('/') + 1), Number(match[1]));
    }
    return sizes;
  } finally {
    session.close();
  }
}
