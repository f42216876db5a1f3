// The app of one test file on real parts: a fresh database, the real Redis, buildApp(), and (when
// asked) the BullMQ workers, plus a caller of each group. It registers its own teardown, so a test
// file only says what it needs:   const t = useTestApp({ workers: true });   ... t.app, t.as.admin
import { afterAll, beforeAll } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/app.js';
import { startWorkers, type Workers } from '../../src/worker.js';
import { callers, type Caller } from './api.js';
import { createTestContext, type TestContext } from './context.js';

export interface TestApp {
  ctx: TestContext;
  app: FastifyInstance;
  workers: Workers | null;
  as: { user: Caller; operator: Caller; admin: Caller };
}

export function useTestApp(opts: { env?: Record<string, string>; workers?: boolean } = {}): TestApp {
  const t = { workers: null } as TestApp;
  beforeAll(async () => {
    t.ctx = await createTestContext(opts.env);
    t.app = await buildApp(t.ctx);
    if (opts.workers) t.workers = await startWorkers(t.ctx);
    t.as = await callers(t.ctx);
  });
  afterAll(async () => {
    await t.workers?.close();
    await t.app?.close();
    await t.ctx?.cleanup();
  });
  return t;
}
