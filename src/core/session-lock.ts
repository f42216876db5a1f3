// One run at a time across every process: a PostgreSQL advisory lock held by a connection of its
// own for the length of the work. A process that dies takes its connection, and so its lock, along.
import pg from 'pg';

/** Runs `work` while holding the lock `name`; null (without running it) when another holder has it. */
export async function withSessionLock<T>(databaseUrl: string, name: string, work: () => Promise<T>): Promise<T | null> {
  const lock = new pg.Client({ connectionString: databaseUrl, application_name: 'svc-lock' });
  lock.on('error', () => {});
  await lock.connect();
  try {
    const { rows } = await lock.query('SELECT pg_try_advisory_lock(hashtext($1)) AS locked', [name]);
    if (!rows[0].locked) return null;
    return await work();
  } finally {
    // The advisory lock is the session's: it ends with the connection, even one whose close fails.
    await lock.end().catch(() => {});
  }
}

/** Runs `work` on every item, at most `limit` at a time; answers the results in order. */
export async function mapLimited<T, R>(items: readonly T[], limit: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const lane = async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await work(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
  return results;
}
