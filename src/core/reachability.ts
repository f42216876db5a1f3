// Start-up checks of the services a process cannot run without. An unreachable PostgreSQL or Redis
// stops start-up with one line naming the variable and the address, not a stack trace (and not
// one log line per queue retrying in the background).
import { Redis, type RedisOptions } from 'ioredis';
import { type RedisConfig, redisOptions } from './redis.js';
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
    // Closing a connection the work is done with: a close that fails leaves nothing open (the server ends the session with its socket).
    await client.end().catch(() => {});
  }
}

/**
 * One connection (to `url` with `options`, or by `options` alone), without retries: PING, then
 * `fn`; a failure is an Error saying why in a few words.
 */
async function once<T>(url: string | null, options: RedisOptions, fn: (client: Redis) => Promise<T>): Promise<T> {
  const only: RedisOptions = {
    ...options,
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    reconnectOnError: null,
    connectTimeout: CHECK_TIMEOUT_MS,
  };
  const client = url === null ? new Redis(only) : new Redis(url, only);
  // The socket's own error (ECONNREFUSED...) comes as an event; connect() then only says "closed".
  let cause: unknown = null;
  client.on('error', (err) => {
    cause ??= err;
  });
  try {
    await client.connect();
    await client.ping();
    return await fn(client);
  } catch (err) {
    throw new Error(reasonOf(cause ?? err));
  } finally {
    client.disconnect();
  }
}

/**
 * Connects to Redis once, without retries; an UnreachableError naming the variable when it cannot.
 * Through Sentinel: every sentinel is asked for the primary; none answering, none knowing
 * REDIS_SENTINEL_NAME, or the primary they name not answering, each stops start-up saying which.
 */
export async function checkRedis(config: RedisConfig): Promise<void> {
  if (!config.REDIS_SENTINELS) {
    try {
      await once(config.REDIS_URL, redisOptions(config), async () => {});
    } catch (err) {
      throw new UnreachableError(`Cannot reach Redis at ${addressOf(config.REDIS_URL, 6379)} (REDIS_URL): ${(err as Error).message}`);
    }
    return;
  }
  const sentinelOptions = config.REDIS_SENTINEL_PASSWORD ? { password: config.REDIS_SENTINEL_PASSWORD } : {};
  const answers = await Promise.all(
    config.REDIS_SENTINELS.map(async ({ host, port }) => {
      const at = `${host.includes(':') ? `[${host}]` : host}:${port}`;
      try {
        const primary = await once(null, { ...sentinelOptions, host, port }, (c) =>
          c.call('SENTINEL', 'get-master-addr-by-name', config.REDIS_SENTINEL_NAME),
        );
        return { at, primary: Array.isArray(primary) ? `${primary[0]}:${primary[1]}` : null, error: null };
      } catch (err) {
        return { at, primary: null, error: (err as Error).message };
      }
    }),
  );
  const reachable = answers.filter((a) => a.error === null);
  if (reachable.length === 0) {
    const why = answers.map((a) => `${a.at}: ${a.error}`).join('; ');
    throw new UnreachableError(`No sentinel of REDIS_SENTINELS answers (${why})`);
  }
  const named = reachable.find((a) => a.primary !== null);
  if (!named) {
    throw new UnreachableError(
      `No sentinel of REDIS_SENTINELS (${reachable.map((a) => a.at).join(', ')}) knows a primary named "${config.REDIS_SENTINEL_NAME}" (REDIS_SENTINEL_NAME)`,
    );
  }
  try {
    await once(null, redisOptions(config), async () => {});
  } catch (err) {
    throw new UnreachableError(
      `Cannot reach the Redis primary ${named.primary} that the sentinels name for "${config.REDIS_SENTINEL_NAME}" (REDIS_SENTINELS): ${(err as Error).message}`,
    );
  }
}
