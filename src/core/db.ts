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

/** A caller's open transaction, and where to put work that must wait for its commit (queueing jobs). */
export interface InTransaction {
  tx: DbTx;
  afterCommit(fn: () => Promise<unknown>): void;
}
