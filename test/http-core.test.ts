// The HTTP core on real PostgreSQL + Redis: error shape, docs page, log redaction.
import { describe, expect, it } from 'vitest';
import pino from 'pino';
import { loggerOptions } from '../src/core/logger.js';
import { request } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';

const t = useTestApp();

describe('errors', () => {
  it('unknown routes answer 404 in the error shape', async () => {
    const res = await request(t.app, t.as.admin, { method: 'GET', url: '/api/v1/nothing-here' });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ error: { code: 'not_found', message: expect.any(String) } });
  });

  it('a missing record is 404 not_found', async () => {
    const res = await request(t.app, t.as.admin, { method: 'GET', url: '/api/v1/users/999999' });
    expect(res.statusCode).toBe(404);
    expect(res.json().error.code).toBe('not_found');
  });

  it('malformed JSON is a 400, not a crash', async () => {
    const res = await request(t.app, t.as.admin, {
      method: 'PATCH',
      url: '/api/v1/settings',
      headers: { 'content-type': 'application/json' },
      payload: '{"dns_resolver": ',
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe('validation_error');
  });

  it('unknown fields and out-of-range values are refused and change nothing', async () => {
    const before = (await request(t.app, t.as.admin, { method: 'GET', url: '/api/v1/settings' })).json();
    for (const payload of [{ keep_root_server_log_period: 0 }, { dns_resolver: 'quad9' }, { surprise: 1 }]) {
      const res = await request(t.app, t.as.admin, { method: 'PATCH', url: '/api/v1/settings', payload });
      expect(res.statusCode).toBe(400);
    }
    expect((await request(t.app, t.as.admin, { method: 'GET', url: '/api/v1/settings' })).json()).toEqual(before);
  });
});

// The document itself is checked in test/postman.test.ts.
describe('OpenAPI', () => {
  it('serves the docs page', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/docs/' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/text\/html/);
  });
});

describe('logs', () => {
  it('never contain bearer tokens or webhook tokens', async () => {
    const webhookToken = 'ab'.repeat(32);
    await t.app.inject({ method: 'POST', url: `/svc/webhook/${webhookToken}?x=1`, payload: {} });
    await request(t.app, t.as.admin, { method: 'GET', url: '/api/v1/settings' });
    const logs = t.ctx.logText();
    expect(logs).toContain('/svc/webhook/[redacted]');
    expect(logs).not.toContain(webhookToken);
    expect(logs).not.toContain(t.as.admin.token);
  });

  it('redact webhook tokens whatever the letter case and slashes, and log query parameters without values', async () => {
    const tokens = ['cd'.repeat(32), 'ef'.repeat(32), '12'.repeat(32)];
    await t.app.inject({ method: 'POST', url: `/SVC/Webhook/${tokens[0]}`, payload: {} });
    await t.app.inject({ method: 'POST', url: `//svc//webhook//${tokens[1]}`, payload: {} });
    await t.app.inject({ method: 'POST', url: `/svc/webhook/${tokens[2]}/extra`, payload: {} });
    await request(t.app, t.as.admin, { method: 'GET', url: '/api/v1/action-logs?model_name=q-secret-value&limit=5' });
    const logs = t.ctx.logText();
    for (const token of tokens) expect(logs).not.toContain(token);
    expect(logs).not.toContain('q-secret-value');
    expect(logs).toContain('/api/v1/action-logs?model_name=&limit=');
  });

  it('keep error codes readable: a field named code is not a secret', () => {
    const lines: string[] = [];
    const log = pino(loggerOptions('info'), { write: (line: string) => void lines.push(line) });
    log.error({ err: Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' }), code: 40101 }, 'failed');
    expect(lines.join('')).toContain('"code":"ECONNREFUSED"');
    expect(lines.join('')).toContain('"code":40101');
  });
});

describe('request bodies', () => {
  it('an action POSTed with Content-Type: application/json and no body is accepted', async () => {
    const res = await request(t.app, t.as.admin, {
      method: 'POST',
      url: '/api/v1/settings/actions/rotate_encryption_key',
      headers: { 'content-type': 'application/json' },
    });
    expect(res.statusCode).toBe(202);
  });

  it('an action without parameters refuses a body with fields (400 naming them) and takes an empty one', async () => {
    const url = '/api/v1/settings/actions/rotate_encryption_key';
    const refused = await request(t.app, t.as.admin, { method: 'POST', url, payload: { dry_run: true } });
    expect(refused.statusCode).toBe(400);
    expect(refused.json().error).toMatchObject({
      code: 'validation_error',
      details: { fields: [{ field: 'body.dry_run', message: 'not a parameter of this action' }] },
    });
    expect((await request(t.app, t.as.admin, { method: 'POST', url, payload: [1] })).statusCode).toBe(400);
    expect((await request(t.app, t.as.admin, { method: 'POST', url, payload: {} })).statusCode).toBe(202);
  });

  it('a JSON body with __proto__ is refused (prototype poisoning)', async () => {
    const res = await request(t.app, t.as.admin, {
      method: 'PATCH',
      url: '/api/v1/settings',
      headers: { 'content-type': 'application/json' },
      payload: '{"__proto__": {"admin": true}}',
    });
    expect(res.statusCode).toBe(400);
  });
});
