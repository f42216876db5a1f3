// ETag and If-Match on real PostgreSQL and Redis through the app: a one-record answer (GET, POST,
// PATCH; the settings too) carries the ETag a GET of the same record gives; PATCH and DELETE with a stale If-Match
// are refused with 412 precondition_failed and change nothing; with the present ETag or `*` they
// run; without If-Match they run unconditionally. Two writes with the same If-Match at once: the
// condition holds for the row version each write locks, so only the first passes.
import { describe, expect, it } from 'vitest';
import { request } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';

const t = useTestApp();

const call = (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: object, headers: Record<string, string> = {}) =>
  request(t.app, t.as.admin, { method, url, headers, ...(payload ? { payload } : {}) });

async function newPartner(name: string) {
  const res = await call('POST', '/api/v1/partners', { name, email: `${name.toLowerCase()}@etag.example` });
  expect(res.statusCode).toBe(201);
  return { id: res.json().id as number, etag: res.headers.etag as string };
}

describe('ETag', () => {
  it('a created, read and changed record carries the ETag its GET gives; a change makes a new one', async () => {
    const created = await newPartner('Tagged');
    expect(created.etag).toMatch(/^"[\w-]{27}"$/);
    const read = await call('GET', `/api/v1/partners/${created.id}`);
    expect(read.headers.etag).toBe(created.etag);
    const changed = await call('PATCH', `/api/v1/partners/${created.id}`, { company_name: 'Tagged GmbH' });
    expect(changed.statusCode).toBe(200);
    expect(changed.headers.etag).not.toBe(created.etag);
    expect((await call('GET', `/api/v1/partners/${created.id}`)).headers.etag).toBe(changed.headers.etag);
  });
});

describe('If-Match', () => {
  it('a PATCH with a stale ETag is refused with 412 and changes nothing; with the present one it runs', async () => {
    const { id, etag } = await newPartner('Stale');
    const other = await call('PATCH', `/api/v1/partners/${id}`, { company_name: 'Changed by someone else' });
    expect(other.statusCode).toBe(200);

    const stale = await call('PATCH', `/api/v1/partners/${id}`, { company_name: 'Mine' }, { 'if-match': etag });
    expect(stale.statusCode).toBe(412);
    expect(stale.json().error).toMatchObject({ code: 'precondition_failed', message: expect.stringContaining('GET it again') });
    expect((await call('GET', `/api/v1/partners/${id}`)).json().company_name).toBe('Changed by someone else');

    const fresh = await call('PATCH', `/api/v1/partners/${id}`, { company_name: 'Mine' }, { 'if-match': other.headers.etag as string });
    expect(fresh.statusCode).toBe(200);
    expect(fresh.json().company_name).toBe('Mine');
    // A list of ETags matches when one of them is the present one; * matches any version.
    const listed = await call('PATCH', `/api/v1/partners/${id}`, { mobile: '+1' }, { 'if-match': `${etag}, ${fresh.headers.etag}` });
    expect(listed.statusCode).toBe(200);
    expect((await call('PATCH', `/api/v1/partners/${id}`, { mobile: '+2' }, { 'if-match': '*' })).statusCode).toBe(200);
    // A weak tag never matches (If-Match compares strongly).
    expect((await call('PATCH', `/api/v1/partners/${id}`, { mobile: '+3' }, { 'if-match': 'W/"x"' })).statusCode).toBe(412);
  });

  it('a DELETE with a stale ETag is refused with 412 and the record stays; with the present one it is deleted', async () => {
    const { id, etag } = await newPartner('Doomed');
    const changed = await call('PATCH', `/api/v1/partners/${id}`, { company_name: 'Doomed Ltd' });
    expect((await call('DELETE', `/api/v1/partners/${id}`, undefined, { 'if-match': etag })).statusCode).toBe(412);
    expect((await call('GET', `/api/v1/partners/${id}`)).statusCode).toBe(200);
    expect((await call('DELETE', `/api/v1/partners/${id}`, undefined, { 'if-match': changed.headers.etag as string })).statusCode).toBe(
      204,
    );
    expect((await call('GET', `/api/v1/partners/${id}`)).statusCode).toBe(404);
  });

  it('writes without If-Match are unconditional; a secret change changes the ETag although the answer hides the secret', async () => {
    const server = await call('POST', '/api/v1/root-servers', { ip: '10.20.30.40', password: 'first-pw' });
    expect(server.statusCode).toBe(201);
    const { id } = server.json();
    const before = server.headers.etag as string;
    const patched = await call('PATCH', `/api/v1/root-servers/${id}`, { password: 'second-pw' });
    expect(patched.statusCode).toBe(200);
    // password_set stays true, but the record changed: updated_at is part of the answer.
    expect(patched.headers.etag).not.toBe(before);
    expect((await call('PATCH', `/api/v1/root-servers/${id}`, { name: 'web-1' }, { 'if-match': before })).statusCode).toBe(412);
  });

  it('the settings (one record, no id) have an ETag and take If-Match too', async () => {
    const read = await call('GET', '/api/v1/settings');
    const etag = read.headers.etag as string;
    expect(etag).toMatch(/^"[\w-]{27}"$/);
    const changed = await call('PATCH', '/api/v1/settings', { keep_root_server_log_period: 9 }, { 'if-match': etag });
    expect(changed.statusCode).toBe(200);
    expect(changed.headers.etag).not.toBe(etag);
    const stale = await call('PATCH', '/api/v1/settings', { keep_root_server_log_period: 3 }, { 'if-match': etag });
    expect(stale.statusCode).toBe(412);
    expect((await call('GET', '/api/v1/settings')).json().keep_root_server_log_period).toBe(9);
  });
});

describe('If-Match under the row lock', () => {
  /** The writes that wait for the lock of partner `id`. */
  async function waiting() {
    const rows = await t.ctx.db.$queryRaw<{ n: number }[]>`
      SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE datname = current_database() AND wait_event_type = 'Lock' AND query ILIKE '%FROM "partners"%FOR UPDATE%'`;
    return rows[0]!.n;
  }

  async function until(check: () => Promise<boolean>) {
    for (let i = 0; i < 500 && !(await check()); i++) await new Promise((r) => setTimeout(r, 20));
    expect(await check(), 'the write waits for the row lock').toBe(true);
  }

  /**
   * Holds partner `id`'s row lock while `writes` start one after the other, each let go once it
   * waits for the lock (its If-Match already compared), then lets them all run.
   */
  async function racing(id: number, writes: (() => Promise<{ statusCode: number }>)[]) {
    const started: Promise<{ statusCode: number }>[] = [];
    await t.ctx.db.$transaction(
      async (tx) => {
        await tx.$queryRaw`SELECT 1 FROM partners WHERE id = ${id} FOR UPDATE`;
        for (const write of writes) {
          started.push(write());
          await until(async () => (await waiting()) === started.length);
        }
      },
      { timeout: 30_000 },
    );
    return (await Promise.all(started)).map((res) => res.statusCode);
  }

  it('two PATCHes with the same ETag at once: one runs (200), the other is refused (412) and changes nothing', async () => {
    const { id, etag } = await newPartner('Racing');
    const patch = (company: string) => () => call('PATCH', `/api/v1/partners/${id}`, { company_name: company }, { 'if-match': etag });
    expect(await racing(id, [patch('First'), patch('Second')])).toEqual([200, 412]);
    expect((await call('GET', `/api/v1/partners/${id}`)).json().company_name).toBe('First');
  });

  it('a PATCH and a DELETE with the same ETag at once: the PATCH runs, the DELETE is refused (412) and the record stays', async () => {
    const { id, etag } = await newPartner('Kept');
    const patch = () => call('PATCH', `/api/v1/partners/${id}`, { company_name: 'Kept Ltd' }, { 'if-match': etag });
    const remove = () => call('DELETE', `/api/v1/partners/${id}`, undefined, { 'if-match': etag });
    expect(await racing(id, [patch, remove])).toEqual([200, 412]);
    expect((await call('GET', `/api/v1/partners/${id}`)).json().company_name).toBe('Kept Ltd');
  });

  it('a write to a column the answer does not show does not refuse a matching If-Match', async () => {
    const { id, etag } = await newPartner('Quiet');
    // Another version of the row with the same answer: the write checks again and runs.
    await t.ctx.db.$executeRaw`UPDATE partners SET name = name WHERE id = ${id}`;
    const res = await call('PATCH', `/api/v1/partners/${id}`, { company_name: 'Quiet Inc' }, { 'if-match': etag });
    expect(res.statusCode).toBe(200);
  });
});
