// Real PostgreSQL and Redis; a second app is given a Redis client for a port where nothing listens.
import { describe, expect, it } from 'vitest';
import { buildApp } from '../src/app.js';
import { createRedis } from '../src/core/queue.js';
import { useTestApp } from './helpers/app.js';

describe('GET /healthz', () => {
  const t = useTestApp();

  it('reports both dependencies up', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/healthz' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ status: 'ok', database: 'up', redis: 'up' });
  });

  it('answers 503 naming what is down', async () => {
    const deadRedis = createRedis('redis://127.0.0.1:1');
    deadRedis.on('error', () => {}); // connection refused, by design
    const brokenApp = await buildApp({ ...t.ctx, redis: deadRedis });
    try {
      const res = await brokenApp.inject({ method: 'GET', url: '/healthz' });
      expect(res.statusCode).toBe(503);
      expect(res.json()).toEqual({ status: 'degraded', database: 'up', redis: 'down' });
    } finally {
      await brokenApp.close();
      deadRedis.disconnect();
    }
  });
});
