// Idempotency-Key on POST, on real PostgreSQL and Redis: a POST repeated with the same
// key answers the first answer and does the work once (no second job, no second record); another
// body with the key is a 409; keys are per user and per route; a server error is not kept.
import { describe, expect, it } from 'vitest';
import { request, type Caller } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';

const t = useTestApp();

const post = (caller: Caller, url: string, payload: object | undefined, key?: string) =>
  request(t.app, caller, { method: 'POST', url, payload, headers: key ? { 'idempotency-key': key } : {} });

describe('Idempotency-Key', () => {
  it('a repeated create answers the first answer and creates one record', async () => {
    const body = { name: 'Once', email: 'once@example.com' };
    const first = await post(t.as.operator, '/api/v1/partners', body, 'create-once-1');
    const again = await post(t.as.operator, '/api/v1/partners', body, 'create-once-1');
    expect(first.statusCode).toBe(201);
    expect(again.statusCode).toBe(201);
    expect(again.json()).toEqual(first.json());
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(await t.ctx.db.partner.count({ where: { email: 'once@example.com' } })).toBe(1);
  });

  it('the same action with the same key queues one job; without a key it would queue two', async () => {
    const server = await t.ctx.db.rootServer.create({
      data: { ip: '10.7.7.7', state: 'confirmed', password: await t.ctx.secretBox.encrypt('x') },
    });
    const url = `/api/v1/root-servers/${server.id}/actions/run_cmd`;
    const before = await t.ctx.queues.queue('ssh').getJobCountByTypes('waiting');
    const a = await post(t.as.operator, url, { cmd: 'uptime' }, 'run-uptime-7');
    const b = await post(t.as.operator, url, { cmd: 'uptime' }, 'run-uptime-7');
    expect(a.statusCode).toBe(202);
    expect(b.json()).toEqual(a.json());
    expect(await t.ctx.queues.queue('ssh').getJobCountByTypes('waiting')).toBe(before + 1);
    await post(t.as.operator, url, { cmd: 'uptime' });
    await post(t.as.operator, url, { cmd: 'uptime' });
    expect(await t.ctx.queues.queue('ssh').getJobCountByTypes('waiting')).toBe(before + 3);
  });

  it('another body with the same key is a 409; the key is per user and per route', async () => {
    const url = '/api/v1/partners';
    await post(t.as.operator, url, { name: 'K', email: 'k1@example.com' }, 'shared-key');
    const other = await post(t.as.operator, url, { name: 'K', email: 'k2@example.com' }, 'shared-key');
    expect(other.statusCode).toBe(409);
    expect(other.json().error.message).toMatch(/another body/);
    // Another user, or another route, with the same key: independent requests.
    expect((await post(t.as.admin, url, { name: 'K', email: 'k3@example.com' }, 'shared-key')).statusCode).toBe(201);
    expect((await post(t.as.operator, '/api/v1/trial-packages', { name: 'P', url_string: 'p-key' }, 'shared-key')).statusCode).toBe(201);
  });

  it('an error answer is kept too (no second try of a refused request), a malformed key is a 400', async () => {
    const bad = { name: 'Dup', email: 'dup-key@example.com' };
    await post(t.as.operator, '/api/v1/partners', bad);
    const first = await post(t.as.operator, '/api/v1/partners', bad, 'dup-key');
    const again = await post(t.as.operator, '/api/v1/partners', bad, 'dup-key');
    expect(first.statusCode).toBe(409);
    expect(again.statusCode).toBe(409);
    expect(again.headers['idempotent-replayed']).toBe('true');
    const malformed = await post(t.as.operator, '/api/v1/partners', { name: 'M', email: 'm@example.com' }, 'a'.repeat(300));
    expect(malformed.statusCode).toBe(400);
    expect(malformed.json().error.details.fields[0].field).toBe('headers.idempotency-key');
  });

  it('a server error is not kept: the same key tries again and does the work', async () => {
    // A trigger makes the insert fail inside PostgreSQL, as an outage would.
    await t.ctx.db.$executeRawUnsafe(
      `CREATE FUNCTION idempotency_test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$`,
    );
    await t.ctx.db.$executeRawUnsafe(
      'CREATE TRIGGER idempotency_test_refuse BEFORE INSERT ON partners FOR EACH ROW EXECUTE FUNCTION idempotency_test_refuse()',
    );
    const body = { name: 'Retry', email: 'retry-after-500@example.com' };
    let failed: Awaited<ReturnType<typeof post>>;
    try {
      failed = await post(t.as.operator, '/api/v1/partners', body, 'retry-after-500');
    } finally {
      await t.ctx.db.$executeRawUnsafe('DROP TRIGGER idempotency_test_refuse ON partners');
    }
    expect(failed.statusCode).toBe(500);
    const again = await post(t.as.operator, '/api/v1/partners', body, 'retry-after-500');
    expect(again.statusCode).toBe(201);
    expect(again.headers['idempotent-replayed']).toBeUndefined();
    expect(await t.ctx.db.partner.count({ where: { email: body.email } })).toBe(1);
  });
});

describe('what is kept in Redis', () => {
  it('a kept answer holding a secret shown once (a new API token) is not kept in plaintext', async () => {
    const res = await post(t.as.admin, '/api/v1/api-tokens', { user_id: t.as.user.userId, name: 'kept' }, 'token-once-1');
    expect(res.statusCode).toBe(201);
    const token = res.json().token as string;
    const keys = await t.ctx.redis.keys(`${t.ctx.config.QUEUE_PREFIX}:idempotency:*`);
    const values = await Promise.all(keys.map((k) => t.ctx.redis.get(k)));
    expect(values.length).toBeGreaterThan(0);
    expect(values.filter((v) => v?.includes(token))).toEqual([]);
    const again = await post(t.as.admin, '/api/v1/api-tokens', { user_id: t.as.user.userId, name: 'kept' }, 'token-once-1');
    expect(again.json().token).toBe(token);
  });
});
