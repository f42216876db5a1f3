// What a test run (or a bench) made on the machine's PostgreSQL cluster besides its own svc
// databases: the Odoo hosts' roles, customer databases and their own roles, standbys, staging and
// moved copies, templates. Found through the records of the run's svc databases (so a run beside
// it, with records of its own, is left alone) and dropped only if it was not there when the run
// began; also when the run failed half-way (global teardown runs anyway).
import pg from 'pg';
import { installationPrefixOf } from '../../src/instances/standby-pool.js';
import { TENANT_ROLE } from './odoo-template.js';
import { adminQuery, databaseUrl } from './pg.js';

/** The databases and roles of the cluster at one moment. */
export interface ClusterSnapshot {
  databases: Set<string>;
  roles: Set<string>;
}

export async function clusterSnapshot(): Promise<ClusterSnapshot> {
  const [dbs, roles] = await Promise.all([
    adminQuery<{ datname: string }>('SELECT datname FROM pg_database'),
    adminQuery<{ rolname: string }>('SELECT rolname FROM pg_roles'),
  ]);
  return { databases: new Set(dbs.map((d) => d.datname)), roles: new Set(roles.map((r) => r.rolname)) };
}

/** Each query answers one column `name`; a table a failed migration never made counts as empty. */
const RECORDED_DATABASES = [
  'SELECT database_name AS name FROM subscriptions WHERE database_name IS NOT NULL',
  'SELECT database_name AS name FROM standby_databases',
  'SELECT database_name AS name FROM staging_instances',
  'SELECT database_name AS name FROM subscription_moves',
  'SELECT template_db_name AS name FROM database_templates',
  'SELECT database_name AS name FROM database_template_copies',
  // Safety copies (rollouts, template updates, staging refreshes) a run may leave recorded.
  'SELECT safety_copy AS name FROM rollout_tenants WHERE safety_copy IS NOT NULL',
  'SELECT update_safety_copy AS name FROM database_templates WHERE update_safety_copy IS NOT NULL',
  'SELECT safety_copy AS name FROM staging_instances WHERE safety_copy IS NOT NULL',
];
const RECORDED_ROLES = [
  'SELECT odoo_db_user AS name FROM root_servers WHERE odoo_db_user IS NOT NULL',
  'SELECT database_role AS name FROM subscriptions WHERE database_role IS NOT NULL',
  'SELECT owner_role AS name FROM database_templates WHERE owner_role IS NOT NULL',
];

interface Recorded {
  databases: Set<string>;
  roles: Set<string>;
  /** svc_standby_<installation>_: the standbys of this svc database, recorded or not (yet). */
  prefixes: Set<string>;
}

async function recordedIn(svcDatabase: string, into: Recorded) {
  const client = new pg.Client({ connectionString: databaseUrl(svcDatabase) });
  await client.connect();
  try {
    const names = async (sql: string) => {
      try {
        return (await client.query<{ name: string }>(sql)).rows.map((r) => r.name);
      } catch (err) {
        if ((err as { code?: string }).code === '42P01') return []; // no such table
        throw err;
      }
    };
    for (const sql of RECORDED_DATABASES) for (const n of await names(sql)) into.databases.add(n);
    for (const sql of RECORDED_ROLES) for (const n of await names(sql)) into.roles.add(n);
    const { rows } = await client.query<{ cluster: string; oid: string }>(
      `SELECT (SELECT system_identifier::text FROM pg_control_system()) AS cluster, oid::text AS oid
         FROM pg_database WHERE datname = current_database()`,
    );
    into.prefixes.add(installationPrefixOf(rows[0]!.cluster, rows[0]!.oid));
  } finally {
    await client.end();
  }
}

/**
 * Drops the svc databases `svcDatabases`, what they recorded as made on this cluster and the
 * databases the recorded roles own, all when absent from `before`; then those roles. The tests'
 * shared tenant role is never one of them (every file's templates are its). Answers what could
 * not be dropped (with PostgreSQL's reason), so the caller says so instead of leaving it silently.
 */
export async function dropWhatWasMade(svcDatabases: string[], before: ClusterSnapshot): Promise<string[]> {
  const recorded: Recorded = { databases: new Set(), roles: new Set(), prefixes: new Set() };
  const problems: string[] = [];
  for (const name of svcDatabases) {
    await recordedIn(name, recorded).catch((err: Error & { code?: string }) => {
      if (err.code !== '3D000') problems.push(`${name}: records not read (${err.message})`); // 3D000: dropped already
    });
  }
  const now = await adminQuery<{ datname: string; owner: string }>(
    'SELECT d.datname, r.rolname AS owner FROM pg_database d JOIN pg_roles r ON r.oid = d.datdba',
  );
  const roles = new Set([...recorded.roles].filter((r) => !before.roles.has(r) && r !== TENANT_ROLE));
  const made = now.filter(
    ({ datname, owner }) =>
      !before.databases.has(datname) &&
      (svcDatabases.includes(datname) ||
        recorded.databases.has(datname) ||
        [...recorded.prefixes].some((p) => datname.startsWith(p)) ||
        roles.has(owner)),
  );
  // A customer database's own role (svc_db_<oid>) goes with it.
  for (const { owner } of made) if (owner.startsWith('svc_db_') && !before.roles.has(owner)) roles.add(owner);

  for (const { datname } of made) {
    await adminQuery(`DROP DATABASE IF EXISTS "${datname}" WITH (FORCE)`).catch((err: Error) =>
      problems.push(`database ${datname}: ${err.message}`),
    );
  }
  for (const role of roles) {
    await adminQuery(`DROP ROLE IF EXISTS "${role}"`).catch((err: Error) => problems.push(`role ${role}: ${err.message}`));
  }
  return problems;
}
