// Every Redis connection of the service is made here: the queues, the workers, the monitoring
// leases, caches, rate limits and idempotency keys all go through createRedis(). With
// REDIS_SENTINELS set, each asks the sentinels where the primary is and follows a failover without
// a restart (docs/high-availability.md); otherwise it connects to REDIS_URL. A Redis Cluster is not
// supported (BullMQ needs hash tags on its keys for one; svc's Lua scripts touch keys of many).
//
// Two kinds of connection, as BullMQ's "going to production" guide asks:
// - `commands` (requests, caches, leases, adding jobs): a command waits through at most
//   COMMAND_RETRIES reconnection attempts (and COMMAND_TIMEOUT_MS in all), then fails, so a
//   request that needs Redis is answered 503 instead of hanging while Redis is away;
// - `workers` (BullMQ workers and their blocking connections): maxRetriesPerRequest null, so a
//   worker waits for Redis to come back however long it takes, and resumes on its own.
import { Redis, type RedisOptions } from 'ioredis';
import type { Logger } from 'pino';
import type { Config } from './config.js';

export type RedisConfig = Pick<Config, 'REDIS_URL' | 'REDIS_SENTINEL_NAME'> &
  Partial<Pick<Config, 'REDIS_SENTINELS' | 'REDIS_SENTINEL_PASSWORD' | 'REDIS_PASSWORD'>>;

export type RedisUse = 'commands' | 'workers';

/** Reconnection attempts a `commands` command waits through before it fails (≈ 0.15 s on loopback). */
const COMMAND_RETRIES = 2;
/**
 * The longest a `commands` command waits for its answer. It also ends the wait of a command
 * queued while ioredis asks sentinels that do not answer (that search does not count as
 * reconnection attempts). Far above any command svc sends.
 */
const COMMAND_TIMEOUT_MS = 3_000;

/**
 * A primary that Sentinel demoted answers writes with READONLY (and ends blocking commands with
 * UNBLOCKED) while clients still hold their connection to it: reconnect (the sentinels then name
 * the new primary) and send the command again.
 */
export function reconnectOnReadonly(err: Error): 2 | false {
  return /^(READONLY|UNBLOCKED)\b/.test(err.message) ? 2 : false;
}

/** The connection options of `config` (without the URL of a single Redis). */
export function redisOptions(config: RedisConfig, use: RedisUse = 'commands'): RedisOptions {
  const options: RedisOptions = {
    ...(use === 'workers' ? { maxRetriesPerRequest: null } : { maxRetriesPerRequest: COMMAND_RETRIES, commandTimeout: COMMAND_TIMEOUT_MS }),
    reconnectOnError: reconnectOnReadonly,
    ...(config.REDIS_PASSWORD ? { password: config.REDIS_PASSWORD } : {}),
  };
  if (!config.REDIS_SENTINELS) return options;
  return {
    ...options,
    sentinels: config.REDIS_SENTINELS,
    name: config.REDIS_SENTINEL_NAME,
    ...(config.REDIS_SENTINEL_PASSWORD ? { sentinelPassword: config.REDIS_SENTINEL_PASSWORD } : {}),
    // Not ioredis's failoverDetector: its disconnect on +switch-master, arriving while the
    // connection is still asking the sentinels (the old primary just died), ends the connection for
    // good (ioredis sets "end" when a connect attempt is cut). A dead primary breaks the socket, a
    // demoted one answers READONLY/UNBLOCKED: both reconnect through the sentinels anyway.
    // After asking every sentinel in turn without reaching a primary, start again shortly (null
    // would end the connection for good: ioredis does not retry a failed search).
    sentinelRetryStrategy: (times: number) => Math.min(times * 100, 1_000),
  };
}

/**
 * A Redis connection of the service. `target`: the config (Sentinel or REDIS_URL), or a plain URL
 * (tests and tools that talk to one Redis). `lazy`: connects on first use instead of at once.
 */
export function createRedis(
  target: RedisConfig | string,
  { use = 'commands', lazy = false, log }: { use?: RedisUse; lazy?: boolean; log?: Logger } = {},
): Redis {
  const config: RedisConfig = typeof target === 'string' ? { REDIS_URL: target, REDIS_SENTINEL_NAME: 'mymaster' } : target;
  const options = { ...redisOptions(config, use), lazyConnect: lazy };
  const redis = config.REDIS_SENTINELS ? new Redis(options) : new Redis(config.REDIS_URL, options);
  keepConnecting(redis, log);
  if (log) reportOutages(redis, use, log);
  return redis;
}

/**
 * ioredis gives a connection up ("end") when a connect attempt is cut while it asks the sentinels,
 * although nobody asked it to close. Such a connection is connected again after a second; one
 * closed by svc (disconnect(), quit()) is left closed.
 */
function keepConnecting(redis: Redis, log?: Logger) {
  let closedOnPurpose = false;
  const disconnect = redis.disconnect.bind(redis);
  const quit = redis.quit.bind(redis);
  redis.disconnect = (reconnect = false) => {
    if (!reconnect) closedOnPurpose = true;
    disconnect(reconnect);
  };
  redis.quit = ((...args: Parameters<Redis['quit']>) => {
    closedOnPurpose = true;
    return quit(...args);
  }) as Redis['quit'];
  redis.on('end', () => {
    if (closedOnPurpose) return;
    setTimeout(() => {
      if (closedOnPurpose || redis.status !== 'end') return;
      log?.warn('Redis connection had given up: connecting again');
      // A connect that fails ends the connection again: 'end' comes back here and tries once more.
      redis.connect().catch(() => {});
    }, 1_000).unref();
  });
}

/**
 * Logs a connection's loss once (not at every reconnection attempt) and its return. Unheard, each
 * attempt's error would be printed by ioredis on stderr.
 */
function reportOutages(redis: Redis, use: RedisUse, log: Logger) {
  let down = false;
  redis.on('error', (err) => {
    if (down) return;
    down = true;
    log.warn({ err, connection: use }, 'Redis connection lost; reconnecting (through Sentinel when configured)');
  });
  redis.on('ready', () => {
    if (!down) return;
    down = false;
    log.info({ connection: use }, 'Redis connection back');
  });
}

/**
 * True when `err` says Redis cannot be reached right now (the connection is down, a failover is
 * under way, the command gave up after its reconnection attempts): answered 503, not 500.
 */
export function isRedisUnavailable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  if (err.name === 'MaxRetriesPerRequestError') return true;
  // (A bare socket error is not taken: it may be an SSH or HTTP peer's. ioredis answers a command
  // it gave up on with one of the errors below, never with the socket's.)
  return /^(READONLY|LOADING|MASTERDOWN)\b|^Connection is closed|^Command timed out|^Stream isn't writeable|^All sentinels are unreachable/.test(
    err.message,
  );
}
