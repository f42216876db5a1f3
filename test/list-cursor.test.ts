// Lists by cursor, on real PostgreSQL through the app: walking a list page by page with
// next_cursor returns every row exactly once while rows are inserted and deleted between pages
// (ties of the sort value, NULLs, enums, ascending and descending, raw-SQL monitor logs and their
// buckets); totals beyond the exact-count limit are the planner's estimate and say so; a cursor
// that was changed, cut, crafted without the installation's key, or belongs to another sort or list
// is a 400 naming it; offsets stay shallow.
import { createHash, createHmac, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { EXACT_TOTAL_LIMIT } from '../src/core/lists.js';
import { request } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';

const t = useTestApp();

const get = async (url: string) => {
  const res = await request(t.app, t.as.admin, { method: 'GET', url });
  return { status: res.statusCode, body: res.json() };
};

/** A small deterministic random source, so a failing walk can be replayed. */
function random(seed: number) {
  let x = seed;
  return (n: number) => {
    x = (x * 1_103_515_245 + 12_345) % 2_147_483_648;
    return x % n;
  };
}

interface Walk {
  /** Row keys in the order the pages gave them. */
  keys: string[];
  pages: number;
}

/** Every page of `url` by next_cursor; `between` runs after each page but the last. */
async function walk(url: string, keyOf: (item: Record<string, unknown>) => string, between?: (seen: Set<string>) => Promise<void>) {
  const out: Walk = { keys: [], pages: 0 };
  let cursor: string | null = null;
  do {
    const res = await get(`${url}${cursor ? `&cursor=${cursor}` : ''}`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    out.pages++;
    out.keys.push(...res.body.items.map(keyOf));
    cursor = res.body.next_cursor;
    if (cursor) await between?.(new Set(out.keys));
  } while (cursor && out.pages < 200);
  expect(cursor).toBeNull();
  return out;
}

/**
 * Walks `url` while `insert` adds a row and one row not yet listed and one already listed are
 * deleted after every page; then checks that the rows there from start to end came exactly once,
 * deleted rows never came after their deletion, and no row came twice.
 */
async function walkWithChurn(opts: {
  url: string;
  ids: () => Promise<number[]>;
  insert: (n: number) => Promise<void>;
  remove: (id: number) => Promise<void>;
  seed: number;
}) {
  const pick = random(opts.seed);
  const initial = new Set(await opts.ids());
  const deletedUnseen = new Set<number>();
  const deleted = new Set<number>();
  let n = 0;
  const result = await walk(
    opts.url,
    (item) => String(item.id),
    async (seen) => {
      await opts.insert(n++);
      const present = await opts.ids();
      const unseen = present.filter((id) => !seen.has(String(id)));
      const listed = present.filter((id) => seen.has(String(id)));
      for (const [pool, unseenOne] of [
        [unseen, true],
        [listed, false],
      ] as const) {
        if (pool.length === 0) continue;
        const id = pool[pick(pool.length)]!;
        await opts.remove(id);
        deleted.add(id);
        if (unseenOne) deletedUnseen.add(id);
      }
    },
  );
  const keys = result.keys.map(Number);
  expect(new Set(keys).size, 'no row twice').toBe(keys.length);
  const kept = [...initial].filter((id) => !deleted.has(id));
  expect(keys.filter((id) => initial.has(id) && !deleted.has(id)).sort((a, b) => a - b)).toEqual(kept.sort((a, b) => a - b));
  expect(keys.filter((id) => deletedUnseen.has(id))).toEqual([]);
  expect(result.pages).toBeGreaterThan(3);
  return keys;
}

/** Whether `keys` (of rows still present) are in the order the list promises. */
function inOrder<R>(rows: R[], compare: (a: R, b: R) => number) {
  return rows.every((row, i) => i === 0 || compare(rows[i - 1]!, row) < 0);
}

describe('paging by cursor', () => {
  it('partners sorted by name (many ties) and by -name: each row once while rows come and go', async () => {
    const db = t.ctx.db;
    const pick = random(7);
    const names = ['Ada', 'Bob', 'Cyd', 'Dee'];
    let made = 0;
    const insert = async () => {
      made++;
      await db.partner.create({ data: { name: `Walk ${names[pick(names.length)]}`, email: `walk${made}@names.example` } });
    };
    for (let i = 0; i < 30; i++) await insert();
    const ids = async () => (await db.partner.findMany({ where: { email: { endsWith: '@names.example' } } })).map((p) => p.id);
    const remove = async (id: number) => {
      await db.partner.delete({ where: { id } });
    };
    for (const [sort, seed] of [
      ['name', 1],
      ['-name', 2],
    ] as const) {
      const keys = await walkWithChurn({ url: `/api/v1/partners?q=names.example&sort=${sort}&limit=4`, ids, insert, remove, seed });
      const rows = await db.partner.findMany({ where: { id: { in: keys } } });
      const byId = new Map(rows.map((r) => [r.id, r]));
      const listed = keys.filter((id) => byId.has(id)).map((id) => byId.get(id)!);
      const dir = sort === 'name' ? 1 : -1;
      expect(inOrder(listed, (a, b) => dir * (a.name.localeCompare(b.name, 'en') || a.id - b.id))).toBe(true);
    }
  });

  it('subscriptions by a nullable date and by an enum, both ways: NULLs and enum values each in their place, each row once', async () => {
    const db = t.ctx.db;
    const partner = await db.partner.create({ data: { name: 'Walker', email: 'walker@subs.example' } });
    const pick = random(11);
    const states = ['draft', 'confirmed', 'running', 'suspended', 'cancelled'] as const;
    const day = (n: number) => new Date(Date.UTC(2027, 0, 1 + n));
    const insert = async (n: number) => {
      await db.subscription.create({
        data: {
          name: `walk-${n}-${pick(1000)}`,
          partner_id: partner.id,
          state: states[pick(states.length)],
          // A third without a date, the rest on few days: NULLs and ties.
          trial_end_date: pick(3) === 0 ? null : day(pick(5)),
        },
      });
    };
    const ids = async () => (await db.subscription.findMany({ where: { partner_id: partner.id } })).map((s) => s.id);
    const remove = async (id: number) => {
      await db.subscription.delete({ where: { id } });
    };
    // The database's order of the enum (a value added later comes last: 'suspended' after 'cancelled').
    const order = (
      await db.$queryRaw<{ label: string }[]>`
        SELECT enumlabel AS label FROM pg_enum WHERE enumtypid = '"SubscriptionState"'::regtype ORDER BY enumsortorder`
    ).map((r) => r.label);
    const rank = (s: string) => order.indexOf(s);
    for (const [sort, seed] of [
      ['trial_end_date', 3],
      ['-trial_end_date', 4],
      ['state', 5],
      ['-state', 6],
    ] as const) {
      // Each walk deletes more than it adds: start each from 30 rows.
      for (let i = (await ids()).length; i < 30; i++) await insert(1000 + seed * 100 + i);
      const keys = await walkWithChurn({
        url: `/api/v1/subscriptions?partner_id=${partner.id}&sort=${sort}&limit=3`,
        ids,
        insert,
        remove,
        seed,
      });
      const rows = new Map((await db.subscription.findMany({ where: { id: { in: keys } } })).map((r) => [r.id, r]));
      const listed = keys.filter((id) => rows.has(id)).map((id) => rows.get(id)!);
      const desc = sort.startsWith('-');
      // PostgreSQL's order: NULLs last ascending and first descending; enums in declared order.
      const value = (s: (typeof listed)[number]) =>
        sort.endsWith('state') ? rank(s.state) : s.trial_end_date === null ? Number.POSITIVE_INFINITY : s.trial_end_date.getTime();
      const compare = (a: (typeof listed)[number], b: (typeof listed)[number]) =>
        (desc ? -1 : 1) * (value(a) - value(b) || a.id - b.id || 0);
      expect(inOrder(listed, compare), sort).toBe(true);
    }
  });

  it('the action log newest first and by -created_at with equal times, and a record thread: each row once', async () => {
    const db = t.ctx.db;
    const pick = random(13);
    const instants = [0, 1, 2].map((n) => new Date(Date.UTC(2026, 5, 1, 12, 0, n)));
    const insert = async (n: number) => {
      await db.actionLog.create({
        data: { model_name: 'test.walk', rec_id: n, action_type: 'api_call', created_at: instants[pick(instants.length)] },
      });
    };
    for (let i = 0; i < 30; i++) await insert(i);
    const ids = async () => (await db.actionLog.findMany({ where: { model_name: 'test.walk' } })).map((r) => r.id);
    const remove = async (id: number) => {
      await db.actionLog.delete({ where: { id } });
    };
    for (const [sort, seed] of [
      ['', 8],
      ['&sort=-created_at', 9],
    ] as const) {
      const keys = await walkWithChurn({ url: `/api/v1/action-logs?model_name=test.walk&limit=4${sort}`, ids, insert, remove, seed });
      const rows = new Map((await db.actionLog.findMany({ where: { id: { in: keys } } })).map((r) => [r.id, r]));
      const listed = keys.filter((id) => rows.has(id)).map((id) => rows.get(id)!);
      const compare = sort
        ? (a: (typeof listed)[number], b: (typeof listed)[number]) => b.created_at.getTime() - a.created_at.getTime() || b.id - a.id
        : (a: (typeof listed)[number], b: (typeof listed)[number]) => b.id - a.id;
      expect(inOrder(listed, compare), sort).toBe(true);
    }

    const partner = await db.partner.create({ data: { name: 'Thread', email: 'thread@walk.example' } });
    const ref = { model_name: 'res.partner', rec_id: partner.id };
    const post = async (n: number) => {
      await db.message.create({ data: { ...ref, body: `message ${n}` } });
    };
    for (let i = 0; i < 20; i++) await post(i);
    await walkWithChurn({
      url: `/api/v1/partners/${partner.id}/messages?limit=3`,
      ids: async () => (await db.message.findMany({ where: ref })).map((m) => m.id),
      insert: post,
      remove: async (id) => {
        await db.message.delete({ where: { id } });
      },
      seed: 10,
    });
  });

  it('monitor logs, raw rows both ways and buckets: the cursor walk gives what one big page gives', async () => {
    const db = t.ctx.db;
    const server = await db.rootServer.create({ data: { name: 'walk-monitor', ip: '127.0.0.1' } });
    const start = Date.UTC(2026, 6, 1);
    await db.monitorLog.createMany({
      // Two samples share each 10th instant: ties on created_at.
      data: Array.from({ length: 60 }, (_, i) => ({
        root_server_id: server.id,
        created_at: new Date(start + (i - (i % 10 === 1 ? 1 : 0)) * 60_000),
        cpu_percent: i,
        ram_used_bytes: 1,
        ram_total_bytes: 2,
        ram_percent: 50,
        disk_used_bytes: 1,
        disk_total_bytes: 2,
        disk_percent: 50,
        net_rx_bytes_per_s: 0,
        net_tx_bytes_per_s: 0,
        load_1: 0,
        load_5: 0,
        load_15: 0,
      })),
    });
    const base = `/api/v1/root-servers/${server.id}/monitor-logs?from=${new Date(start).toISOString()}&to=${new Date(start + 3600_000).toISOString()}`;
    const key = (item: Record<string, unknown>) => `${item.created_at ?? item.bucket_start}/${item.cpu_percent}`;
    for (const query of ['&order=asc', '&order=desc', '&bucket=5m', '&bucket=5m&order=desc']) {
      const whole = (await get(`${base}${query}&limit=200`)).body;
      const paged = await walk(`${base}${query}&limit=7`, key);
      expect(paged.keys, query).toEqual(whole.items.map(key));
      expect(paged.pages).toBeGreaterThan(1);
      const first = (await get(`${base}${query}&limit=7`)).body;
      expect(first.total, query).toBe(whole.total);
    }
  });
});

describe('totals', () => {
  it('are exact up to the limit, then the planner estimate, marked as such', async () => {
    const db = t.ctx.db;
    await db.$executeRawUnsafe(
      `INSERT INTO action_logs (model_name, rec_id, action_type, input_text, created_at)
       SELECT 'test.many', n, 'api_call', 'bulk ' || n, now() FROM generate_series(1, ${EXACT_TOTAL_LIMIT + 500}) n`,
    );
    await db.$executeRawUnsafe('ANALYZE action_logs');
    const many = (await get('/api/v1/action-logs?model_name=test.many&limit=1')).body;
    expect(many.total_is_estimate).toBe(true);
    // At least what was counted; the planner's figure is near the real one.
    expect(many.total).toBeGreaterThan(EXACT_TOTAL_LIMIT);
    expect(many.total).toBeLessThan((EXACT_TOTAL_LIMIT + 500) * 3);
    const few = (await get('/api/v1/action-logs?model_name=test.many&rec_id=42')).body;
    expect(few).toMatchObject({ total: 1, total_is_estimate: false });
    const searched = (await get('/api/v1/action-logs?q=bulk%20424')).body;
    expect(searched).toMatchObject({ total: 11, total_is_estimate: false });
  });

  it("of a user's action log (rows it may not read left out) are estimated for the filter, not the table", async () => {
    const db = t.ctx.db;
    await db.$executeRawUnsafe(
      `INSERT INTO action_logs (model_name, rec_id, action_type, input_text, created_at)
       SELECT 'test.wide', n, 'api_call', 'wide ' || n, now() FROM generate_series(1, ${2 * EXACT_TOTAL_LIMIT + 500}) n`,
    );
    await db.$executeRawUnsafe('ANALYZE action_logs');
    const asUser = async (url: string) => (await request(t.app, t.as.user, { method: 'GET', url })).json();
    // The planner expects few rows for these filters: they are counted, as an operator's are.
    expect(await asUser('/api/v1/action-logs?q=wide%20424')).toMatchObject({ total: 11, total_is_estimate: false });
    expect(await asUser('/api/v1/action-logs?model_name=svc.standby.database')).toMatchObject({
      items: [],
      total: 0,
      total_is_estimate: false,
    });
  });
});

describe('searched lists (one scan serves the page and the total)', () => {
  it('answer the rows, total and next page of the same list unsearched, in any sort, offset and filter', async () => {
    const db = t.ctx.db;
    const names = ['Kilo', 'alpha', 'Echo', 'echo', 'Bravo', 'Charlie', 'delta'];
    const made = [];
    for (const [i, name] of names.entries()) {
      made.push(
        await db.partner.create({
          data: { name: `${name} one-scan`, company_name: i % 2 ? 'Oddco' : 'Evenco', email: `p${i}@one-scan.example` },
        }),
      );
    }
    await db.partner.create({ data: { name: 'Other', email: 'other@elsewhere.example' } });
    for (const sort of ['name', '-name', '-id', 'created_at']) {
      // What the list holds, read without q (a filter on the e-mail domain's exact rows).
      const all = (await get(`/api/v1/partners?sort=${sort}&limit=100`)).body.items.filter((p: { email: string }) =>
        p.email.endsWith('@one-scan.example'),
      );
      const ids = all.map((p: { id: number }) => p.id);
      expect(ids).toHaveLength(names.length);
      const first = (await get(`/api/v1/partners?q=ONE-SCAN&sort=${sort}&limit=3&offset=1`)).body;
      expect(first).toMatchObject({ total: names.length, total_is_estimate: false, offset: 1 });
      expect(first.items.map((p: { id: number }) => p.id)).toEqual(ids.slice(1, 4));
      // The cursor of a searched page continues it.
      const rest = (await get(`/api/v1/partners?q=one-scan&sort=${sort}&limit=10&cursor=${first.next_cursor}`)).body;
      expect(rest.items.map((p: { id: number }) => p.id)).toEqual(ids.slice(4));
      expect(rest.next_cursor).toBeNull();
      const last = (await get(`/api/v1/partners?q=one-scan&sort=${sort}&limit=2&offset=6`)).body;
      expect(last).toMatchObject({ total: names.length, next_cursor: null });
      expect(last.items.map((p: { id: number }) => p.id)).toEqual(ids.slice(6));
    }
    const even = (await get('/api/v1/partners?q=evenco&sort=id')).body;
    expect(even.items.map((p: { id: number }) => p.id)).toEqual(made.filter((_, i) => i % 2 === 0).map((p) => p.id));
    const byEmail = (await get('/api/v1/partners?q=one-scan&email=p3@one-scan.example')).body;
    expect(byEmail).toMatchObject({ total: 1, items: [{ id: made[3]!.id }] });
    expect((await get('/api/v1/partners?q=one-scan&offset=50')).body).toMatchObject({ items: [], total: names.length });
  });
});

describe('bad cursors and offsets', () => {
  it('a cursor changed, cut, made for another sort or list, or not a cursor is a 400 naming cursor', async () => {
    const db = t.ctx.db;
    for (let i = 0; i < 3; i++) await db.partner.create({ data: { name: `Bad ${i}`, email: `bad${i}@cursor.example` } });
    const cursor = (await get('/api/v1/partners?q=cursor.example&sort=name&limit=1')).body.next_cursor as string;
    expect(cursor).toEqual(expect.any(String));
    const [body, sum] = cursor.split('.') as [string, string];
    const json = Buffer.from(body, 'base64url').toString();
    const edited = `${Buffer.from(json.replace('Bad 0', 'Bad 1')).toString('base64url')}.${sum}`;
    const bad = {
      changed: `/api/v1/partners?q=cursor.example&sort=name&cursor=${edited}`,
      cut: `/api/v1/partners?q=cursor.example&sort=name&cursor=${cursor.slice(0, -2)}`,
      'another sort': `/api/v1/partners?q=cursor.example&sort=-name&cursor=${cursor}`,
      'the default sort': `/api/v1/partners?q=cursor.example&cursor=${cursor}`,
      'another list': `/api/v1/subscriptions?sort=name&cursor=${cursor}`,
      'another list, same table': `/api/v1/action-logs?cursor=${cursor}`,
      'not a cursor': '/api/v1/partners?cursor=hello',
      'no digest': `/api/v1/partners?q=cursor.example&sort=name&cursor=${body}.`,
    };
    for (const [why, url] of Object.entries(bad)) {
      const res = await get(url);
      expect(res.status, why).toBe(400);
      expect(res.body.error.code, why).toBe('validation_error');
      expect(
        res.body.error.details.fields.map((f: { field: string }) => f.field),
        why,
      ).toEqual(['querystring.cursor']);
    }
    const good = await get(`/api/v1/partners?q=cursor.example&sort=name&limit=1&cursor=${cursor}`);
    expect(good.body.items.map((p: { name: string }) => p.name)).toEqual(['Bad 1']);
  });

  it('a cursor made without the key derived from the master key is a 400 naming cursor; a real one pages', async () => {
    const db = t.ctx.db;
    const ids: number[] = [];
    for (let i = 0; i < 4; i++) ids.push((await db.partner.create({ data: { name: `Keyed ${i}`, email: `keyed${i}@cursor.example` } })).id);
    // What an attacker (or a cursor from before the key) would send: the row after ids[0], by id.
    const json = JSON.stringify(['partners', 'id', ids[0]]);
    const body = Buffer.from(json).toString('base64url');
    const crafted = {
      'the old unkeyed sha256': createHash('sha256').update(json).digest('base64url').slice(0, 16),
      'an HMAC under another key (another master key)': createHmac('sha256', randomBytes(32)).update(json).digest('base64url').slice(0, 22),
    };
    for (const [why, sum] of Object.entries(crafted)) {
      const res = await get(`/api/v1/partners?q=keyed&cursor=${body}.${sum}`);
      expect(res.status, why).toBe(400);
      expect(res.body.error.code, why).toBe('validation_error');
      expect(res.body.error.message, why).toContain('start again from the first page');
      expect(
        res.body.error.details.fields.map((f: { field: string }) => f.field),
        why,
      ).toEqual(['querystring.cursor']);
    }
    // The same cursor as the service makes it pages on.
    const first = await get('/api/v1/partners?q=keyed&limit=1');
    expect(first.body.next_cursor.split('.')[0]).toBe(body);
    const second = await get(`/api/v1/partners?q=keyed&limit=2&cursor=${first.body.next_cursor}`);
    expect(second.status).toBe(200);
    expect(second.body.items.map((p: { id: number }) => p.id)).toEqual(ids.slice(1, 3));
  });

  it('cursor with an offset, and an offset deeper than the limit, are 400s naming offset', async () => {
    const cursor = (await get('/api/v1/partners?limit=1')).body.next_cursor as string;
    for (const url of [`/api/v1/partners?cursor=${cursor}&offset=5`, '/api/v1/partners?offset=10001', '/api/v1/action-logs?offset=20000']) {
      const res = await get(url);
      expect(res.status, url).toBe(400);
      expect(
        res.body.error.details.fields.map((f: { field: string }) => f.field),
        url,
      ).toEqual(['querystring.offset']);
    }
    expect((await get('/api/v1/partners?offset=10000')).status).toBe(200);
  });
});

describe('the action log offers q, sort and from/to; time-ordered lists offer from/to', () => {
  it('q finds a substring of the input or output, case-insensitively; under 3 characters is refused', async () => {
    const db = t.ctx.db;
    await db.actionLog.createMany({
      data: [
        { model_name: 'test.q', rec_id: 1, action_type: 'ssh_command', input_text: 'systemctl restart ODOO@17', output_text: 'ok' },
        { model_name: 'test.q', rec_id: 2, action_type: 'ssh_command', input_text: 'uptime', output_text: 'Connection REFUSED by host' },
        { model_name: 'test.q', rec_id: 3, action_type: 'ssh_command', input_text: 'uptime', output_text: '100% done' },
      ],
    });
    const recs = async (q: string) =>
      (await get(`/api/v1/action-logs?model_name=test.q&q=${encodeURIComponent(q)}`)).body.items.map((r: { rec_id: number }) => r.rec_id);
    expect(await recs('odoo@17')).toEqual([1]);
    expect(await recs('connection refused')).toEqual([2]);
    expect(await recs('uptime')).toEqual([3, 2]);
    expect(await recs('0% d')).toEqual([3]);
    const short = await get('/api/v1/action-logs?q=up');
    expect(short.status).toBe(400);
    expect(short.body.error.details.fields[0].field).toBe('querystring.q');
    const sorted = (await get('/api/v1/action-logs?model_name=test.q&sort=created_at')).body.items.map((r: { rec_id: number }) => r.rec_id);
    expect(sorted).toEqual([1, 2, 3]);
  });

  it('messages, webhook calls and alerts take from/to', async () => {
    const db = t.ctx.db;
    const partner = await db.partner.create({ data: { name: 'Timed', email: 'timed@walk.example' } });
    const at = (h: number) => new Date(Date.UTC(2026, 3, 1, h));
    await db.message.createMany({
      data: [1, 2, 3].map((h) => ({ model_name: 'res.partner', rec_id: partner.id, body: `at ${h}`, created_at: at(h) })),
    });
    const window = `from=${at(2).toISOString()}&to=${at(3).toISOString()}`;
    const messages = (await get(`/api/v1/partners/${partner.id}/messages?${window}`)).body;
    expect(messages.items.map((m: { body: string }) => m.body)).toEqual(['at 2']);

    const hook = await db.webhook.create({ data: { token: 'c'.repeat(64), model_name: 'res.partner', rec_id: partner.id } });
    await db.webhookCall.createMany({
      data: [1, 2, 3].map((h) => ({ webhook_id: hook.id, called_at: at(h), status: 200, duration_ms: 1, source_ip: '::1', body_size: 0 })),
    });
    const calls = (await get(`/api/v1/webhooks/${hook.id}/calls?${window}`)).body;
    expect(calls.items.map((c: { called_at: string }) => c.called_at)).toEqual([at(2).toISOString()]);

    await db.alert.createMany({
      data: [1, 2, 3].map((h) => ({
        rule_id: 999,
        root_server_id: 999,
        metric: 'cpu_percent',
        value: h,
        state: 'resolved',
        started_at: at(h),
      })),
    });
    const alerts = (await get(`/api/v1/alerts?rule_id=999&${window}`)).body;
    expect(alerts.items.map((a: { value: number }) => a.value)).toEqual([2]);
  });
});
