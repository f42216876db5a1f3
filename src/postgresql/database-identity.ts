// Which database a name means. A database name alone can be pointed anywhere (a server record that
// moved, a host name that resolves elsewhere, a database dropped and made again under the same
// name), so a database the service acts on is identified by its cluster's system identifier and its
// oid. The service's own database and PostgreSQL's own are never a template, a target or a source.
import type { Db } from '../core/db.js';

export interface DatabaseIdentity {
  /** pg_control_system().system_identifier, as text (a 64-bit number). */
  systemIdentifier: string;
  oid: bigint;
}

export interface FoundDatabase extends DatabaseIdentity {
  allowConnections: boolean;
  connectionLimit: number;
}

type Query = (sql: string, params?: unknown[]) => Promise<{ rows: Record<string, unknown>[] }>;

/** PostgreSQL's own databases: never copied, never a customer's. */
export const SYSTEM_DATABASES: readonly string[] = ['postgres', 'template0', 'template1'];

export const sameDatabase = (a: DatabaseIdentity, b: DatabaseIdentity) => a.systemIdentifier === b.systemIdentifier && a.oid === b.oid;

/** The cluster's system identifier (readable by any role). */
export async function clusterIdentifier(query: Query): Promise<string> {
  const { rows } = await query('SELECT system_identifier::text AS id FROM pg_control_system()');
  return String(rows[0]!.id);
}

/** The database named `name` on the connected cluster, or null when there is none. */
export async function findDatabase(query: Query, name: string): Promise<FoundDatabase | null> {
  const { rows } = await query(
    `SELECT (SELECT system_identifier::text FROM pg_control_system()) AS cluster, oid::text AS oid, datallowconn, datconnlimit
       FROM pg_database WHERE datname = $1`,
    [name],
  );
  const row = rows[0] as { cluster: string; oid: string; datallowconn: boolean; datconnlimit: number } | undefined;
  if (!row) return null;
  return { systemIdentifier: row.cluster, oid: BigInt(row.oid), allowConnections: row.datallowconn, connectionLimit: row.datconnlimit };
}

const own = new WeakMap<object, Promise<DatabaseIdentity & { name: string }>>();

/** The service's own database (read once per client). */
export function ownDatabase(db: Db): Promise<DatabaseIdentity & { name: string }> {
  let known = own.get(db);
  if (!known) {
    known = db.$queryRaw<{ cluster: string; oid: string; name: string }[]>`
        SELECT (SELECT system_identifier::text FROM pg_control_system()) AS cluster, oid::text AS oid, datname AS name
          FROM pg_database WHERE datname = current_database()`.then(([row]) => ({
      systemIdentifier: row!.cluster,
      oid: BigInt(row!.oid),
      name: row!.name,
    }));
    known.catch(() => own.delete(db));
    own.set(db, known);
  }
  return known;
}
