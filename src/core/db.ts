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
