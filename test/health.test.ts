// Real PostgreSQL and Redis; a second context points at a Redis port where nothing listens.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../src/app.js';
import { createTestContext, type TestContext } from './helpers/context.js';

describe('GET /healthz', () => {
  let ctx: TestContext;
  let app: FastifyInstance;
  beforeAll(async () => {
    ctx = await createTestContext();
    app = await buildApp(ctx);
  });
  afterAll(async () => {
    await app.close();
    await ctx.cleanup();
  });

  it('reports both dependencies up', async () => {
    const res = await app.inject({ method: 'GET', url: '/healthz' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ status: 'ok', database: 'up', redis: 'up' });
  });

  it('answers 503 naming what is down', async () => {
    const broken = await createTestContext({ REDIS_URL: 'redis://127.0.0.1:1' });
    broken.redis.on('error', () => {}); // connection refused, by design
    const brokenApp = await buildApp(broken);
    try {
      const res = await brokenApp.inject({ method: 'GET', url: '/healthz' });
      expect(res.statusCode).toBe(503);
      expect(res.json()).toEqual({ status: 'degraded', database: 'up', redis: 'down' });
    } finally {
      await brokenApp.close();
      broken.redis.disconnect();
      await broken.db.$disconnect();
    }
  });
});
