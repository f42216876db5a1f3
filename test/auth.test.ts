// Real PostgreSQL + Redis through the HTTP API: bearer tokens, groups, users and tokens REST, CLI.
import { describe, expect, it } from 'vitest';
import { hashApiToken } from '../src/auth/api-token.js';
import { request } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';
import { runEntry } from './helpers/spawn.js';
import { createAuthService } from '../src/auth/auth-service.js';

const t = useTestApp();

describe('bearer authentication', () => {
  it.each([
    ['no header', undefined],
    ['wrong scheme', 'Basic abc'],
    ['unknown token', 'Bearer svc_nope'],
  ])('401 with %s', async (_, authorization) => {
    const res = await t.app.inject({ method: 'GET', url: '/api/v1/settings', headers: authorization ? { authorization } : {} });
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ error: { code: 'unauthenticated', message: expect.any(String) } });
  });

  it('401 for an expired token and for an inactive user', async () => {
    const { token } = await createAuthService(t.ctx).createToken(t.as.user.userId, 'old', new Date(Date.now() - 1000));
    const expired = await t.app.inject({ method: 'GET', url: '/api/v1/settings', headers: { authorization: `Bearer ${token}` } });
    expect(expired.statusCode).toBe(401);

    const user = await createAuthService(t.ctx).createUser({ email: 'gone@svc.test', group: 'administrator', active: false });
    const { token: t2 } = await createAuthService(t.ctx).createToken(user.id);
    const inactive = await t.app.inject({ method: 'GET', url: '/api/v1/settings', headers: { authorization: `Bearer ${t2}` } });
    expect(inactive.statusCode).toBe(401);
  });

  it('stores only the SHA-256 of a token', async () => {
    const rows = await t.ctx.db.$queryRaw<{ token_hash: string }[]>`SELECT token_hash FROM api_tokens WHERE user_id = ${t.as.user.userId}`;
    expect(rows.map((r) => r.token_hash)).toContain(hashApiToken(t.as.user.token));
    const raw = JSON.stringify(await t.ctx.db.$queryRaw`SELECT * FROM api_tokens`);
    expect(raw).not.toContain(t.as.user.token);
  });
});

describe('groups (user ⊂ operator ⊂ administrator)', () => {
  it.each([
    ['GET', '/api/v1/settings', { user: 200, operator: 200, admin: 200 }],
    ['GET', '/api/v1/action-logs', { user: 200, operator: 200, admin: 200 }],
    ['GET', '/api/v1/users', { user: 403, operator: 403, admin: 200 }],
    ['GET', '/api/v1/api-tokens', { user: 403, operator: 403, admin: 200 }],
    ['PATCH', '/api/v1/settings', { user: 403, operator: 403, admin: 200 }],
    ['POST', '/api/v1/settings/actions/rotate_encryption_key', { user: 403, operator: 403, admin: 202 }],
  ] as const)('%s %s', async (method, url, expected) => {
    for (const who of ['user', 'operator', 'admin'] as const) {
      const res = await request(t.app, t.as[who], { method, url, ...(method === 'PATCH' ? { payload: {} } : {}) });
      expect({ who, status: res.statusCode }).toEqual({ who, status: expected[who] });
      if (res.statusCode === 403) expect(res.json().error.code).toBe('forbidden');
    }
  });
});

describe('users and API tokens (administrators)', () => {
  it('creates a user, refuses a duplicate e-mail with 409, updates and lists', async () => {
    const created = await request(t.app, t.as.admin, {
      method: 'POST',
      url: '/api/v1/users',
      payload: { email: 'Ops@Example.com', name: 'Ops', group: 'operator' },
    });
    expect(created.statusCode).toBe(201);
    expect(created.json()).toMatchObject({ email: 'ops@example.com', group: 'operator', active: true });

    const dup = await request(t.app, t.as.admin, { method: 'POST', url: '/api/v1/users', payload: { email: 'ops@example.com' } });
    expect(dup.statusCode).toBe(409);
    expect(dup.json().error.code).toBe('conflict');

    const id = created.json().id;
    const patched = await request(t.app, t.as.admin, { method: 'PATCH', url: `/api/v1/users/${id}`, payload: { group: 'user' } });
    expect(patched.json().group).toBe('user');

    const list = await request(t.app, t.as.admin, { method: 'GET', url: '/api/v1/users?limit=2' });
    expect(list.json()).toMatchObject({ total: expect.any(Number), limit: 2, offset: 0 });
    expect(list.json().items).toHaveLength(2);
  });

  it('bad input is a 400 validation_error naming the field', async () => {
    const res = await request(t.app, t.as.admin, { method: 'POST', url: '/api/v1/users', payload: { email: 'nope', group: 'root' } });
    expect(res.statusCode).toBe(400);
    const body = res.json();
    expect(body.error.code).toBe('validation_error');
    expect(body.error.details.fields.map((d: { field: string }) => d.field)).toEqual(expect.arrayContaining(['body.email', 'body.group']));
  });

  it('creates a token shown once, which then works, and deletes it', async () => {
    const res = await request(t.app, t.as.admin, {
      method: 'POST',
      url: '/api/v1/api-tokens',
      payload: { user_id: t.as.user.userId, name: 'ci' },
    });
    expect(res.statusCode).toBe(201);
    const { token, id } = res.json();
    expect(token).toMatch(/^svc_/);
    const listed = await request(t.app, t.as.admin, { method: 'GET', url: `/api/v1/api-tokens?user_id=${t.as.user.userId}` });
    expect(JSON.stringify(listed.json())).not.toContain(token);

    const use = await t.app.inject({ method: 'GET', url: '/api/v1/settings', headers: { authorization: `Bearer ${token}` } });
    expect(use.statusCode).toBe(200);
    expect((await request(t.app, t.as.admin, { method: 'DELETE', url: `/api/v1/api-tokens/${id}` })).statusCode).toBe(204);
    const after = await t.app.inject({ method: 'GET', url: '/api/v1/settings', headers: { authorization: `Bearer ${token}` } });
    expect(after.statusCode).toBe(401);
  });
});

describe('CLI', () => {
  it('create-admin prints a working token as the last line; create-token likewise', () => {
    const env = { DATABASE_URL: t.ctx.config.DATABASE_URL };
    const admin = runEntry('src/cli.ts', ['create-admin', '--email', 'Root@Example.com'], env);
    expect(admin.stderr).toBe('');
    expect(admin.status).toBe(0);
    const token = admin.stdout.trim().split('\n').pop()!;
    expect(token).toMatch(/^svc_[A-Za-z0-9_-]{40,}$/);

    const again = runEntry('src/cli.ts', ['create-token', '--email', 'root@example.com'], env);
    expect(again.status).toBe(0);
    const second = again.stdout.trim().split('\n').pop()!;
    expect(second).not.toBe(token);

    const missing = runEntry('src/cli.ts', ['create-token', '--email', 'nobody@example.com'], env);
    expect(missing.status).toBe(1);
    return Promise.all(
      [token, second].map(async (issued) => {
        const res = await t.app.inject({ method: 'GET', url: '/api/v1/users', headers: { authorization: `Bearer ${issued}` } });
        expect(res.statusCode).toBe(200);
      }),
    );
  });
});
