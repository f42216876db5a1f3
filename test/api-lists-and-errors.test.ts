// Lists and errors as curl and Postman users meet them, on real PostgreSQL and Redis through the
// app: ?sort=, ?q= (case-insensitive, wildcards matched literally), exact filters, an unknown
// parameter refused naming it, action-log time windows, `Link: rel="next"` while pages follow;
// error details in one shape per code: validation_error names its fields (a reference to a missing
// record included), a uniqueness conflict names the fields and the record that already holds
// them; a body that is not JSON is told to be sent as JSON.
import { describe, expect, it } from 'vitest';
import { request } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';

const t = useTestApp();

const get = async (url: string) => {
  const res = await request(t.app, t.as.user, { method: 'GET', url });
  return { status: res.statusCode, body: res.json() };
};
const post = (url: string, payload: object) => request(t.app, t.as.admin, { method: 'POST', url, payload });

describe('lists', () => {
  it('sort ascending and descending by the documented fields; ties broken by id', async () => {
    for (const [name, ip] of [
      ['bravo', '10.0.0.2'],
      ['alpha', '10.0.0.3'],
      ['charlie', '10.0.0.1'],
    ]) {
      expect((await post('/api/v1/root-servers', { name, ip })).statusCode).toBe(201);
    }
    const names = async (query: string) => (await get(`/api/v1/root-servers?${query}`)).body.items.map((s: { name: string }) => s.name);
    expect(await names('sort=name')).toEqual(['alpha', 'bravo', 'charlie']);
    expect(await names('sort=-name')).toEqual(['charlie', 'bravo', 'alpha']);
    expect(await names('sort=ip')).toEqual(['charlie', 'bravo', 'alpha']);
    expect(await names('sort=-id')).toEqual(['charlie', 'alpha', 'bravo']);
    const refused = await get('/api/v1/root-servers?sort=password');
    expect(refused.status).toBe(400);
    expect(refused.body.error.details.fields[0].field).toBe('querystring.sort');
  });

  it('q searches the naming fields case-insensitively; % and _ are plain characters', async () => {
    await post('/api/v1/partners', { name: 'Acme 100% Ltd', email: 'sales@acme.example' });
    await post('/api/v1/partners', { name: 'Other', email: 'first_last@other.example' });
    await post('/api/v1/partners', { name: 'Third', email: 'firstXlast@third.example' });
    const found = async (q: string) =>
      (await get(`/api/v1/partners?q=${encodeURIComponent(q)}`)).body.items.map((p: { name: string }) => p.name);
    expect(await found('ACME')).toEqual(['Acme 100% Ltd']);
    expect(await found('%')).toEqual(['Acme 100% Ltd']);
    expect(await found('first_last')).toEqual(['Other']);
    expect(await found('third.EXAMPLE')).toEqual(['Third']);
    expect((await get('/api/v1/partners?q=nothing-like-this')).body).toMatchObject({ items: [], total: 0 });
  });

  it('exact filters filter; an unknown parameter is a 400 naming it, on lists and on routes that take none', async () => {
    const servers = await get('/api/v1/root-servers?ip=10.0.0.1');
    expect(servers.body.items.map((s: { name: string }) => s.name)).toEqual(['charlie']);
    for (const url of ['/api/v1/root-servers?name=alpha', '/api/v1/settings?verbose=1', '/api/v1/partners?limit=5&colour=red']) {
      const res = await get(url);
      expect(res.status, url).toBe(400);
      expect(res.body.error.code).toBe('validation_error');
      const field = url.split('?')[1]!.split('&').at(-1)!.split('=')[0];
      expect(res.body.error.details.fields).toEqual([{ field: `querystring.${field}`, message: 'is not a known parameter or field' }]);
    }
  });

  it('action logs take a time window [from, to)', async () => {
    const old = await t.ctx.db.actionLog.create({
      data: {
        model_name: 'res.partner',
        rec_id: 1,
        action_type: 'api_call',
        input_text: 'old',
        created_at: new Date('2026-01-01T00:00:00Z'),
      },
    });
    const recent = await t.ctx.db.actionLog.create({
      data: { model_name: 'res.partner', rec_id: 1, action_type: 'api_call', input_text: 'recent' },
    });
    const ids = async (query: string) =>
      (await get(`/api/v1/action-logs?model_name=res.partner&${query}`)).body.items.map((r: { id: number }) => r.id);
    expect(await ids('to=2026-06-01T00:00:00Z')).toEqual([old.id]);
    expect(await ids('from=2026-06-01T00:00:00Z')).toEqual([recent.id]);
    expect(await ids('from=2026-01-01T00:00:00Z&to=2026-01-01T00:00:00.001Z')).toEqual([old.id]);
    expect((await get('/api/v1/action-logs?from=yesterday')).status).toBe(400);
  });
});

describe('Link: rel="next"', () => {
  /** The next page's URL of an answer, checked to be absolute under BASE_URL, or undefined. */
  function nextOf(res: { headers: Record<string, unknown> }): URL | undefined {
    const link = res.headers.link as string | undefined;
    if (link === undefined) return undefined;
    const [, href] = /^<([^>]+)>; rel="next"$/.exec(link) ?? [];
    expect(href, link).toMatch(/^http:\/\/svc\.test\/api\/v1\//);
    return new URL(href!);
  }
  const follow = (url: URL) => request(t.app, t.as.user, { method: 'GET', url: `${url.pathname}${url.search}` });

  it('names the next page of a list, its filters kept, until the last page', async () => {
    for (const name of ['Paged 1', 'Paged 2', 'Paged 3']) {
      expect((await post('/api/v1/partners', { name, email: `${name.replace(' ', '')}@paged.example` })).statusCode).toBe(201);
    }
    const first = await request(t.app, t.as.user, { method: 'GET', url: '/api/v1/partners?q=paged&limit=2&sort=name' });
    expect(first.json().items.map((p: { name: string }) => p.name)).toEqual(['Paged 1', 'Paged 2']);
    const next = nextOf(first)!;
    expect(Object.fromEntries(next.searchParams)).toMatchObject({ q: 'paged', limit: '2', sort: 'name' });
    const second = await follow(next);
    expect(second.json().items.map((p: { name: string }) => p.name)).toEqual(['Paged 3']);
    expect(nextOf(second)).toBeUndefined();
  });

  it('is sent by lists that are not a resource of their own too (the chatter of a record)', async () => {
    const partner = (await post('/api/v1/partners', { name: 'Chatty', email: 'chatty@example.com' })).json();
    for (const body of ['one', 'two']) {
      expect((await post(`/api/v1/partners/${partner.id}/messages`, { body })).statusCode).toBe(201);
    }
    const page = await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/partners/${partner.id}/messages?limit=1` });
    const next = nextOf(page)!;
    expect(next.pathname).toBe(`/api/v1/partners/${partner.id}/messages`);
    const rest = await follow(next);
    expect(rest.json().items).toHaveLength(1);
    expect(rest.json().items[0].id).not.toBe(page.json().items[0].id);
  });
});

describe('error details', () => {
  it('a reference to a missing record is a 400 naming the field', async () => {
    const res = await post('/api/v1/trial-packages', { name: 'Orphan', url_string: 'orphan', database_template_id: 999999 });
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatchObject({
      code: 'validation_error',
      message: 'Invalid input: body.database_template_id names no existing record',
      details: { fields: [{ field: 'body.database_template_id', message: 'names no existing record' }] },
    });
  });

  it('a body that is not JSON is refused (415) saying to send JSON, whatever its content type; nothing is created', async () => {
    const json = JSON.stringify({ name: 'Form Sent', email: 'form-sent@example.com' });
    for (const type of ['application/x-www-form-urlencoded', 'text/plain', 'application/xml']) {
      const res = await request(t.app, t.as.admin, {
        method: 'POST',
        url: '/api/v1/partners',
        headers: { 'content-type': type },
        payload: json,
      });
      expect(res.statusCode, type).toBe(415);
      expect(res.json().error, type).toEqual({
        code: 'validation_error',
        message: 'The body must be JSON: send it with Content-Type: application/json',
        details: { fields: [{ field: 'body', message: 'The body must be JSON: send it with Content-Type: application/json' }] },
      });
    }
    expect((await get('/api/v1/partners?q=form-sent')).body.total).toBe(0);
  });

  it('a validation_error names every field in details.fields', async () => {
    const res = await post('/api/v1/partners', { name: '', email: 'not-an-email', surprise: 1 });
    expect(res.statusCode).toBe(400);
    const { code, details } = res.json().error;
    expect(code).toBe('validation_error');
    expect(details.fields.map((f: { field: string }) => f.field).sort()).toEqual(['body.email', 'body.name', 'body.surprise']);
    for (const f of details.fields) expect(typeof f.message).toBe('string');
  });

  it('messages name a record in the singular, -ies plurals included', async () => {
    const res = await request(t.app, t.as.admin, { method: 'GET', url: '/api/v1/git-repositories/999999' });
    expect(res.statusCode).toBe(404);
    expect(res.json().error.message).toBe('Git repository not found');
  });

  it('a date-time PostgreSQL cannot store (year 0) is a 400 naming the field', async () => {
    const res = await request(t.app, t.as.user, { method: 'GET', url: '/api/v1/action-logs?from=0000-01-01T00:00:00Z' });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.details.fields).toEqual([{ field: 'querystring.from', message: 'must be between the years 1 and 9999' }]);
  });

  it('a uniqueness conflict names the fields and the record that has them', async () => {
    const first = (await post('/api/v1/partners', { name: 'Dup', email: 'dup@example.com' })).json();
    const dup = await post('/api/v1/partners', { name: 'Dup 2', email: 'DUP@example.com' });
    expect(dup.statusCode).toBe(409);
    expect(dup.json().error).toMatchObject({
      code: 'conflict',
      message: expect.stringContaining(`partner ${first.id}`),
      details: { fields: [{ field: 'email' }], existing_id: first.id },
    });

    const pkg = (await post('/api/v1/trial-packages', { name: 'CRM', url_string: 'crm-dup' })).json();
    const request1 = {
      name: 'Jane',
      company_name: 'Acme',
      email: 'jane@example.com',
      mobile: '+49 170 1234567',
      company_size: '1-5',
      trial_package_id: pkg.id,
    };
    const created = (await post('/api/v1/trial-requests', request1)).json();
    const again = await post('/api/v1/trial-requests', { ...request1, email: 'Jane@Example.com' });
    expect(again.statusCode).toBe(409);
    expect(again.json().error.details).toEqual({
      fields: [
        { field: 'email', message: expect.any(String) },
        { field: 'trial_package_id', message: expect.any(String) },
      ],
      existing_id: created.id,
    });

    const server = (await post('/api/v1/root-servers', { ip: '10.9.9.9' })).json();
    const sameUuid = await post('/api/v1/root-servers', { ip: '10.9.9.8', uuid: server.uuid });
    expect(sameUuid.json().error.details).toMatchObject({ fields: [{ field: 'uuid' }], existing_id: server.id });
  });
});
