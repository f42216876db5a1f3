// Writes under a condition on the record (If-Match), checked for the very row version the write
// changes: the version (PostgreSQL's xmin) is read before the condition is checked and compared
// again under the row lock, and a row changed in between is checked again.
import type { Db, DbTx } from './db.js';
import { PreconditionFailedError } from './errors.js';

/**
 * A condition on the record as the API answers it (If-Match): reads the record and throws to refuse
 * the write. It reads through the service's own `get` (other tables too), so it runs before the
 * write's transaction; conditionalWrite() then proves under the row lock that it saw the row locked.
 */
export type Precondition = () => Promise<void>;

/** Locks the row in the write's transaction (FOR UPDATE); 404 when it is gone. */
export type RowLock = (tx: DbTx) => Promise<void>;

/** Rows changed by others between the check and the lock this many times in a row: the write gives up (412). */
const CONDITION_ATTEMPTS = 5;

async function rowVersion(db: Db | DbTx, table: string, id: number, lock: boolean): Promise<string | null> {
  // xmin: the transaction that wrote this version of the row; any UPDATE makes a new one.
  const rows = await db.$queryRawUnsafe<{ version: string }[]>(
    `SELECT xmin::text AS version FROM "${table}" WHERE id = $1${lock ? ' FOR UPDATE' : ''}`,
    id,
  );
  return rows[0]?.version ?? null;
}

/**
 * Runs `write`, which locks the row with `lock(tx)` in its transaction before it reads or writes it,
 * under `precondition`: the row's version is read, then the precondition checked, then `lock`
 * compares the version it locked with the one read. Another write in between (a concurrent PATCH
 * with the same If-Match, a job) makes the write start over, so the precondition is checked again
 * on the row as it now is: a condition holds for the very version the write changes.
 */
export async function conditionalWrite<T>(
  db: Db,
  row: { table: string; id: number; notFound: () => Error },
  precondition: Precondition | undefined,
  write: (lock: RowLock) => Promise<T>,
): Promise<T> {
  const { table, id, notFound } = row;
  for (let attempt = 1; ; attempt++) {
    let seen: string | null = null;
    if (precondition) {
      seen = await rowVersion(db, table, id, false);
      if (seen === null) throw notFound();
      await precondition();
    }
    let moved = false;
    const lock: RowLock = async (tx) => {
      const version = await rowVersion(tx, table, id, true);
      if (version === null) throw notFound();
      if (seen !== null && version !== seen) {
        moved = true;
        throw new PreconditionFailedError();
      }
    };
    try {
      return await write(lock);
    } catch (err) {
      if (!moved) throw err;
      if (attempt === CONDITION_ATTEMPTS) throw err;
    }
  }
}
