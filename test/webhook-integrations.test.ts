// Inbound webhooks calling into other features, end to end: the real endpoint, real PostgreSQL, and
// a local HTTP server implementing the backup API (the first intended use of inbound webhooks:
// a backup server's callback triggers _compute_backup_state() on a subscription).
import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';
import { sendJson, startRecordingServer, type RecordingServer } from './helpers/http-recorder.js';

const API_KEY = 'bk-integration-key';
const SECRET = 'backup-callback-secret';

let backupApi: RecordingServer;
let latestState = 'done';
let failing = false;

beforeAll(async () => {
  backupApi = await startRecordingServer((req, res) => {
    if (req.headers['x-api-key'] !== API_KEY) return sendJson(res, 401, { error: 'invalid api key' });
    if (failing) return sendJson(res, 503, { error: 'maintenance' });
    if (req.path !== '/api/backups') return sendJson(res, 404, {});
    return sendJson(res, 200, [
      { id: 2, db_name: req.query.get('db_name'), state: latestState, created_at: '2026-11-22T10:00:00Z', url: 'https://dl/2' },
      { id: 1, db_name: req.query.get('db_name'), state: 'failed', created_at: '2026-11-21T10:00:00Z', url: 'https://dl/1' },
    ]);
  });
});
afterAll(async () => {
  await backupApi?.close();
});

const t = useTestApp({ env: { OUTBOUND_TIMEOUT_MS: '2000' } });

async function subscriptionWithBackups() {
  const server = await request(t.app, t.as.operator, {
    method: 'POST',
    url: '/api/v1/backup-servers',
    payload: { url: backupApi.url, download_url: 'https://dl.example.com', api_key: API_KEY },
  });
  expect(server.statusCode, server.body).toBe(201);
  const partner = await t.ctx.db.partner.create({ data: { name: 'Acme', email: `acme-${Date.now()}@example.com` } });
  return t.ctx.db.subscription.create({
    data: { name: 'Acme', partner_id: partner.id, database_name: `acme_${partner.id}`, backup_server_id: server.json().id },
  });
}

function signed(body: object) {
  const raw = JSON.stringify(body);
  return {
    payload: raw,
    headers: {
      'content-type': 'application/json',
      'x-hub-signature-256': `sha256=${createHmac('sha256', SECRET).update(raw).digest('hex')}`,
    },
  };
}

describe('a backup server callback', () => {
  it('runs _compute_backup_state on the subscription and posts its message in one unit', async () => {
    const sub = await subscriptionWithBackups();
    const hook = await request(t.app, t.as.admin, {
      method: 'POST',
      url: '/api/v1/webhooks',
      payload: { model_name: 'svc.subscription', rec_id: sub.id, trigger_action: '_compute_backup_state', signing_secret: SECRET },
    });
    expect(hook.statusCode, hook.body).toBe(201);
    const path = new URL(hook.json().url).pathname;

    latestState = 'done';
    const ok = await t.app.inject({ method: 'POST', url: path, ...signed({ message: 'Backup of acme finished' }) });
    expect(ok.statusCode).toBe(200);
    expect(ok.json()).toEqual({});
    expect((await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: sub.id } })).backup_state).toBe('ok');
    const asked = backupApi.callsTo('/api/backups').at(-1)!;
    expect(asked.query.get('db_name')).toBe(sub.database_name);
    const messages = await t.ctx.db.message.findMany({
      where: { model_name: 'svc.subscription', rec_id: sub.id },
      include: { tracking_values: true },
    });
    expect(messages.map((m) => m.body)).toContain('Backup of acme finished');
    expect(messages.flatMap((m) => m.tracking_values)).toContainEqual(
      expect.objectContaining({ field: 'backup_state', old_value: 'none', new_value: 'ok' }),
    );

    // The backup API failing: 500 with the spec's body, the state unchanged, no message posted.
    failing = true;
    const before = await t.ctx.db.message.count({ where: { model_name: 'svc.subscription', rec_id: sub.id } });
    const failed = await t.app.inject({ method: 'POST', url: path, ...signed({ message: 'Backup of acme finished again' }) });
    failing = false;
    expect(failed.statusCode).toBe(500);
    expect(failed.json()).toEqual({ error: 'Unknown error SSB C/W42' });
    expect((await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: sub.id } })).backup_state).toBe('ok');
    expect(await t.ctx.db.message.count({ where: { model_name: 'svc.subscription', rec_id: sub.id } })).toBe(before);

    // A forged callback (wrong signature) runs nothing.
    const calls = backupApi.calls.length;
    const forged = await t.app.inject({
      method: 'POST',
      url: path,
      payload: JSON.stringify({ message: 'forged' }),
      headers: { 'content-type': 'application/json', 'x-hub-signature-256': `sha256=${'0'.repeat(64)}` },
    });
    expect(forged.statusCode).toBe(400);
    expect(backupApi.calls.length).toBe(calls);
    expect(t.ctx.logText()).not.toContain(hook.json().token);
  });
});
