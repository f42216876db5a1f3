// The app of one test file on real parts: a fresh database, the real Redis, buildApp(), and (when
// asked) the BullMQ workers, plus a caller of each group. It registers its own teardown, so a test
// file only says what it needs:   const t = useTestApp({ workers: true });   ... t.app, t.as.admin
// Stand-ins the app must know of (an SMTP server, an sshd) are started in a beforeAll registered
// before useTestApp() and read in an env thunk; their afterAll, registered first too, then runs
// after the app's teardown (vitest runs afterAll hooks in reverse order).
import { afterAll, beforeAll } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/app.js';
import type { Config } from '../../src/core/config.js';
import type { Feature } from '../../src/feature.js';
import { FEATURES } from '../../src/features.js';
import { startWorkers, type Workers } from '../../src/worker.js';
import { callers, type Caller } from './api.js';
import { createTestContext, type TestContext } from './context.js';

export interface TestApp {
  ctx: TestContext;
  app: FastifyInstance;
  workers: Workers | null;
  as: { user: Caller; operator: Caller; admin: Caller };
}

export interface TestAppOptions {
  /** Configuration on top of the test defaults; a function is read when the app is built. */
  env?: Record<string, string> | (() => Record<string, string>);
  /** Starts the BullMQ workers too. */
  workers?: boolean;
  /** The features of the app and workers (default: the service's). */
  features?: readonly Feature[];
}

export function useTestApp(opts: TestAppOptions = {}): TestApp {
  const t = { workers: null } as TestApp;
  beforeAll(async () => {
    const features = opts.features ?? FEATURES;
    t.ctx = await createTestContext(typeof opts.env === 'function' ? opts.env() : opts.env);
    t.app = await buildApp(t.ctx, features);
    if (opts.workers) t.workers = await startWorkers(t.ctx, features);
    t.as = await callers(t.ctx);
  });
  afterAll(async () => {
    await t.workers?.close();
    await t.app?.close();
    await t.ctx?.cleanup();
  });
  return t;
}

/**
 * Runs `fn` with part of the file's configuration changed, then puts it back. Only for settings the
 * app and workers read at each use (BACKUP_WAIT_MS, OUTBOUND_TIMEOUT_MS of the HTTP client, ...):
 * one test shortens a wait the others keep generous, or points a command elsewhere.
 */
export async function withConfig<T>(t: TestApp, changes: Partial<Config>, fn: () => Promise<T>): Promise<T> {
  const config: Config = t.ctx.config;
  const before = Object.fromEntries(Object.keys(changes).map((key) => [key, config[key as keyof Config]]));
  Object.assign(config, changes);
  try {
    return await fn();
  } finally {
    Object.assign(config, before);
  }
}
