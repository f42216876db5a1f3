import { PrismaPg } from '@prisma/adapter-pg';
import { Prisma, PrismaClient } from '../generated/prisma/client.js';

export { Prisma };
export type Db = PrismaClient;
/** A client or an interactive transaction: services accept either. */
export type DbTx = Prisma.TransactionClient;

export function createDb(databaseUrl: string, poolSize = 10): Db {
  return new PrismaClient({ adapter: new PrismaPg({ connectionString: databaseUrl, max: poolSize }) });
}

/** True when `err` is the unique-constraint violation of PostgreSQL (Prisma P2002). */
export function isUniqueViolation(err: unknown): boolean {
  return err instanceof Prisma.PrismaClientKnownRequestError && err.code === 'P2002';
}

/** The name of the unique index a Prisma P2002 violated (through the pg driver adapter), or null. */
export function violatedIndexOf(err: unknown): string | null {
  if (!isUniqueViolation(err)) return null;
  const cause = (err as Prisma.PrismaClientKnownRequestError).meta as
    | { driverAdapterError?: { cause?: { constraint?: { index?: string } } }; target?: unknown }
    | undefined;
  return cause?.driverAdapterError?.cause?.constraint?.index ?? null;
}

const columnsOfIndex = new Map<string, string[]>();

/** The columns of an index, in order (read once per index: the schema does not change while the process runs). */
export async function indexColumns(db: Db | DbTx, index: string): Promise<string[]> {
  const known = columnsOfIndex.get(index);
  if (known) return known;
  const rows = await db.$queryRaw<{ column: string }[]>`
    SELECT a.attname AS column FROM pg_index i
    JOIN pg_class ic ON ic.oid = i.indexrelid
    JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
    WHERE ic.relname = ${index} ORDER BY array_position(i.indkey, a.attnum)`;
  const columns = rows.map((r) => r.column);
  if (columns.length > 0) columnsOfIndex.set(index, columns);
  return columns;
}

/** A caller's open transaction, and where to put work that must wait for its commit (queueing jobs). */
export interface InTransaction {
  tx: DbTx;
  afterCommit(fn: () => Promise<unknown>): void;
}

/** Prisma's codes for a value the column cannot hold (too long, out of range, wrong type). */
const BAD_VALUE_CODES = new Set(['P2000', 'P2007', 'P2020', 'P2023', 'P2033']);

/**
 * True when the database refused a value the caller sent (SQLSTATE class 22, "data exception":
 * NUL in text, an integer out of range, text that is not a number...), through Prisma or pg.
 * Such errors are the caller's input, answered 400, never 500.
 */
export function isBadValueError(err: unknown): boolean {
  if (err instanceof Prisma.PrismaClientKnownRequestError) {
    if (BAD_VALUE_CODES.has(err.code)) return true;
    const cause = (err.meta as { driverAdapterError?: { cause?: { originalCode?: string } } } | undefined)?.driverAdapterError?.cause;
    return typeof cause?.originalCode === 'string' && cause.originalCode.startsWith('22');
  }
  const code = (err as { code?: unknown } | null)?.code;
  return err instanceof Error && typeof code === 'string' && /^22[0-9A-Z]{3}$/.test(code);
}

/** Prisma's codes for a database it cannot reach or lost the connection to (P2024: no pool connection in time). */
const UNAVAILABLE_CODES = new Set(['P1001', 'P1002', 'P1008', 'P1017', 'P2024']);
/** The driver adapter's kinds for the same. */
const UNAVAILABLE_KINDS = new Set(['DatabaseNotReachable', 'ConnectionClosed', 'SocketTimeout', 'TooManyConnections']);
/**
 * SQLSTATEs of a server going away or not (yet) the primary: class 08 (connection exception),
 * 57P01-57P03 (shut down, crashed, cannot connect now: starting or in recovery), 25006 (a read-only
 * transaction: a standby, still behind the proxy while it switches).
 */
const UNAVAILABLE_SQLSTATE = /^(08[0-9A-Z]{3}|57P0[123]|25006)$/;
/** node-postgres' own words for a connection that broke or could not be made. */
const UNAVAILABLE_MESSAGE =
  /^(Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Client was closed and is not queryable)/;
const SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH']);

/**
 * True when `err` says PostgreSQL cannot be used right now (it is down, a failover is under way,
 * the connection broke): the request is answered 503 with Retry-After, and nothing about it may be
 * taken as done. Found through Prisma (the driver adapter's error), or node-postgres directly (the
 * webhook endpoint's pool), or a cause of either. `fromPg`: the error surely came from a pg pool,
 * so a bare socket error (ECONNREFUSED...) is PostgreSQL's too (elsewhere it may be an SSH or
 * HTTP peer's, which is no reason for a 503).
 */
export function isDatabaseUnavailable(err: unknown, { fromPg = false } = {}, depth = 0): boolean {
  if (!(err instanceof Error) || depth > 3) return false;
  if (err instanceof Prisma.PrismaClientInitializationError) return true;
  if (err instanceof Prisma.PrismaClientKnownRequestError) {
    if (UNAVAILABLE_CODES.has(err.code)) return true;
    const cause = (err.meta as { driverAdapterError?: { cause?: { kind?: string; originalCode?: string } } } | undefined)
      ?.driverAdapterError?.cause;
    return UNAVAILABLE_KINDS.has(cause?.kind ?? '') || UNAVAILABLE_SQLSTATE.test(cause?.originalCode ?? '');
  }
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string' && 'severity' in err && UNAVAILABLE_SQLSTATE.test(code)) return true;
  if (fromPg && typeof code === 'string' && SOCKET_CODES.has(code) && 'syscall' in err) return true;
  if (UNAVAILABLE_MESSAGE.test(err.message)) return true;
  return isDatabaseUnavailable(err.cause, { fromPg }, depth + 1);
}
