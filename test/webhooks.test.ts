// Inbound webhooks on real PostgreSQL and Redis: the REST resource (administrators), the method
// registry, each answer of POST /svc/webhook/<token> (200 {}; 400 for an unknown webhook, a bad
// signature or body; 500 when the method fails) over app.inject, and over real HTTP for 200
// concurrent calls, signing, the call log and its retention job (through the real
// BullMQ worker), and the redaction of tokens in the captured log lines.
import { createHmac } from 'node:crypto';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { startWorkers } from '../src/worker.js';
import { MessageType, SUBTYPES } from '../src/core/chatter.js';
import { composeWebhookMethods, describeWebhookMethods, type WebhookMethodTable } from '../src/core/webhook-methods.js';
import { composeFeatures } from '../src/features.js';
import { webhookJobs } from '../src/webhooks/webhook-job-specs.js';
import { request, waitForJob } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';

const t = useTestApp();
let partnerId: number;
let n = 0;

beforeAll(async () => {
  partnerId = (await t.ctx.db.partner.create({ data: { name: 'Hook Co', email: 'hooks@example.com' } })).id;
});

async function newSubscription(state: 'draft' | 'confirmed' = 'draft') {
  return t.ctx.db.subscription.create({ data: { name: `Sub ${++n}`, partner_id: partnerId, state } });
}

async function createWebhook(payload: Record<string, unknown>) {
  const res = await request(t.app, t.as.admin, { method: 'POST', url: '/api/v1/webhooks', payload });
  expect(res.statusCode).toBe(201);
  return res.json() as { id: number; token: string; url: string; [k: string]: unknown };
}

function fire(token: string, body?: unknown, headers: Record<string, string> = {}) {
  const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
  return t.app.inject({
    method: 'POST',
    url: `/svc/webhook/${token}`,
    headers: { 'content-type': 'application/json', ...headers },
    payload,
    remoteAddress: '192.0.2.10',
  });
}

const messagesOf = (model_name: string, rec_id: number) =>
  t.ctx.db.message.findMany({ where: { model_name, rec_id, message_type: { not: 'tracking' } }, orderBy: { id: 'asc' } });

describe('webhook records', () => {
  it('create: a 64-hex token made on save, the full URL, defaults; only administrators see webhooks', async () => {
    const sub = await newSubscription();
    const hook = await createWebhook({ model_name: 'svc.subscription', rec_id: sub.id });
    expect(hook.token).toMatch(/^[0-9a-f]{64}$/);
    expect(hook).toMatchObject({
      url: `http://svc.test/svc/webhook/${hook.token}`,
      model_name: 'svc.subscription',
      rec_id: sub.id,
      trigger_action: null,
      message_type: 'comment',
      subtype_xmlid: 'mail.mt_note',
      active: true,
      signing_secret_set: false,
      call_count: 0,
      last_called_at: null,
    });
    for (const caller of [t.as.user, t.as.operator]) {
      expect((await request(t.app, caller, { method: 'GET', url: '/api/v1/webhooks' })).statusCode).toBe(403);
      expect(
        (
          await request(t.app, caller, {
            method: 'POST',
            url: '/api/v1/webhooks',
            payload: { model_name: 'svc.subscription', rec_id: sub.id },
          })
        ).statusCode,
      ).toBe(403);
    }
    const other = await createWebhook({ model_name: 'svc.subscription', rec_id: sub.id });
    expect(other.token).not.toBe(hook.token);
  });

  it('the token is unique in the database and never changes', async () => {
    const sub = await newSubscription();
    const hook = await createWebhook({ model_name: 'svc.subscription', rec_id: sub.id });
    await expect(
      t.ctx.db
        .$executeRaw`INSERT INTO webhooks (token, model_name, rec_id, updated_at) VALUES (${hook.token}, 'res.partner', ${partnerId}, now())`,
    ).rejects.toThrow(/unique/i);
    const patch = await request(t.app, t.as.admin, {
      method: 'PATCH',
      url: `/api/v1/webhooks/${hook.id}`,
      payload: { token: 'f'.repeat(64) },
    });
    expect(patch.statusCode).toBe(400);
    const renamed = await request(t.app, t.as.admin, {
      method: 'PATCH',
      url: `/api/v1/webhooks/${hook.id}`,
      payload: { message_type: 'notification', active: false },
    });
    expect(renamed.json()).toMatchObject({ token: hook.token, message_type: 'notification', active: false });
  });

  it('refuses an unknown model, a missing record and a trigger_action outside the registry (400)', async () => {
    const sub = await newSubscription();
    const cases = [
      { model_name: 'svc.nothing', rec_id: 1 },
      { model_name: 'svc.subscription', rec_id: 999_999 },
      { model_name: 'svc.subscription', rec_id: sub.id, trigger_action: 'unlink' },
      { model_name: 'svc.subscription', rec_id: sub.id, trigger_action: 'constructor' },
      { model_name: 'svc.subscription', rec_id: sub.id, trigger_action: 'action_confirm()' },
      { model_name: 'res.partner', rec_id: partnerId, trigger_action: 'action_confirm' },
      { model_name: 'svc.subscription', rec_id: sub.id, message_type: 'fax' },
      { model_name: 'svc.subscription', rec_id: sub.id, subtype_xmlid: 'mail.mt_spam' },
    ];
    for (const payload of cases) {
      const res = await request(t.app, t.as.admin, { method: 'POST', url: '/api/v1/webhooks', payload });
      expect(res.statusCode, JSON.stringify(payload)).toBe(400);
    }
    const refused = await request(t.app, t.as.admin, { method: 'POST', url: '/api/v1/webhooks', payload: cases[2] });
    expect(refused.json().error.details.callable).toEqual(expect.arrayContaining(['action_confirm', 'action_cancel']));
    const hook = await createWebhook({ model_name: 'svc.subscription', rec_id: sub.id, trigger_action: 'action_confirm' });
    const update = await request(t.app, t.as.admin, {
      method: 'PATCH',
      url: `/api/v1/webhooks/${hook.id}`,
      payload: { trigger_action: 'unlink' },
    });
    expect(update.statusCode).toBe(400);
    expect(await t.ctx.db.webhook.count({ where: { trigger_action: 'unlink' } })).toBe(0);
  });

  it('the registry: subscription state methods, backup state, trial request and root server actions, the git push handler; a method declared twice is an error; every model has a table', async () => {
    const registry = composeFeatures(t.ctx);
    const table = describeWebhookMethods(registry.webhookMethods);
    expect(table['svc.subscription']).toEqual([
      '_compute_backup_state',
      'action_cancel',
      'action_confirm',
      'action_deploy',
      'action_reset_to_draft',
    ]);
    expect(table['svc.subscription.trial.request']).toEqual(['action_cancel', 'action_create_subscription', 'action_reset_to_new']);
    expect(table['svc.root.server']).toEqual([
      'action_run_cmd',
      'action_setup_dir_structure',
      'action_start_monitor',
      'action_stop_monitor',
    ]);
    expect(table['svc.saas.git.repository']).toEqual(['action_receive_push']);
    const m = async () => {};
    const one = (method: string): WebhookMethodTable => ({ 'res.partner': { [method]: m } });
    expect(() => composeWebhookMethods(one('x'), one('x'))).toThrow(/declared twice/);
    expect(composeWebhookMethods(one('x'), one('y'))).toEqual({ 'res.partner': { x: m, y: m } });
    const tables = await t.ctx.db.$queryRaw<{ tablename: string }[]>`SELECT tablename FROM pg_tables WHERE schemaname = 'public'`;
    for (const { table: t } of registry.models.all) expect(tables.map((r) => r.tablename)).toContain(t);
  });

  it('signing_secret: write-only, encrypted; an empty one is refused; null removes it', async () => {
    const sub = await newSubscription();
    const empty = await request(t.app, t.as.admin, {
      method: 'POST',
      url: '/api/v1/webhooks',
      payload: { model_name: 'svc.subscription', rec_id: sub.id, signing_secret: '' },
    });
    expect(empty.statusCode).toBe(400);
    const hook = await createWebhook({ model_name: 'svc.subscription', rec_id: sub.id, signing_secret: 's3cret-value' });
    expect(hook.signing_secret_set).toBe(true);
    expect(JSON.stringify(hook)).not.toContain('s3cret-value');
    const row = await t.ctx.db.webhook.findUniqueOrThrow({ where: { id: hook.id } });
    expect(row.signing_secret).toMatch(/^v\d+:/);
    expect(await t.ctx.secretBox.decrypt(row.signing_secret!)).toBe('s3cret-value');
    expect(
      (await request(t.app, t.as.admin, { method: 'PATCH', url: `/api/v1/webhooks/${hook.id}`, payload: { signing_secret: '' } }))
        .statusCode,
    ).toBe(400);
    const cleared = await request(t.app, t.as.admin, {
      method: 'PATCH',
      url: `/api/v1/webhooks/${hook.id}`,
      payload: { signing_secret: null },
    });
    expect(cleared.json().signing_secret_set).toBe(false);
  });
});

describe('POST /svc/webhook/<token>', () => {
  it("200 {}: the message is posted with the webhook's message_type and subtype", async () => {
    const sub = await newSubscription();
    const hook = await createWebhook({
      model_name: 'svc.subscription',
      rec_id: sub.id,
      message_type: 'notification',
      subtype_xmlid: 'mail.mt_alert',
    });
    const res = await fire(hook.token, { message: 'Disk almost full' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({});
    expect(await messagesOf('svc.subscription', sub.id)).toEqual([
      expect.objectContaining({
        body: 'Disk almost full',
        message_type: 'notification',
        subtype_xmlid: 'mail.mt_alert',
        author_name: `webhook ${hook.id}`,
      }),
    ]);
  });

  it('body values win over the stored ones, for every message type and subtype', async () => {
    const sub = await newSubscription();
    const hook = await createWebhook({ model_name: 'svc.subscription', rec_id: sub.id });
    for (const message_type of Object.values(MessageType)) {
      for (const subtype_xmlid of SUBTYPES) {
        expect((await fire(hook.token, { message: `${message_type}/${subtype_xmlid}`, message_type, subtype_xmlid })).statusCode).toBe(200);
      }
    }
    const posted = await t.ctx.db.message.findMany({ where: { model_name: 'svc.subscription', rec_id: sub.id }, orderBy: { id: 'asc' } });
    expect(posted.map((m) => `${m.message_type}/${m.subtype_xmlid}`)).toEqual(posted.map((m) => m.body));
    expect(posted).toHaveLength(Object.values(MessageType).length * SUBTYPES.length);
    // Only one of the two given: the other comes from the webhook.
    await fire(hook.token, { message: 'only type', message_type: 'sms' });
    expect((await messagesOf('svc.subscription', sub.id)).at(-1)).toMatchObject({ message_type: 'sms', subtype_xmlid: 'mail.mt_note' });
  });

  it('without a message nothing is posted; an empty body and any content type are accepted', async () => {
    const sub = await newSubscription();
    const hook = await createWebhook({ model_name: 'svc.subscription', rec_id: sub.id });
    expect((await fire(hook.token)).statusCode).toBe(200);
    expect((await fire(hook.token, {})).statusCode).toBe(200);
    expect((await fire(hook.token, { message: 'as text/plain' }, { 'content-type': 'text/plain' })).statusCode).toBe(200);
    const noType = await t.app.inject({ method: 'POST', url: `/svc/webhook/${hook.token}` });
    expect(noType.statusCode).toBe(200);
    expect((await messagesOf('svc.subscription', sub.id)).map((m) => m.body)).toEqual(['as text/plain']);
  });

  it('400 for an unknown token, whatever its shape, and for an inactive webhook; nothing posted', async () => {
    for (const path of ['0'.repeat(64), 'abc', 'A'.repeat(64), `${'a'.repeat(64)}/extra`, '', '%00']) {
      const res = await t.app.inject({
        method: 'POST',
        url: `/svc/webhook/${path}`,
        headers: { 'content-type': 'application/json' },
        payload: '{"message":"x"}',
      });
      expect(res.statusCode, path).toBe(400);
      expect(res.body.length).toBeLessThan(40);
    }
    const sub = await newSubscription();
    const hook = await createWebhook({ model_name: 'svc.subscription', rec_id: sub.id, active: false });
    expect((await fire(hook.token, { message: 'x' })).statusCode).toBe(400);
    await request(t.app, t.as.admin, { method: 'PATCH', url: `/api/v1/webhooks/${hook.id}`, payload: { active: true } });
    expect((await fire(hook.token, { message: 'now active' })).statusCode).toBe(200);
    expect((await messagesOf('svc.subscription', sub.id)).map((m) => m.body)).toEqual(['now active']);
  });

  it('a bad body is a 400 answer, never a crash: not JSON, not an object, wrong types, unknown enum values', async () => {
    const sub = await newSubscription();
    const hook = await createWebhook({ model_name: 'svc.subscription', rec_id: sub.id });
    for (const body of [
      '{"message":',
      '[1,2]',
      '"text"',
      '42',
      'null',
      { message: 5 },
      { message_type: 'fax' },
      { subtype_xmlid: 'mail.mt_x' },
      { message: 'x'.repeat(100_001) },
    ]) {
      const res = await fire(hook.token, body);
      expect(res.statusCode, JSON.stringify(body).slice(0, 50)).toBe(400);
      expect(res.json().error).toMatch(/^Invalid body/);
    }
    const tooBig = await fire(hook.token, { message: 'x'.repeat(1_100_000) });
    expect(tooBig.statusCode).toBe(400); // like any bad call: a 413 would tell a known token from an unknown one
    expect(await messagesOf('svc.subscription', sub.id)).toEqual([]);
  });

  it('trigger_action and message are one unit: the method runs and the message is posted, or neither', async () => {
    const sub = await newSubscription('draft');
    const hook = await createWebhook({ model_name: 'svc.subscription', rec_id: sub.id, trigger_action: 'action_confirm' });
    expect((await fire(hook.token, { message: 'Payment received' })).statusCode).toBe(200);
    expect((await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: sub.id } })).state).toBe('confirmed');
    expect((await messagesOf('svc.subscription', sub.id)).map((m) => m.body)).toEqual(['Payment received']);

    // Confirming again fails (already confirmed): 500, and the message is not posted either.
    const again = await fire(hook.token, { message: 'Payment received twice' });
    expect(again.statusCode).toBe(500);
    expect(again.json()).toEqual({ error: 'Unknown error SSB C/W42' });
    expect((await messagesOf('svc.subscription', sub.id)).map((m) => m.body)).toEqual(['Payment received']);
    expect(t.ctx.logText()).toMatch(/confirm needs draft.*"trigger_action":"action_confirm","msg":"webhook call failed"/);
  });

  it('a trigger_action delivery sent again (same Idempotency-Key or X-GitHub-Delivery) runs once: the retry answers 200 and runs nothing', async () => {
    const sub = await newSubscription('draft');
    const hook = await createWebhook({ model_name: 'svc.subscription', rec_id: sub.id, trigger_action: 'action_confirm' });
    const first = await fire(hook.token, { message: 'Paid' }, { 'idempotency-key': 'pay-1' });
    expect(first.statusCode, first.body).toBe(200);
    // The caller did not hear the 200 (or sent it twice): the same delivery again.
    const again = await fire(hook.token, { message: 'Paid' }, { 'idempotency-key': 'pay-1' });
    expect(again.statusCode, again.body).toBe(200);
    expect(again.json()).toEqual({});
    expect((await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: sub.id } })).state).toBe('confirmed');
    expect((await messagesOf('svc.subscription', sub.id)).map((m) => m.body)).toEqual(['Paid']);

    // A git host's delivery header names it as well; another delivery runs (and confirming twice fails: 500).
    const other = await newSubscription('draft');
    const gitHook = await createWebhook({ model_name: 'svc.subscription', rec_id: other.id, trigger_action: 'action_confirm' });
    expect((await fire(gitHook.token, { message: 'push' }, { 'x-github-delivery': 'd8a3c0e2-1' })).statusCode).toBe(200);
    expect((await fire(gitHook.token, { message: 'push' }, { 'x-github-delivery': 'd8a3c0e2-1' })).statusCode).toBe(200);
    expect((await fire(gitHook.token, { message: 'push' }, { 'x-github-delivery': 'd8a3c0e2-2' })).statusCode).toBe(500);
    expect((await messagesOf('svc.subscription', other.id)).map((m) => m.body)).toEqual(['push']);

    // A delivery id that is no id: 400, nothing runs.
    const third = await newSubscription('draft');
    const hook3 = await createWebhook({ model_name: 'svc.subscription', rec_id: third.id, trigger_action: 'action_confirm' });
    const bad = await fire(hook3.token, { message: 'x' }, { 'idempotency-key': 'two words' });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error).toMatch(/^Invalid delivery id/);
    expect((await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: third.id } })).state).toBe('draft');
  });

  it('500 when the target record is gone, or the stored trigger_action is not in the registry; nothing runs', async () => {
    const sub = await newSubscription('draft');
    const hook = await createWebhook({ model_name: 'svc.subscription', rec_id: sub.id });
    await t.ctx.db.subscription.delete({ where: { id: sub.id } });
    const gone = await fire(hook.token, { message: 'x' });
    expect(gone.statusCode).toBe(500);
    expect(gone.json()).toEqual({ error: 'Unknown error SSB C/W42' });

    const sub2 = await newSubscription('draft');
    const hook2 = await createWebhook({ model_name: 'svc.subscription', rec_id: sub2.id });
    await t.ctx.db.webhook.update({ where: { id: hook2.id }, data: { trigger_action: 'toString' } }); // bypassing the API
    const res = await fire(hook2.token, { message: 'x' });
    expect(res.statusCode).toBe(500);
    expect(await messagesOf('svc.subscription', sub2.id)).toEqual([]);
  });

  it('trial request actions from a webhook', async () => {
    const pkg = await t.ctx.db.trialPackage.create({ data: { name: 'P', url_string: `hook-${++n}` } });
    const req = await t.ctx.db.trialRequest.create({
      data: {
        name: 'J',
        company_name: 'C',
        email: `tr-${n}@example.com`,
        mobile: '+1 555',
        company_size: 's1_5',
        trial_package_id: pkg.id,
      },
    });
    const cancel = await createWebhook({ model_name: 'svc.subscription.trial.request', rec_id: req.id, trigger_action: 'action_cancel' });
    expect((await fire(cancel.token)).statusCode).toBe(200);
    expect((await t.ctx.db.trialRequest.findUniqueOrThrow({ where: { id: req.id } })).state).toBe('cancelled');
  });

  it('the token appears in no log line', async () => {
    const sub = await newSubscription();
    const hook = await createWebhook({ model_name: 'svc.subscription', rec_id: sub.id, trigger_action: 'action_cancel' });
    await t.ctx.db.subscription.update({ where: { id: sub.id }, data: { state: 'cancelled' } });
    expect((await fire(hook.token, { message: 'fails' })).statusCode).toBe(500); // error logged
    expect((await fire(hook.token, '{bad')).statusCode).toBe(400);
    const log = t.ctx.logText();
    expect(log).toContain('/svc/webhook/[redacted]');
    expect(log).toContain(`"webhook_id":${hook.id}`);
    const tokens = await t.ctx.db.webhook.findMany({ select: { token: true } });
    for (const { token } of tokens) expect(log).not.toContain(token);
  });
});

describe('webhook cache (LISTEN/NOTIFY)', () => {
  /** Polls until `fn` is true (the notification travels asynchronously), well within the cache's 30 s entry lifetime. */
  const eventually = (fn: () => Promise<boolean>) => vi.waitUntil(fn, { timeout: 10_000, interval: 50 });

  it('a change made outside the API (SQL, another process) reaches the cache: deactivated or deleted webhooks stop answering', async () => {
    const sub = await newSubscription();
    const hook = await createWebhook({ model_name: 'svc.subscription', rec_id: sub.id });
    expect((await fire(hook.token, { message: 'cached now' })).statusCode).toBe(200);
    await t.ctx.db.$executeRaw`UPDATE webhooks SET active = false WHERE id = ${hook.id}`;
    await eventually(async () => (await fire(hook.token)).statusCode === 400);

    await t.ctx.db.$executeRaw`UPDATE webhooks SET active = true, message_type = 'sms' WHERE id = ${hook.id}`;
    await eventually(async () => (await fire(hook.token)).statusCode === 200);
    await fire(hook.token, { message: 'as sms' });
    expect((await messagesOf('svc.subscription', sub.id)).at(-1)).toMatchObject({ body: 'as sms', message_type: 'sms' });

    await t.ctx.db.webhook.delete({ where: { id: hook.id } });
    await eventually(async () => (await fire(hook.token)).statusCode === 400);
  });

  it('while the notification connection is down the cache is not used, so no change can be missed', async () => {
    const sub = await newSubscription();
    const hook = await createWebhook({ model_name: 'svc.subscription', rec_id: sub.id });
    expect((await fire(hook.token)).statusCode).toBe(200); // cached
    await t.ctx.db.$executeRaw`
      SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = ${t.ctx.dbName} AND application_name = 'svc-webhook-cache'`;
    await eventually(async () => t.ctx.logText().includes('change notifications lost'));
    expect((await fire(hook.token)).statusCode).toBe(200); // read from the database, not cached
    // This change's notification has no listener; the next call must read the database anyway.
    await t.ctx.db.$executeRaw`UPDATE webhooks SET active = false WHERE id = ${hook.id}`;
    expect((await fire(hook.token)).statusCode).toBe(400);
  });
});

describe('signing (X-Hub-Signature-256)', () => {
  const sign = (secret: string, body: string) => `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;

  it('a valid signature of the raw body is accepted; wrong, missing or malformed ones → 400 and nothing runs', async () => {
    const sub = await newSubscription('draft');
    const hook = await createWebhook({
      model_name: 'svc.subscription',
      rec_id: sub.id,
      trigger_action: 'action_confirm',
      signing_secret: 'hook-secret',
    });
    const body = '{"message":"signed",  "extra": {"a": [1, 2]}}'; // signed as sent, spacing included
    for (const signature of [
      sign('other-secret', body),
      sign('hook-secret', `${body} `),
      'sha256=zz',
      sign('hook-secret', body).replace('sha256=', 'sha1='),
      undefined,
    ]) {
      const res = await fire(hook.token, body, signature ? { 'x-hub-signature-256': signature } : {});
      expect(res.statusCode).toBe(400);
      expect(res.json()).toEqual({ error: 'Invalid signature' });
    }
    expect((await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: sub.id } })).state).toBe('draft');
    expect(await messagesOf('svc.subscription', sub.id)).toEqual([]);

    const ok = await fire(hook.token, body, { 'x-hub-signature-256': sign('hook-secret', body) });
    expect(ok.statusCode).toBe(200);
    expect((await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: sub.id } })).state).toBe('confirmed');
    expect((await messagesOf('svc.subscription', sub.id)).map((m) => m.body)).toEqual(['signed']);
  });
});

describe('call log, counters, retention', () => {
  it('every call of a known webhook is logged (time, status, duration, IP, size, error) without the token; counters follow', async () => {
    const sub = await newSubscription();
    const hook = await createWebhook({ model_name: 'svc.subscription', rec_id: sub.id });
    const ok = JSON.stringify({ message: 'hello' });
    await fire(hook.token, ok);
    await fire(hook.token, '{nope');
    await t.ctx.db.subscription.delete({ where: { id: sub.id } });
    await fire(hook.token, ok);

    const res = await request(t.app, t.as.admin, { method: 'GET', url: `/api/v1/webhooks/${hook.id}/calls` });
    expect(res.statusCode).toBe(200);
    const calls = res.json();
    expect(calls.total).toBe(3);
    expect(calls.items.map((c: { status: number }) => c.status)).toEqual([500, 400, 200]);
    expect(calls.items[2]).toMatchObject({ webhook_id: hook.id, source_ip: '192.0.2.10', body_size: Buffer.byteLength(ok), error: null });
    expect(calls.items[1].error).toMatch(/^Invalid body/);
    expect(calls.items[0].error).toMatch(/does not exist/);
    expect(
      calls.items.every(
        (c: { duration_ms: number; called_at: string }) =>
          /^\d+(\.\d)?$/.test(String(c.duration_ms)) && !Number.isNaN(Date.parse(c.called_at)), // 0.1 ms
      ),
    ).toBe(true);
    expect(JSON.stringify(calls)).not.toContain(hook.token);
    expect((await request(t.app, t.as.admin, { method: 'GET', url: `/api/v1/webhooks/${hook.id}/calls?status=400` })).json().total).toBe(1);
    expect((await request(t.app, t.as.operator, { method: 'GET', url: `/api/v1/webhooks/${hook.id}/calls` })).statusCode).toBe(403);

    const after = (await request(t.app, t.as.admin, { method: 'GET', url: `/api/v1/webhooks/${hook.id}` })).json();
    expect(after.call_count).toBe(3);
    expect(after.last_called_at).toBe(calls.items[0].called_at);
  });

  it('200 concurrent posts with messages over real HTTP: all answered 200, none lost, all counted', async () => {
    const sub = await newSubscription();
    const hook = await createWebhook({ model_name: 'svc.subscription', rec_id: sub.id });
    const base = await t.app.listen({ port: 0, host: '127.0.0.1' });
    const results = await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        fetch(`${base}/svc/webhook/${hook.token}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ message: `alert ${i}` }),
        }),
      ),
    );
    expect(results.map((r) => r.status)).toEqual(Array(200).fill(200));
    const bodies = (await messagesOf('svc.subscription', sub.id)).map((m) => m.body).sort();
    expect(bodies).toEqual(Array.from({ length: 200 }, (_, i) => `alert ${i}`).sort());
    expect((await request(t.app, t.as.admin, { method: 'GET', url: `/api/v1/webhooks/${hook.id}` })).json().call_count).toBe(200);
  });

  it('the daily retention job deletes calls and delivery records older than webhook_call_log_days and keeps the counters', async () => {
    const sub = await newSubscription();
    const hook = await createWebhook({ model_name: 'svc.subscription', rec_id: sub.id });
    await t.ctx.db.$executeRaw`
      INSERT INTO webhook_calls (webhook_id, called_at, status, duration_ms, source_ip, body_size)
      SELECT ${hook.id}, now() - make_interval(days => d), 200, 1, '192.0.2.1', 10 FROM generate_series(1, 30) d`;
    await t.ctx.db.$executeRaw`
      INSERT INTO webhook_deliveries (webhook_id, delivery, created_at)
      SELECT ${hook.id}, 'd' || d, now() - make_interval(days => d) FROM generate_series(1, 30) d`;
    await request(t.app, t.as.admin, { method: 'PATCH', url: '/api/v1/settings', payload: { webhook_call_log_days: 7 } });
    const before = (await request(t.app, t.as.admin, { method: 'GET', url: `/api/v1/webhooks/${hook.id}` })).json();
    expect(before.call_count).toBe(30);

    const workers = await startWorkers(t.ctx);
    try {
      const schedulers = await t.ctx.queues.queue('maintenance').getJobSchedulers();
      expect(schedulers.map((s) => [s.key, s.pattern])).toContainEqual(['prune_webhook_calls', '0 3 * * *']);
      const jobId = await t.ctx.queues.enqueue(webhookJobs.prune_webhook_calls, {});
      const job = await waitForJob(t.app, t.as.admin, jobId);
      expect(job).toMatchObject({ state: 'completed', result: { days: 7 } });
      expect(job.result.deleted).toBeGreaterThanOrEqual(24);
    } finally {
      await workers.close();
    }
    const remaining = await t.ctx.db.webhookCall.findMany({ where: { webhook_id: hook.id } });
    expect(remaining).toHaveLength(6); // 1..6 days old
    expect(await t.ctx.db.webhookDelivery.count({ where: { webhook_id: hook.id } })).toBe(6);
    const after = (await request(t.app, t.as.admin, { method: 'GET', url: `/api/v1/webhooks/${hook.id}` })).json();
    expect(after.call_count).toBe(30);
    expect(after.last_called_at).toBe(before.last_called_at);
  });
});

describe('POST /api/v1/webhooks/{id}/actions/trigger', () => {
  it("runs the configured method, writes the action log; 400 without trigger_action; the method's refusal passes through", async () => {
    const sub = await newSubscription('draft');
    const hook = await createWebhook({ model_name: 'svc.subscription', rec_id: sub.id, trigger_action: 'action_confirm' });
    const res = await request(t.app, t.as.admin, { method: 'POST', url: `/api/v1/webhooks/${hook.id}/actions/trigger` });
    expect(res.statusCode).toBe(200);
    expect(res.json().id).toBe(hook.id);
    expect((await t.ctx.db.subscription.findUniqueOrThrow({ where: { id: sub.id } })).state).toBe('confirmed');
    const log = await t.ctx.db.actionLog.findFirstOrThrow({
      where: { model_name: 'svc.subscription', rec_id: sub.id, action_type: 'webhook' },
    });
    expect(log).toMatchObject({ status: 'success', user_id: t.as.admin.userId, input_text: expect.stringContaining('action_confirm') });

    const again = await request(t.app, t.as.admin, { method: 'POST', url: `/api/v1/webhooks/${hook.id}/actions/trigger` });
    expect(again.statusCode).toBe(409);
    expect(await t.ctx.db.actionLog.count({ where: { rec_id: sub.id, action_type: 'webhook', status: 'failure' } })).toBe(1);

    const plain = await createWebhook({ model_name: 'svc.subscription', rec_id: sub.id });
    expect((await request(t.app, t.as.admin, { method: 'POST', url: `/api/v1/webhooks/${plain.id}/actions/trigger` })).statusCode).toBe(
      400,
    );
    expect((await request(t.app, t.as.operator, { method: 'POST', url: `/api/v1/webhooks/${hook.id}/actions/trigger` })).statusCode).toBe(
      403,
    );
  });
});
