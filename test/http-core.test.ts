// The HTTP core on real PostgreSQL + Redis: error shape, OpenAPI document, docs page, log redaction.
import SwaggerParser from '@apidevtools/swagger-parser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../src/app.js';
import { createTestContext, type TestContext } from './helpers/context.js';
import { createCaller, request, type Caller } from './helpers/api.js';

let ctx: TestContext;
let app: FastifyInstance;
let admin: Caller;

beforeAll(async () => {
  ctx = await createTestContext();
  app = await buildApp(ctx);
  admin = await createCaller(ctx, 'administrator');
});
afterAll(async () => {
  await app.close();
  await ctx.cleanup();
});

describe('errors', () => {
  it('unknown routes answer 404 in the error shape', async () => {
    const res = await request(app, admin, { method: 'GET', url: '/api/v1/nothing-here' });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ error: { code: 'not_found', message: expect.any(String) } });
  });

  it('a missing record is 404 not_found', async () => {
    const res = await request(app, admin, { method: 'GET', url: '/api/v1/users/999999' });
    expect(res.statusCode).toBe(404);
    expect(res.json().error.code).toBe('not_found');
  });

  it('malformed JSON is a 400, not a crash', async () => {
    const res = await request(app, admin, {
      method: 'PATCH',
      url: '/api/v1/settings',
      headers: { 'content-type': 'application/json' },
      payload: '{"dns_resolver": ',
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe('validation_error');
  });

  it('unknown fields and out-of-range values are refused and change nothing', async () => {
    const before = (await request(app, admin, { method: 'GET', url: '/api/v1/settings' })).json();
    for (const payload of [{ keep_root_server_log_period: 0 }, { dns_resolver: 'quad9' }, { surprise: 1 }]) {
      const res = await request(app, admin, { method: 'PATCH', url: '/api/v1/settings', payload });
      expect(res.statusCode).toBe(400);
    }
    expect((await request(app, admin, { method: 'GET', url: '/api/v1/settings' })).json()).toEqual(before);
  });
});

describe('OpenAPI', () => {
  it('GET /api/v1/openapi.json is a valid OpenAPI 3 document of the REST API', async () => {
    const res = await app.inject({ method: 'GET', url: '/api/v1/openapi.json' });
    expect(res.statusCode).toBe(200);
    const doc = res.json();
    expect(doc.openapi).toMatch(/^3\./);
    await SwaggerParser.validate(structuredClone(doc));
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(['/api/v1/users', '/api/v1/settings', '/api/v1/jobs/{id}']));
    expect(Object.keys(doc.paths).every((p) => p.startsWith('/api/v1/'))).toBe(true);
    // Every operation is bearer-protected and documents the error shape.
    for (const path of Object.values(doc.paths) as Record<string, { security?: unknown; responses: Record<string, unknown> }>[]) {
      for (const op of Object.values(path)) {
        expect(op.security).toEqual([{ bearer: [] }]);
        expect(op.responses.default).toBeDefined();
      }
    }
  });

  it('serves the docs page', async () => {
    const res = await app.inject({ method: 'GET', url: '/docs/' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/text\/html/);
  });
});

describe('logs', () => {
  it('never contain bearer tokens or webhook tokens', async () => {
    const webhookToken = 'ab'.repeat(32);
    await app.inject({ method: 'POST', url: `/svc/webhook/${webhookToken}?x=1`, payload: {} });
    await request(app, admin, { method: 'GET', url: '/api/v1/settings' });
    const logs = ctx.logText();
    expect(logs).toContain('/svc/webhook/[redacted]');
    expect(logs).not.toContain(webhookToken);
    expect(logs).not.toContain(admin.token);
  });
});

describe('request bodies', () => {
  it('an action POSTed with Content-Type: application/json and no body is accepted', async () => {
    const res = await request(app, admin, {
      method: 'POST',
      url: '/api/v1/settings/actions/rotate_encryption_key',
      headers: { 'content-type': 'application/json' },
    });
    expect(res.statusCode).toBe(202);
  });

  it('a JSON body with __proto__ is refused (prototype poisoning)', async () => {
    const res = await request(app, admin, {
      method: 'PATCH',
      url: '/api/v1/settings',
      headers: { 'content-type': 'application/json' },
      payload: '{"__proto__": {"admin": true}}',
    });
    expect(res.statusCode).toBe(400);
  });
});
