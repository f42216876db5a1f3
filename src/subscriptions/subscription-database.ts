// The customer database on its PostgreSQL server (the server of the subscription's database
// template, DESIGN §9): who may connect, whether it exists, and dropping it. Every change is an
// action-log row (`database`) written before the statements run.
//
// Suspension is ALLOW_CONNECTIONS false (nobody connects, superusers included) with CONNECTION
// LIMIT 0. A backup of a closed database opens it with ALLOW_CONNECTIONS true alone: the limit 0
// still keeps customers' ordinary roles out while the backup server's superuser dumps it.
import type { AppContext } from '../context.js';
import type { Db, DbTx } from '../core/db.js';
import { UserError } from '../core/errors.js';
import { startActionLog } from '../core/action-log.js';
import type { Subscription } from '../generated/prisma/client.js';
import { connectPostgresqlServer, quoteIdent } from '../postgresql/postgresql-connection.js';

export type Connections = 'open' | 'closed' | 'superusers';

const OPTIONS: Record<Connections, string> = {
  open: 'ALLOW_CONNECTIONS true CONNECTION LIMIT -1',
  closed: 'ALLOW_CONNECTIONS false CONNECTION LIMIT 0',
  superusers: 'ALLOW_CONNECTIONS true CONNECTION LIMIT 0',
};

/** ALTER DATABASE runs under a subscription's row lock: it must be short. Dropping a large database takes longer. */
const STATEMENT_TIMEOUT = '30s';
const DROP_TIMEOUT = '15min';

type Query = (sql: string, params?: unknown[]) => Promise<{ rows: Record<string, unknown>[] }>;

export interface Who {
  userId: number | null;
  jobId: string | null;
}

type Deps = Pick<AppContext, 'db' | 'box'>;
type Sub = Pick<Subscription, 'id' | 'database_name' | 'database_template_id' | 'database_created_at'>;

/** A UserError unless the subscription's deployment created a database that is still there. */
export function assertOwnDatabase(sub: Sub): asserts sub is Sub & { database_name: string } {
  if (!sub.database_name) throw new UserError(`Subscription ${sub.id} has no database_name`);
  if (!sub.database_created_at) {
    throw new UserError(`Subscription ${sub.id} has no database of its own: no deployment of it created ${sub.database_name}`);
  }
}

/**
 * The PostgreSQL server the subscription's database lives on, and its name; a UserError when unknown.
 * Only a database the subscription's deployment created is ever acted on (never another database a
 * name could be set to).
 */
export async function databaseLocation(db: Db | DbTx, sub: Sub) {
  assertOwnDatabase(sub);
  const template = sub.database_template_id
    ? await db.databaseTemplate.findUnique({ where: { id: sub.database_template_id }, include: { postgresql_server: true } })
    : null;
  if (!template) throw new UserError(`Subscription ${sub.id} has no database template, so the server of its database is unknown`);
  const server = template.postgresql_server;
  return { server, name: sub.database_name, where: `${server.username ?? 'postgres'}@${server.ip}:${server.port}` };
}

type Location = Awaited<ReturnType<typeof databaseLocation>>;

/** Runs `work` on a connection to the server's `postgres` database; connection failures are UserErrors. */
async function onServer<T>(deps: Deps, at: Location, work: (query: Query) => Promise<T>, timeout = STATEMENT_TIMEOUT) {
  let client;
  try {
    ({ client } = await connectPostgresqlServer(deps.box, at.server));
  } catch (err) {
    throw new UserError(`Could not connect to PostgreSQL at ${at.where}: ${(err as Error).message}`);
  }
  try {
    await client.query(`SET statement_timeout = '${timeout}'`);
    return await work((sql, params) => client.query(sql, params));
  } finally {
    await client.end().catch(() => {});
  }
}

/** A remote change with its action-log row; a failure is a UserError carrying PostgreSQL's message. */
async function change(
  deps: Deps,
  sub: Sub,
  at: Location,
  who: Who,
  statements: string[],
  work: (query: Query) => Promise<string>,
  timeout?: string,
) {
  const step = await startActionLog(deps.db, {
    model_name: 'svc.subscription',
    rec_id: sub.id,
    action_type: 'database',
    input_text: `${statements.join(';\n')} -- on ${at.where}`,
    user_id: who.userId,
    job_id: who.jobId,
  });
  try {
    const result = await onServer(deps, at, work, timeout);
    await step.finish('success', result);
    return result;
  } catch (err) {
    const message = err instanceof UserError ? err.message : `PostgreSQL at ${at.where}: ${(err as Error).message}`;
    await step.finish('failure', message);
    throw new UserError(message);
  }
}

/** Sets who may connect; closing also ends the sessions open on the database. Answers what was done. */
export async function setConnections(deps: Deps, sub: Sub, mode: Connections, who: Who): Promise<string> {
  const at = await databaseLocation(deps.db, sub);
  const alter = `ALTER DATABASE ${quoteIdent(at.name)} WITH ${OPTIONS[mode]}`;
  const terminate = 'SELECT count(pg_terminate_backend(pid))::int AS ended FROM pg_stat_activity WHERE datname = $1';
  return change(deps, sub, at, who, mode === 'closed' ? [alter, terminate] : [alter], async (query) => {
    await query(alter);
    if (mode !== 'closed') return `Database ${at.name} on ${at.where}: ${OPTIONS[mode]}`;
    const { rows } = await query(terminate, [at.name]);
    return `Database ${at.name} on ${at.where} closed to connections; ${rows[0]!.ended} open session(s) ended`;
  });
}

export interface DatabaseStatus {
  exists: boolean;
  /** Opened for a backup (superusers only) and not closed again. */
  openForSuperusers: boolean;
  allowConnections: boolean;
}

/** Whether the database exists and who may connect to it (a read: no action-log row). */
export async function databaseStatus(deps: Deps, sub: Sub): Promise<DatabaseStatus> {
  const at = await databaseLocation(deps.db, sub);
  return onServer(deps, at, async (query) => {
    const { rows } = await query('SELECT datallowconn, datconnlimit FROM pg_database WHERE datname = $1', [at.name]);
    const row = rows[0] as { datallowconn: boolean; datconnlimit: number } | undefined;
    return {
      exists: row !== undefined,
      allowConnections: row?.datallowconn ?? false,
      openForSuperusers: row?.datallowconn === true && row.datconnlimit === 0,
    };
  });
}

/** DROP DATABASE ... WITH (FORCE): open sessions are ended, the database is gone when it answers. */
export async function dropDatabase(deps: Deps, sub: Sub, who: Who): Promise<string> {
  const at = await databaseLocation(deps.db, sub);
  const statement = `DROP DATABASE ${quoteIdent(at.name)} WITH (FORCE)`;
  return change(
    deps,
    sub,
    at,
    who,
    [statement],
    async (query) => {
      await query(statement);
      return `Database ${at.name} dropped on ${at.where}`;
    },
    DROP_TIMEOUT,
  );
}
