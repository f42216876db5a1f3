// Backup servers over the real API, real PostgreSQL and a local HTTP server that implements the
// backup API as the service calls it (X-API-Key, /api/ping, /api/cloud-accounts, /api/backups?db_name=) and
// records what it receives. Failure modes are real: a closed port, a wrong key, a server that
// never answers, a web page instead of the API.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { backup as backupFeature } from '../src/backup/index.js';
import { findWebhookMethod } from '../src/core/webhook-methods.js';
import { actionsOf, request } from './helpers/api.js';
import { useTestApp, withConfig } from './helpers/app.js';
import { sendJson, startRecordingServer, type RecordingServer } from './helpers/http-recorder.js';
import { freePort } from './helpers/sshd.js';

const API_KEY = 'bk-key-0123456789';

interface RemoteAccount {
  id: number | string;
  uuid: string;
  provider: string;
  name: string | null;
}

let remote: RecordingServer;
// What the fake backup server currently holds.
let remoteAccounts: RemoteAccount[] = [];
let remoteBackups: { id: number; db_name: string; state: string; created_at: string; url: string }[] = [];

beforeAll(async () => {
  remote = await startRecordingServer((req, res) => {
    if (req.path === '/hang/api/ping') return; // never answers
    if (req.path === '/web/api/ping') {
      res.writeHead(200, { 'content-type': 'text/html' });
      return res.end('<!doctype html><title>Welcome</title>');
    }
    if (req.headers['x-api-key'] !== API_KEY) return sendJson(res, 401, { error: 'invalid api key' });
    if (req.path.startsWith('/long')) {
      // A long answer (an internal page, say): the action log keeps only its beginning.
      return sendJson(res, req.path === '/long/api/ping' ? 200 : 500, { filler: 'x'.repeat(5000), tail: 'END-OF-ANSWER' });
    }
    switch (req.path) {
      case '/api/ping':
        return sendJson(res, 200, { status: 'ok' });
      case '/api/cloud-accounts':
        return sendJson(res, 200, remoteAccounts);
      case '/api/backups':
        return sendJson(
          res,
          200,
          remoteBackups.filter((b) => b.db_name === req.query.get('db_name')),
        );
      default:
        return sendJson(res, 404, { error: 'no such route' });
    }
  });
});
afterAll(async () => {
  await remote?.close();
});

const t = useTestApp();

async function createServer(payload: Record<string, unknown> = {}) {
  const res = await request(t.app, t.as.operator, {
    method: 'POST',
    url: '/api/v1/backup-servers',
    payload: { url: remote.url, download_url: 'https://backups.example.com/dl', api_key: API_KEY, ...payload },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json() as { id: number; cloud_account_ids: number[] };
}

const act = actionsOf(t, 'backup-servers');

describe('backup server records', () => {
  it('requires url, download_url and api_key, and fills the default paths', async () => {
    for (const missing of ['url', 'download_url', 'api_key']) {
      const payload: Record<string, unknown> = { url: remote.url, download_url: 'https://d.example.com', api_key: 'k' };
      delete payload[missing];
      const res = await request(t.app, t.as.operator, { method: 'POST', url: '/api/v1/backup-servers', payload });
      expect(res.statusCode).toBe(400);
      expect(res.json().error.details.fields.map((d: { field: string }) => d.field)).toContain(`body.${missing}`);
    }
    const created = await createServer({ name: 'bk1' });
    expect(created).toMatchObject({
      name: 'bk1',
      api_key_set: true,
      drop_db_path: '/svc/database/drop',
      backup_db_path: '/svc/database/backup',
      restore_db_path: '/svc/database/restore',
      enable_local_backup: false,
      enable_cloud_backup: false,
      cloud_account_ids: [],
    });
    expect(JSON.stringify(created)).not.toContain(API_KEY);
    const [raw] = await t.ctx.db.$queryRaw<{ api_key: string }[]>`SELECT api_key FROM backup_servers WHERE id = ${created.id}`;
    expect(raw!.api_key).toMatch(/^v\d+:/);
  });

  it('refuses bad URLs and paths, an emptied API key, and writes by users', async () => {
    const server = await createServer();
    for (const payload of [
      { url: 'ftp://x' },
      { download_url: 'not a url' },
      { backup_db_path: 'no-slash' },
      { api_key: '' },
      { api_key: null },
    ]) {
      const res = await request(t.app, t.as.operator, { method: 'PATCH', url: `/api/v1/backup-servers/${server.id}`, payload });
      expect(res.statusCode, JSON.stringify(payload)).toBe(400);
    }
    expect((await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/backup-servers/${server.id}` })).statusCode).toBe(200);
    expect((await request(t.app, t.as.user, { method: 'DELETE', url: `/api/v1/backup-servers/${server.id}` })).statusCode).toBe(403);
    expect((await act(server.id, 'test_connection', undefined, t.as.user)).statusCode).toBe(403);
  });
});

describe('what the outbound client will use is checked when it is written', () => {
  const fieldsOf = (res: { json(): { error: { details: { fields: { field: string }[] } } } }) =>
    res.json().error.details.fields.map((d) => d.field);

  it('base URLs carry no query, fragment or credentials: 400 naming the field at create and PATCH, nothing changed', async () => {
    const server = await createServer();
    for (const field of ['url', 'download_url']) {
      for (const value of [
        `${remote.url}/internal?`,
        `${remote.url}/internal?a=1`,
        `${remote.url}/#top`,
        `http://me:pw@127.0.0.1:${remote.port}`,
      ]) {
        const before = await t.ctx.db.backupServer.count();
        const created = await request(t.app, t.as.operator, {
          method: 'POST',
          url: '/api/v1/backup-servers',
          payload: { url: remote.url, download_url: 'https://d.example.com', api_key: API_KEY, [field]: value },
        });
        expect(created.statusCode, `${field}=${value}`).toBe(400);
        expect(created.json().error.code).toBe('validation_error');
        expect(fieldsOf(created)).toEqual([`body.${field}`]);
        expect(await t.ctx.db.backupServer.count()).toBe(before);
        const patched = await request(t.app, t.as.operator, {
          method: 'PATCH',
          url: `/api/v1/backup-servers/${server.id}`,
          payload: { [field]: value },
        });
        expect(patched.statusCode, `${field}=${value}`).toBe(400);
        expect(fieldsOf(patched)).toEqual([`body.${field}`]);
      }
    }
    const stored = await t.ctx.db.backupServer.findUniqueOrThrow({ where: { id: server.id } });
    expect(stored).toMatchObject({ url: remote.url, download_url: 'https://backups.example.com/dl' });
  });

  it('an api_key an HTTP header cannot carry is refused at create and PATCH', async () => {
    const server = await createServer();
    for (const apiKey of ['key€', 'kéy', 'key\nX-Other: 1', 'two words']) {
      const created = await request(t.app, t.as.operator, {
        method: 'POST',
        url: '/api/v1/backup-servers',
        payload: { url: remote.url, download_url: 'https://d.example.com', api_key: apiKey },
      });
      expect(created.statusCode, apiKey).toBe(400);
      expect(fieldsOf(created)).toEqual(['body.api_key']);
      const patched = await request(t.app, t.as.operator, {
        method: 'PATCH',
        url: `/api/v1/backup-servers/${server.id}`,
        payload: { api_key: apiKey },
      });
      expect(patched.statusCode, apiKey).toBe(400);
      expect(fieldsOf(patched)).toEqual(['body.api_key']);
    }
  });

  it('an api_key stored before that rule is a clear 400 when used, not a 500, and nothing is sent', async () => {
    const server = await createServer();
    await t.ctx.db.backupServer.update({ where: { id: server.id }, data: { api_key: await t.ctx.secretBox.encrypt('key€') } });
    const calls = remote.calls.length;
    const res = await act(server.id, 'test_connection');
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().error).toMatchObject({
      code: 'user_error',
      message: expect.stringMatching(/x-api-key header would carry characters an HTTP header cannot carry; set that value again/),
    });
    expect(res.body).not.toContain('key€');
    expect(remote.calls.length).toBe(calls);
  });

  it('a url stored with a query before that rule is refused when used, not called', async () => {
    const server = await createServer();
    await t.ctx.db.backupServer.update({ where: { id: server.id }, data: { url: `${remote.url}/internal?` } });
    const calls = remote.calls.length;
    const res = await act(server.id, 'test_connection');
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().error).toMatchObject({ code: 'user_error', message: expect.stringMatching(/must not have a query.*set it again$/) });
    expect(remote.calls.length).toBe(calls);
  });
});

describe('test_connection', () => {
  it('pings with the API key and logs an api_call row without it', async () => {
    const server = await createServer();
    const res = await act(server.id, 'test_connection');
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ ok: true });
    const ping = remote.callsTo('/api/ping').at(-1)!;
    expect(ping.method).toBe('GET');
    expect(ping.headers['x-api-key']).toBe(API_KEY);
    const logs = await t.ctx.db.actionLog.findMany({ where: { model_name: 'svc.saas.backup.server', rec_id: server.id } });
    expect(logs).toHaveLength(1);
    expect(logs[0]).toMatchObject({ action_type: 'api_call', status: 'success', user_id: t.as.operator.userId });
    expect(logs[0]!.input_text).toContain('x-api-key: [redacted]');
    expect(JSON.stringify(logs)).not.toContain(API_KEY);
  });

  it('the action log keeps a short excerpt of the answer, successful or not', async () => {
    for (const [path, status] of [
      ['/long', 200],
      ['/long-fail', 400],
    ] as const) {
      const server = await createServer({ url: `${remote.url}${path}` });
      expect((await act(server.id, 'test_connection')).statusCode).toBe(status);
      const [log] = await t.ctx.db.actionLog.findMany({ where: { model_name: 'svc.saas.backup.server', rec_id: server.id } });
      expect(log!.output_text).toMatch(/^HTTP (200|500)\n\{"filler":"x{100}/);
      expect(log!.output_text).not.toContain('END-OF-ANSWER');
      expect(log!.output_text.length, log!.output_text).toBeLessThan(700);
    }
  });

  it('a wrong key: 400 user_error saying the key was refused, with the remote error', async () => {
    const server = await createServer({ api_key: 'wrong-key-abc' });
    const res = await act(server.id, 'test_connection');
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe('user_error');
    expect(res.json().error.message).toMatch(/refused the API key: GET .*\/api\/ping answered HTTP 401: .*invalid api key/);
    const log = await t.ctx.db.actionLog.findFirst({ where: { model_name: 'svc.saas.backup.server', rec_id: server.id } });
    expect(log).toMatchObject({ status: 'failure' });
    expect(log!.input_text + log!.output_text).not.toContain('wrong-key-abc');
  });

  it('a refused connection, a timeout and a non-JSON answer each get a clear 400', async () => {
    const closed = await createServer({ url: `http://127.0.0.1:${await freePort()}` });
    const hanging = await createServer({ url: `${remote.url}/hang` });
    const web = await createServer({ url: `${remote.url}/web/` });
    const cases: [number, RegExp][] = [
      [closed.id, /\/api\/ping: connection refused$/],
      [hanging.id, /\/hang\/api\/ping: no answer within 500 ms$/],
      [web.id, /\/web\/api\/ping answered HTTP 200 with something that is not JSON: <!doctype html>/],
    ];
    for (const [id, message] of cases) {
      // A short timeout for the server that never answers; the file keeps the generous default.
      const res = await withConfig(t, id === hanging.id ? { OUTBOUND_TIMEOUT_MS: 500 } : {}, () => act(id, 'test_connection'));
      expect(res.statusCode).toBe(400);
      expect(res.json().error.code).toBe('user_error');
      expect(res.json().error.message).toMatch(message);
      const log = await t.ctx.db.actionLog.findFirst({ where: { model_name: 'svc.saas.backup.server', rec_id: id } });
      expect(log).toMatchObject({ action_type: 'api_call', status: 'failure' });
    }
  });
});

describe('sync_cloud_accounts', () => {
  const accountsOf = (id: number) => t.ctx.db.backupCloudAccount.findMany({ where: { backup_server_id: id }, orderBy: { uuid: 'asc' } });

  it('creates, updates and removes by uuid; other servers are untouched', async () => {
    const server = await createServer();
    const other = await createServer();
    remoteAccounts = [
      { id: 1, uuid: 'u-a', provider: 's3', name: 'A' },
      { id: 2, uuid: 'u-b', provider: 'gdrive', name: 'B' },
      { id: 3, uuid: 'u-c', provider: 'dropbox', name: null },
    ];
    expect((await act(other.id, 'sync_cloud_accounts')).json()).toMatchObject({ created: 3 });
    let res = await act(server.id, 'sync_cloud_accounts');
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ created: 3, updated: 0, deleted: 0, unchanged: 0 });
    const first = await accountsOf(server.id);
    expect(first.map((a) => [a.uuid, a.remote_id, a.provider, a.name])).toEqual([
      ['u-a', '1', 's3', 'A'],
      ['u-b', '2', 'gdrive', 'B'],
      ['u-c', '3', 'dropbox', null],
    ]);

    remoteAccounts = [
      { id: 1, uuid: 'u-a', provider: 's3', name: 'A' }, // unchanged
      { id: '22', uuid: 'u-b', provider: 'gdrive', name: 'B renamed' }, // updated
      { id: 4, uuid: 'u-d', provider: 'azure', name: 'D' }, // new; u-c is gone
    ];
    res = await act(server.id, 'sync_cloud_accounts');
    expect(res.json()).toEqual({ created: 1, updated: 1, deleted: 1, unchanged: 1 });
    const second = await accountsOf(server.id);
    expect(second.map((a) => [a.uuid, a.remote_id, a.name])).toEqual([
      ['u-a', '1', 'A'],
      ['u-b', '22', 'B renamed'],
      ['u-d', '4', 'D'],
    ]);
    // Updated in place: same local ids for the accounts that stayed.
    expect(second[0]!.id).toBe(first[0]!.id);
    expect(second[1]!.id).toBe(first[1]!.id);
    expect((await accountsOf(other.id)).map((a) => a.uuid)).toEqual(['u-a', 'u-b', 'u-c']);

    const got = (await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/backup-servers/${server.id}` })).json();
    expect(got.cloud_account_ids).toEqual(second.map((a) => a.id).sort((a, b) => a - b));
    const list = (await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/backup-servers/${server.id}/cloud-accounts` })).json();
    expect(list).toMatchObject({ total: 3, items: expect.arrayContaining([expect.objectContaining({ uuid: 'u-d', provider: 'azure' })]) });
    const messages = (await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/backup-servers/${server.id}/messages` })).json();
    expect(messages.items[0].body).toBe('Cloud accounts synced: 1 created, 1 updated, 1 removed, 1 unchanged.');

    remoteAccounts = [];
    expect((await act(server.id, 'sync_cloud_accounts')).json()).toEqual({ created: 0, updated: 0, deleted: 3, unchanged: 0 });
    expect(await accountsOf(server.id)).toEqual([]);
  });

  it('is one transaction: a failure halfway leaves the accounts as they were', async () => {
    const server = await createServer();
    remoteAccounts = [
      { id: 1, uuid: 'keep', provider: 's3', name: 'K' },
      { id: 2, uuid: 'drop-me', provider: 's3', name: 'D' },
    ];
    await act(server.id, 'sync_cloud_accounts');
    const before = await accountsOf(server.id);
    // A real database failure on the last insert of the next sync.
    await t.ctx.db.$executeRawUnsafe(`
      CREATE FUNCTION refuse_boom() RETURNS trigger AS $$
      BEGIN IF NEW.uuid = 'boom' THEN RAISE EXCEPTION 'refused by test trigger'; END IF; RETURN NEW; END $$ LANGUAGE plpgsql`);
    await t.ctx.db.$executeRawUnsafe(
      `CREATE TRIGGER refuse_boom BEFORE INSERT ON backup_cloud_accounts FOR EACH ROW EXECUTE FUNCTION refuse_boom()`,
    );
    try {
      remoteAccounts = [
        { id: 9, uuid: 'keep', provider: 'changed', name: 'K2' },
        { id: 3, uuid: 'new-one', provider: 's3', name: 'N' },
        { id: 4, uuid: 'boom', provider: 's3', name: 'B' },
      ];
      const res = await act(server.id, 'sync_cloud_accounts');
      expect(res.statusCode).toBe(500);
      expect(await accountsOf(server.id)).toEqual(before);
    } finally {
      await t.ctx.db.$executeRawUnsafe(`DROP TRIGGER refuse_boom ON backup_cloud_accounts`);
      await t.ctx.db.$executeRawUnsafe(`DROP FUNCTION refuse_boom()`);
    }
  });

  it('refuses an answer that breaks the contract, changing nothing', async () => {
    const server = await createServer();
    remoteAccounts = [{ id: 1, uuid: 'x', provider: 's3', name: null }];
    await act(server.id, 'sync_cloud_accounts');
    const before = await accountsOf(server.id);
    for (const [accounts, message] of [
      [[{ id: 1, provider: 's3' }], /cloud account list from GET .*\/api\/cloud-accounts is not as expected \(0\.uuid: /],
      [
        [
          { id: 1, uuid: 'y', provider: 's3' },
          { id: 2, uuid: 'y', provider: 's3' },
        ],
        /cloud account list from GET .* is not as expected \(answer: uuid y is listed twice\)/,
      ],
    ] as const) {
      remoteAccounts = accounts as unknown as RemoteAccount[];
      const res = await act(server.id, 'sync_cloud_accounts');
      expect(res.statusCode).toBe(400);
      expect(res.json().error.message).toMatch(message);
      expect(await accountsOf(server.id)).toEqual(before);
      const log = await t.ctx.db.actionLog.findFirst({
        where: { model_name: 'svc.saas.backup.server', rec_id: server.id },
        orderBy: { id: 'desc' },
      });
      expect(log!.status).toBe('failure');
    }
  });
});

describe('compute_backup_state', () => {
  let partnerId: number;
  let seq = 0;

  beforeAll(async () => {
    partnerId = (await t.ctx.db.partner.create({ data: { name: 'Customer', email: 'customer@example.com' } })).id;
  });

  const subscription = (data: { database_name?: string | null; backup_server_id?: number | null } = {}) =>
    t.ctx.db.subscription.create({ data: { name: `SUB${++seq}`, partner_id: partnerId, database_name: `db_${seq}`, ...data } });
  const compute = (id: number) =>
    request(t.app, t.as.operator, { method: 'POST', url: `/api/v1/subscriptions/${id}/actions/compute_backup_state` });
  const backup = (db_name: string, state: string, id = Math.floor(Math.random() * 1e6)) => ({
    id,
    db_name,
    state,
    created_at: new Date().toISOString(),
    url: `https://backups.example.com/dl/${id}.zip`,
  });

  it('takes the state of the latest backup of the database (done/ok → ok, pending/running → running, failed/error → failed, none → none), tracked in the chatter', async () => {
    const server = await createServer();
    const sub = await subscription({ backup_server_id: server.id });
    const expected: [string | null, string][] = [
      ['done', 'ok'],
      ['pending', 'running'],
      ['ok', 'ok'],
      ['running', 'running'],
      ['failed', 'failed'],
      ['error', 'failed'],
      [null, 'none'],
    ];
    for (const [remoteState, state] of expected) {
      // latest first; an older backup of another state and another database's backup around it
      remoteBackups = remoteState
        ? [backup('other_db', 'failed'), backup(sub.database_name!, remoteState), backup(sub.database_name!, 'error')]
        : [backup('other_db', 'done')];
      const res = await compute(sub.id);
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json()).toMatchObject({ subscription_id: sub.id, backup_server_id: server.id, backup_state: state });
      expect((await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: sub.id } })).backup_state).toBe(state);
    }
    const call = remote.callsTo('/api/backups').at(-1)!;
    expect(call.query.get('db_name')).toBe(sub.database_name);
    expect(call.headers['x-api-key']).toBe(API_KEY);

    const tracking = await t.ctx.db.message.findMany({
      where: { model_name: 'svc.subscription', rec_id: sub.id, message_type: 'tracking' },
      include: { tracking_values: true },
      orderBy: { id: 'asc' },
    });
    expect(tracking.map((m) => [m.tracking_values[0]!.old_value, m.tracking_values[0]!.new_value])).toEqual([
      ['none', 'ok'],
      ['ok', 'running'],
      ['running', 'ok'],
      ['ok', 'running'],
      ['running', 'failed'],
      ['failed', 'none'],
    ]);
    const log = await t.ctx.db.actionLog.findFirst({ where: { model_name: 'svc.subscription', rec_id: sub.id } });
    expect(log).toMatchObject({ action_type: 'api_call', status: 'success' });
  });

  it('uses the only backup server when the subscription names none, and refuses when there are several', async () => {
    await t.ctx.db.backupServer.deleteMany();
    const only = await createServer();
    const sub = await subscription();
    remoteBackups = [backup(sub.database_name!, 'done')];
    const res = await compute(sub.id);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ backup_server_id: only.id, backup_state: 'ok' });

    await createServer();
    const again = await compute(sub.id);
    expect(again.statusCode).toBe(400);
    expect(again.json().error.message).toContain('set its backup_server_id');
    expect((await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: sub.id } })).backup_state).toBe('ok');
  });

  it('a subscription without a database has no backups (none) and asks no server', async () => {
    const sub = await subscription({ database_name: null });
    await t.ctx.db.subscription.update({ where: { id: sub.id }, data: { backup_state: 'failed' } });
    const calls = remote.calls.length;
    const res = await compute(sub.id);
    expect(res.json()).toMatchObject({ backup_state: 'none', latest_backup: null });
    expect(remote.calls.length).toBe(calls);
  });

  it('an unreachable server or an unknown remote state changes nothing and says why', async () => {
    const down = await createServer({ url: `http://127.0.0.1:${await freePort()}` });
    const sub = await subscription({ backup_server_id: down.id });
    let res = await compute(sub.id);
    expect(res.statusCode).toBe(400);
    expect(res.json().error.message).toMatch(/connection refused/);

    const up = await createServer();
    await t.ctx.db.subscription.update({ where: { id: sub.id }, data: { backup_server_id: up.id } });
    remoteBackups = [backup(sub.database_name!, 'exploded')];
    res = await compute(sub.id);
    expect(res.statusCode).toBe(400);
    expect(res.json().error.message).toBe('The backup server reports an unknown backup state "exploded"');
    expect((await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: sub.id } })).backup_state).toBe('none');
    expect((await compute(999999)).statusCode).toBe(404);
  });

  it("the backup feature's webhook method _compute_backup_state runs in the caller transaction", async () => {
    const server = await createServer();
    const sub = await subscription({ backup_server_id: server.id });
    remoteBackups = [backup(sub.database_name!, 'running')];
    const compute = findWebhookMethod(backupFeature.webhookMethods!(t.ctx), 'svc.subscription', '_compute_backup_state')!;

    // Rolled back with the caller's transaction...
    await expect(
      t.ctx.db.$transaction(async (tx) => {
        await compute(sub.id, { tx, payload: undefined, afterCommit: () => {} });
        expect((await tx.subscription.findUniqueOrThrow({ where: { id: sub.id } })).backup_state).toBe('running');
        throw new Error('caller failed later');
      }),
    ).rejects.toThrow('caller failed later');
    expect((await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: sub.id } })).backup_state).toBe('none');
    // ...while the api_call row stays: the remote call did happen.
    expect(await t.ctx.db.actionLog.count({ where: { model_name: 'svc.subscription', rec_id: sub.id } })).toBe(1);

    await t.ctx.db.$transaction((tx) => compute(sub.id, { tx, payload: undefined, afterCommit: () => {} }), { timeout: 10_000 });
    expect((await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: sub.id } })).backup_state).toBe('running');
  });
});
