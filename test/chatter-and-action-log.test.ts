// Real PostgreSQL through the HTTP API: messages, tracking values, activities, and the action log.
import { describe, expect, it } from 'vitest';
import { createRecordService } from '../src/core/records.js';
import { startActionLog, writeActionLog } from '../src/core/action-log.js';
import { request } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';
import { postgresqlServerModel } from '../src/postgresql/postgresql-models.js';

const t = useTestApp();
let serverId: number;

describe('chatter', () => {
  it('records tracked field changes as tracking values, newest first', async () => {
    // The real model tracks more; two tracked fields keep this test about the mechanism.
    const servers = createRecordService(t.ctx, { ...postgresqlServerModel, tracked: ['ip', 'port'] });
    const author = { id: t.as.operator.userId, name: 'operator' };
    const created = await servers.create({ ip: '10.1.1.1', password: 'pw' }, author);
    serverId = created.id as number;
    await servers.update(serverId, { port: 6432, name: 'untracked change' }, author);
    await servers.update(serverId, { name: 'only untracked' }, author);

    const res = await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/postgresql-servers/${serverId}/messages` });
    expect(res.statusCode).toBe(200);
    const { items, total } = res.json();
    expect(total).toBe(2); // no message for a change of untracked fields only
    expect(items[0]).toMatchObject({
      message_type: 'tracking',
      author_id: t.as.operator.userId,
      tracking_values: [{ field: 'port', old_value: 5432, new_value: 6432 }],
    });
    expect(items[1].tracking_values).toEqual(
      expect.arrayContaining([
        { field: 'ip', old_value: null, new_value: '10.1.1.1' },
        { field: 'port', old_value: null, new_value: 5432 },
      ]),
    );
  });

  it('posts a message with type and subtype; users may read but not post', async () => {
    const url = `/api/v1/postgresql-servers/${serverId}/messages`;
    const denied = await request(t.app, t.as.user, { method: 'POST', url, payload: { body: 'hi' } });
    expect(denied.statusCode).toBe(403);

    const posted = await request(t.app, t.as.operator, {
      method: 'POST',
      url,
      payload: { body: 'Disk replaced', message_type: 'comment', subtype_xmlid: 'mail.mt_comment' },
    });
    expect(posted.statusCode).toBe(201);
    expect(posted.json()).toMatchObject({
      body: 'Disk replaced',
      message_type: 'comment',
      subtype_xmlid: 'mail.mt_comment',
      author_id: t.as.operator.userId,
    });

    const bad = await request(t.app, t.as.operator, { method: 'POST', url, payload: { body: 'x', subtype_xmlid: 'mail.mt_nope' } });
    expect(bad.statusCode).toBe(400);
    const missing = await request(t.app, t.as.operator, { method: 'GET', url: '/api/v1/postgresql-servers/999999/messages' });
    expect(missing.statusCode).toBe(404);
  });

  it('schedules activities and marks them done', async () => {
    const base = `/api/v1/postgresql-servers/${serverId}/activities`;
    const created = await request(t.app, t.as.operator, {
      method: 'POST',
      url: base,
      payload: { summary: 'Renew certificate', due_date: '2030-01-01T00:00:00.000Z', user_id: t.as.operator.userId },
    });
    expect(created.statusCode).toBe(201);
    const id = created.json().id;
    const done = await request(t.app, t.as.operator, { method: 'POST', url: `${base}/${id}/actions/done` });
    expect(done.json()).toMatchObject({ state: 'done', summary: 'Renew certificate' });
    const list = await request(t.app, t.as.user, { method: 'GET', url: base });
    expect(list.json().items).toHaveLength(1);
  });

  it('settings changes are tracked too', async () => {
    const res = await request(t.app, t.as.admin, { method: 'PATCH', url: '/api/v1/settings', payload: { keep_root_server_log_period: 5 } });
    expect(res.json().keep_root_server_log_period).toBe(5);
    const msg = await t.ctx.db.message.findFirst({ where: { model_name: 'svc.settings' }, include: { tracking_values: true } });
    expect(msg?.tracking_values).toEqual([
      expect.objectContaining({ field: 'keep_root_server_log_period', old_value: '2', new_value: '5', value_type: 'number' }),
    ]);
  });
});

describe('action log', () => {
  it('masks secrets, and is listed with filters by model, record and type', async () => {
    await writeActionLog(t.ctx.db, {
      model_name: 'svc.root.server',
      rec_id: 7,
      action_type: 'ssh_command',
      input_text: "echo 'hunter22' | sudo -S ls",
      output_text: 'ok hunter22',
      secrets: ['hunter22'],
    });
    await writeActionLog(t.ctx.db, { model_name: 'svc.root.server', rec_id: 8, action_type: 'ssh_command', input_text: 'uptime' });
    await writeActionLog(t.ctx.db, {
      model_name: 'svc.saas.backup.server',
      rec_id: 7,
      action_type: 'api_call',
      input_text: 'GET /api/ping',
    });

    const all = await request(t.app, t.as.user, { method: 'GET', url: '/api/v1/action-logs' });
    expect(all.statusCode).toBe(200);
    expect(JSON.stringify(all.json())).not.toContain('hunter22');

    const filtered = await request(t.app, t.as.user, {
      method: 'GET',
      url: '/api/v1/action-logs?model_name=svc.root.server&rec_id=7&action_type=ssh_command',
    });
    const items = filtered.json().items;
    expect(items).toHaveLength(1);
    expect(items[0]).toMatchObject({ input_text: "echo '********' | sudo -S ls", output_text: 'ok ********', status: 'success' });

    const byType = await request(t.app, t.as.user, { method: 'GET', url: '/api/v1/action-logs?action_type=api_call' });
    expect(byType.json().items.map((i: { model_name: string }) => i.model_name)).toEqual(['svc.saas.backup.server']);
    const badType = await request(t.app, t.as.user, { method: 'GET', url: '/api/v1/action-logs?action_type=nope' });
    expect(badType.statusCode).toBe(400);
  });

  it('masks whole values only, and no secret shorter than 4 characters', async () => {
    const row = await writeActionLog(t.ctx.db, {
      model_name: 'svc.root.server',
      rec_id: 9,
      action_type: 'ssh_command',
      input_text: 'ping -c1 localhost',
      output_text: 'loopback ok; hunter22 hunter22s',
      secrets: ['k', 'ok', 'hunter22'],
    });
    expect(row).toMatchObject({ input_text: 'ping -c1 localhost', output_text: 'loopback ok; ******** hunter22s' });
  });

  it('stores output holding NUL with U+FFFD in its place', async () => {
    const row = await writeActionLog(t.ctx.db, {
      model_name: 'svc.root.server',
      rec_id: 10,
      action_type: 'ssh_command',
      input_text: 'printf "a\\0b"',
      output_text: 'a\0b',
    });
    expect(row.output_text).toBe('a\uFFFDb');
    const step = await startActionLog(t.ctx.db, { model_name: 'svc.root.server', rec_id: 10, action_type: 'ssh_command', input_text: 'x' });
    await step.finish('success', 'c\0d');
    expect(await t.ctx.db.actionLog.findUniqueOrThrow({ where: { id: step.id } })).toMatchObject({
      status: 'success',
      output_text: 'c\uFFFDd',
    });
  });

  it('a step whose output the database refuses is still finished, saying so', async () => {
    // A real refusal by PostgreSQL, for this test's database only.
    await t.ctx.db.$executeRawUnsafe(
      "ALTER TABLE action_logs ADD CONSTRAINT test_refuses_output CHECK (output_text NOT LIKE '%refused-by-the-test%')",
    );
    try {
      const step = await startActionLog(t.ctx.db, {
        model_name: 'svc.root.server',
        rec_id: 11,
        action_type: 'ssh_command',
        input_text: 'x',
      });
      await step.finish('failure', 'refused-by-the-test');
      expect(await t.ctx.db.actionLog.findUniqueOrThrow({ where: { id: step.id } })).toMatchObject({
        status: 'failure',
        output_text: '[output not stored: the database refused it]',
      });
    } finally {
      await t.ctx.db.$executeRawUnsafe('ALTER TABLE action_logs DROP CONSTRAINT test_refuses_output');
    }
  });
});
