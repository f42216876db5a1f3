// The customer database on its PostgreSQL server (the server of the subscription's database
// template): who may connect, whether it exists, and dropping it. Every change is an
// action-log row (`database`) written before the statements run; it names the operation it belongs
// to first (`suspend: ALTER DATABASE …`), so that searching the log for the operation finds it.
//
// Only the database the subscription's deployment created is ever acted on: before every statement
// the database found under its name must be on the cluster, and have the oid, recorded at creation.
//
// Suspension is ALLOW_CONNECTIONS false (nobody connects, superusers included) with CONNECTION
// LIMIT 0. A backup of a closed database opens it with ALLOW_CONNECTIONS true alone: the limit 0
// still keeps customers' ordinary roles out while the backup server's superuser dumps it.
import type { AppContext } from '../context.js';
import type { Db, DbTx } from '../core/db.js';
import { UserError } from '../core/errors.js';
import { startActionLog } from '../core/action-log.js';
import type { Subscription } from '../generated/prisma/client.js';
import { actorFields, onSubscription, type Actor } from './subscription-audit.js';
import {
  quoteIdent,
  clusterIdentifier,
  findDatabase,
  ownDatabase,
  sameDatabase,
  SYSTEM_DATABASES,
  type DatabaseIdentity,
  type FoundDatabase,
} from '../postgresql/index.js';
import {
  END_SESSIONS,
  endSessions,
  insideTenant,
  loadPlacement,
  LONG_STATEMENT_TIMEOUT,
  onServer,
  type Placement,
  serverWhere,
} from '../instances/index.js';

export type Connections = 'open' | 'closed' | 'superusers';

const OPTIONS: Record<Connections, string> = {
  open: 'ALLOW_CONNECTIONS true CONNECTION LIMIT -1',
  closed: 'ALLOW_CONNECTIONS false CONNECTION LIMIT 0',
  superusers: 'ALLOW_CONNECTIONS true CONNECTION LIMIT 0',
};

type Query = (sql: string, params?: unknown[]) => Promise<{ rows: Record<string, unknown>[] }>;

type Deps = Pick<AppContext, 'db' | 'secretBox'>;
type InstanceDeps = Pick<AppContext, 'db' | 'secretBox' | 'config'>;
type Sub = Pick<
  Subscription,
  'id' | 'database_name' | 'database_template_id' | 'database_created_at' | 'database_system_identifier' | 'database_oid' | 'database_role'
>;

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
export async function databaseLocation(db: Db | DbTx, sub: Sub, placement?: Placement) {
  assertOwnDatabase(sub);
  const { pg: server, tenantRole } = placement ?? (await loadPlacement(db, sub.id));
  return { server, tenantRole, name: sub.database_name, where: serverWhere(server) };
}

type Location = Awaited<ReturnType<typeof databaseLocation>>;

interface RemoteOptions {
  timeout?: string;
  /** The transaction that holds the subscription's row lock, when one does: writes to the row go through it. */
  tx?: DbTx;
}

/**
 * Runs `work` on the subscription's server once the database under its name is known to be the one
 * its deployment created (`found`; null when no database has that name any more). Anything else
 * there (another cluster, a database made again under the name, the service's own) is a UserError
 * and nothing is done.
 */
async function onOwnDatabase<T>(
  deps: Deps,
  sub: Sub,
  at: Location,
  work: (query: Query, found: FoundDatabase | null) => Promise<T>,
  opts: RemoteOptions = {},
) {
  return onServer(
    deps.secretBox,
    at.server,
    async (query) => {
      const { found } = await checkOwnDatabase(deps, sub, at, query, opts.tx);
      return work(query, found);
    },
    { timeout: opts.timeout },
  );
}

/** The checks of onOwnDatabase, on a connection to the subscription's server. */
async function checkOwnDatabase(deps: Deps, sub: Sub, at: Location, query: Query, tx?: DbTx) {
  const found = await findDatabase(query, at.name);
  const cluster = found?.systemIdentifier ?? (await clusterIdentifier(query));
  const created = await createdIdentity(tx ?? deps.db, sub, at, found);
  const refuse = (why: string) => new UserError(`${why}: nothing was done`);
  if (created && cluster !== created.systemIdentifier) {
    throw refuse(
      `PostgreSQL at ${at.where} is not the cluster database ${at.name} was created on (system identifier ${cluster}, created on ${created.systemIdentifier})`,
    );
  }
  if (found && created && found.oid !== created.oid) {
    throw refuse(
      `Database ${at.name} on ${at.where} is not the one the deployment of subscription ${sub.id} created (oid ${found.oid}, created as ${created.oid})`,
    );
  }
  if (found && (SYSTEM_DATABASES.includes(at.name) || sameDatabase(found, await ownDatabase(deps.db)))) {
    throw refuse(`Database ${at.name} on ${at.where} is the service's own or PostgreSQL's own database`);
  }
  return { found, created };
}

/** The identity of the subscription's database when it is there and its own; a UserError otherwise. */
async function existingIdentity(deps: Deps, sub: Sub, at: Location, query: Query, tx?: DbTx): Promise<DatabaseIdentity> {
  const { found, created } = await checkOwnDatabase(deps, sub, at, query, tx);
  if (!found || !created) throw new UserError(`Database ${at.name} does not exist on ${at.where}`);
  return created;
}

/** onOwnDatabase for work that needs the database there: its absence is a UserError. */
function onExistingDatabase<T>(deps: Deps, sub: Sub, at: Location, work: (query: Query) => Promise<T>, opts: RemoteOptions = {}) {
  return onServer(
    deps.secretBox,
    at.server,
    async (query) => {
      await existingIdentity(deps, sub, at, query, opts.tx);
      return work(query);
    },
    { timeout: opts.timeout },
  );
}

/**
 * The identity recorded at creation. A subscription deployed before identities were recorded adopts
 * the database it finds, but only when its server record has not changed since the database was
 * created (a record moved meanwhile could name anybody's database). Null: nothing there to adopt.
 */
async function createdIdentity(db: Db | DbTx, sub: Sub, at: Location, found: FoundDatabase | null): Promise<DatabaseIdentity | null> {
  if (sub.database_system_identifier && sub.database_oid !== null) {
    return { systemIdentifier: sub.database_system_identifier, oid: sub.database_oid };
  }
  if (!found) return null;
  if (at.server.updated_at > sub.database_created_at!) {
    throw new UserError(
      `Subscription ${sub.id} was deployed before databases were identified, and PostgreSQL server ${at.server.id} was changed since: ` +
        `database ${at.name} on ${at.where} cannot be told to be the one its deployment created; nothing was done`,
    );
  }
  await db.subscription.update({
    where: { id: sub.id },
    data: { database_system_identifier: found.systemIdentifier, database_oid: found.oid },
  });
  return found;
}

/** A remote change with its action-log row; a failure is a UserError carrying PostgreSQL's message. */
async function change(
  deps: Deps,
  sub: Sub,
  at: Location,
  actor: Actor,
  operation: string,
  statements: string[],
  work: (query: Query) => Promise<string>,
  opts: RemoteOptions = {},
) {
  const step = await startActionLog(deps.db, {
    ...onSubscription(sub.id),
    action_type: 'database',
    operation,
    input_text: `${statements.join(';\n')} -- on ${at.where}`,
    ...actorFields(actor),
  });
  try {
    const result = await onExistingDatabase(deps, sub, at, work, opts);
    await step.finish('success', result);
    return result;
  } catch (err) {
    const message = err instanceof UserError ? err.message : `PostgreSQL at ${at.where}: ${(err as Error).message}`;
    await step.finish('failure', message);
    throw new UserError(message);
  }
}

/**
 * Sets who may connect; closing also ends the sessions open on the database. `operation` names what
 * it is done for (`suspend`, `backup (open to superusers)`): the action-log row starts with it.
 * Answers what was done.
 */
export async function setConnections(deps: Deps, sub: Sub, mode: Connections, actor: Actor, operation: string, tx?: DbTx): Promise<string> {
  const at = await databaseLocation(deps.db, sub);
  const alter = `ALTER DATABASE ${quoteIdent(at.name)} WITH ${OPTIONS[mode]}`;
  return change(
    deps,
    sub,
    at,
    actor,
    operation,
    mode === 'closed' ? [alter, END_SESSIONS] : [alter],
    async (query) => {
      await query(alter);
      if (mode !== 'closed') return `Database ${at.name} on ${at.where}: ${OPTIONS[mode]}`;
      return `Database ${at.name} on ${at.where} closed to connections; ${await endSessions(query, at.name)} open session(s) ended`;
    },
    { tx },
  );
}

export interface DatabaseStatus {
  /** user@host:port of its server, for messages. */
  where: string;
  exists: boolean;
  /** Opened for a backup (superusers only) and not closed again. */
  openForSuperusers: boolean;
  allowConnections: boolean;
}

/** Whether the database exists and who may connect to it (a read: no action-log row). */
export async function databaseStatus(deps: Deps, sub: Sub, tx?: DbTx): Promise<DatabaseStatus> {
  const at = await databaseLocation(deps.db, sub);
  return onOwnDatabase(
    deps,
    sub,
    at,
    async (_query, found) => ({
      where: at.where,
      exists: found !== null,
      allowConnections: found?.allowConnections ?? false,
      openForSuperusers: found?.allowConnections === true && found.connectionLimit === 0,
    }),
    { tx },
  );
}

/** DROP DATABASE ... WITH (FORCE): open sessions are ended, the database is gone when it answers. */
export async function dropDatabase(deps: Deps, sub: Sub, actor: Actor): Promise<string> {
  const at = await databaseLocation(deps.db, sub);
  const statements = [`DROP DATABASE ${quoteIdent(at.name)} WITH (FORCE)`];
  // Its own role goes with it (tenant-role.ts).
  if (sub.database_role) statements.push(`DROP ROLE IF EXISTS ${quoteIdent(sub.database_role)}`);
  return change(
    deps,
    sub,
    at,
    actor,
    'drop_database',
    statements,
    async (query) => {
      for (const statement of statements) await query(statement);
      return `Database ${at.name} dropped on ${at.where}`;
    },
    { timeout: LONG_STATEMENT_TIMEOUT },
  );
}

/** What a caller working on many tenants (a usage round) has already: their placement, the server's maintenance connection. */
export interface SharedSession {
  placement?: Placement;
  maintenance?: Query;
}

/**
 * Runs `work` inside the subscription's own database (Odoo's tables), once it is known to be that
 * one, as its tenant role and under the tenant deadline (see instances' tenant-session.ts).
 */
export async function onInstance<T>(
  deps: InstanceDeps,
  sub: Sub,
  work: (query: Query) => Promise<T>,
  tx?: DbTx,
  shared: SharedSession = {},
): Promise<T> {
  const at = await databaseLocation(deps.db, sub, shared.placement);
  return insideTenant(deps.secretBox, at.server, at.name, work, {
    maintenance: shared.maintenance,
    role: at.tenantRole,
    deadlineMs: deps.config.TENANT_DEADLINE_SECONDS * 1000,
    what: `Database ${at.name} of subscription ${sub.id}`,
    // Checked on the session's own maintenance connection: one connection fewer per piece of work.
    identity: (query) => existingIdentity(deps, sub, at, query, tx),
  });
}
