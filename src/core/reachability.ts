// Start-up checks of the services a process cannot run without. An unreachable PostgreSQL or Redis
// stops start-up with one line naming the variable and the address, not a stack trace (and not
// one log line per queue retrying in the background).
import { Redis } from 'ioredis';
import pg from 'pg';

const CHECK_TIMEOUT_MS = 5_000;
const UNDEFINED_DATABASE = '3D000';

export class UnreachableError extends Error {
  override name = 'UnreachableError';
}

/** host:port of a service URL, without its credentials. */
function addressOf(url: string, defaultPort: number): string {
  const u = new URL(url);
  return `${u.hostname}:${u.port || defaultPort}`;
}

/** Why a connection failed, in a few words: the error code when there is one. */
function reasonOf(err: unknown): string {
  const e = err as { code?: string; message?: string; errors?: { code?: string }[] };
  const code = e.code ?? e.errors?.[0]?.code;
  const message = (e.message || String(err)).split('\n')[0] ?? '';
  return code && !message.includes(code) ? `${message} (${code})` : message;
}

/**
 * Connects to PostgreSQL once; an UnreachableError naming DATABASE_URL when it cannot. A database
 * that does not exist yet is no failure (the migrations create it). Only the connection is checked
 * here: a failing migration is a bug and keeps its stack.
 */
export async function checkPostgres(databaseUrl: string): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: CHECK_TIMEOUT_MS });
  client.on('error', () => {}); // a connection dropped after the check: nothing to report
  try {
    await client.connect();
  } catch (err) {
    if ((err as { code?: string }).code === UNDEFINED_DATABASE) return;
    throw new UnreachableError(`Cannot use PostgreSQL at ${addressOf(databaseUrl, 5432)} (DATABASE_URL): ${reasonOf(err)}`);
  } finally {
    await client.end().catch(() => {});
  }
}

/** Connects to Redis once, without retries; an UnreachableError naming REDIS_URL when it cannot. */
export async function checkRedis(redisUrl: string): Promise<void> {
  const client = new Redis(redisUrl, {
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    connectTimeout: CHECK_TIMEOUT_MS,
  });
  // The socket's own error (ECONNREFUSED...) comes as an event; connect() then only says "closed".
  let cause: unknown = null;
  client.on('error', (err) => {
    cause ??= err;
  });
  try {
    await client.connect();
    await client.ping();
  } catch (err) {
    throw new UnreachableError(`Cannot reach Redis at ${addressOf(redisUrl, 6379)} (REDIS_URL): ${reasonOf(cause ?? err)}`);
  } finally {
    client.disconnect();
  }
}
