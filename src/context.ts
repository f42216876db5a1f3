// The dependencies of the API and the workers, created once per process from the config.
import pino, { type Logger } from 'pino';
import type { Redis } from 'ioredis';
import type { Config } from './core/config.js';
import { createDb, type Db } from './core/db.js';
import { createSecretBox, loadOrCreateMasterKey, type SecretBox } from './core/crypto.js';
import { createQueues, type Queues } from './core/queue.js';
import { createRedis } from './core/redis.js';
import { createMailer, type Mailer } from './core/mail.js';
import { loggerOptions } from './core/logger.js';

export interface AppContext {
  config: Config;
  log: Logger;
  db: Db;
  redis: Redis;
  queues: Queues;
  secretBox: SecretBox;
  mailer: Mailer;
  close(): Promise<void>;
}

/** `lazy`: PostgreSQL and Redis are connected on first use (a process that may never need them). */
export async function createContext(
  config: Config,
  log: Logger = pino(loggerOptions(config.LOG_LEVEL)),
  { lazy = false } = {},
): Promise<AppContext> {
  const db = createDb(config.DATABASE_URL);
  const redis = createRedis(config, { lazy, log });
  const queues = createQueues(redis, config.QUEUE_PREFIX);
  const secretBox = createSecretBox(db, await loadOrCreateMasterKey(config.SVC_MASTER_KEY_FILE));
  const mailer = createMailer(config.SMTP_URL, config.MAIL_FROM, log, config.MAIL_DIR);
  return {
    config,
    log,
    db,
    redis,
    queues,
    secretBox,
    mailer,
    async close() {
      mailer.close();
      await queues.close();
      redis.disconnect();
      await db.$disconnect();
    },
  };
}
