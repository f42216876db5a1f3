// What the alerts tests share, on real parts: the app with its workers (alert_notify,
// monitor_stopped), a real sshd whose servers are monitored by hand (the test drives the polls:
// a poller with the features' observers, or events handed to the observers with the time it
// chooses), a real SMTP server and a local ntfy-compatible server that accepts every publish (the
// company's default push); rules, alerts and notices through the API.
import { afterAll, beforeAll, expect } from 'vitest';
import { createSshPool } from '../../src/core/ssh-pool.js';
import type { MonitorPollEvent } from '../../src/feature.js';
import { composeFeatures } from '../../src/features.js';
import { createMonitorPoller, type MonitorPoller } from '../../src/monitoring/monitor-poll.js';
import { request } from './api.js';
import { type TestApp, useTestApp } from './app.js';
import { type RecordingServer, sendJson, startRecordingServer } from './http-recorder.js';
import { monitorByHand } from './monitoring.js';
import { passwordLogin, type Sshd, startSshd } from './sshd.js';
import { startSmtpServer, type TestSmtpServer } from './smtp.js';

export interface AlertsApp extends TestApp {
  sshd: Sshd;
  smtp: TestSmtpServer;
  /** The company's default push server. */
  ntfy: RecordingServer;
  ntfyId: number;
  /** One poll of a server, its events told to the features' observers (alerts). */
  poll: MonitorPoller['poll'];
  /** Hands events to the features' observers, as a poll recording them would. */
  observe(events: MonitorPollEvent[]): Promise<void>;
}

/** The app of an alerts test file; `env` is added to the configuration. */
export function useAlertsApp(env: Record<string, string> = {}): AlertsApp {
  const pool = createSshPool();
  const kit = {} as AlertsApp;
  beforeAll(async () => {
    kit.sshd = await startSshd();
    kit.smtp = await startSmtpServer();
    kit.ntfy = await startRecordingServer((req, res) => {
      if (req.method === 'POST' && req.path === '/') return sendJson(res, 200, { id: `m${kit.ntfy.calls.length}`, event: 'message' });
      return sendJson(res, 404, { error: 'page not found' });
    });
  });
  afterAll(async () => {
    pool.close();
    await kit.sshd?.stop();
    await kit.ntfy?.close();
    await kit.smtp?.close();
  });
  const t = useTestApp({ workers: true, env: () => ({ SMTP_URL: kit.smtp.url, ...env }) });
  beforeAll(async () => {
    Object.assign(kit, t);
    const observers = composeFeatures(t.ctx).monitorPollObservers;
    kit.poll = createMonitorPoller(t.ctx, { pool, observers }).poll;
    kit.observe = async (events) => {
      for (const observe of observers) await observe(events);
    };
    kit.ntfyId = await notificationServer(kit, { name: 'ntfy', provider: 'selfhosted_push', url: kit.ntfy.url, is_default: true });
  });
  return kit;
}

export async function notificationServer(t: TestApp, payload: Record<string, unknown>): Promise<number> {
  const res = await request(t.app, t.as.operator, { method: 'POST', url: '/api/v1/notification-servers', payload });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().id;
}

let serverSeq = 0;

/** A confirmed root server on the sshd (`name`-<n>, every 5 s) with monitoring on but no schedule: the test drives its polls. */
export async function monitoredServer(kit: AlertsApp, name: string, extra: Record<string, unknown> = {}) {
  const payload = {
    name: `${name}-${++serverSeq}`,
    ip: kit.sshd.host,
    port: kit.sshd.port,
    monitor_update_interval: '5s',
    ...passwordLogin(),
    ...extra,
  };
  const res = await request(kit.app, kit.as.operator, { method: 'POST', url: '/api/v1/root-servers', payload });
  expect(res.statusCode, res.body).toBe(201);
  const { id } = res.json() as { id: number };
  const confirmed = await request(kit.app, kit.as.operator, { method: 'POST', url: `/api/v1/root-servers/${id}/actions/confirm` });
  expect(confirmed.statusCode, confirmed.body).toBe(200);
  await monitorByHand(kit.ctx.db, [id]);
  return { id, name: payload.name };
}

export async function createRule(t: TestApp, payload: Record<string, unknown>) {
  const res = await request(t.app, t.as.operator, { method: 'POST', url: '/api/v1/alert-rules', payload });
  expect(res.statusCode, res.body).toBe(201);
  return res.json() as { id: number } & Record<string, unknown>;
}

/** An alert as the API answers it: the fields the tests compute with typed, the rest to compare. */
export interface AlertRow {
  id: number;
  rule_id: number;
  value: number;
  resolved_value: number | null;
  silenced: boolean;
  [field: string]: unknown;
}

export const alertsOf = async (t: TestApp, query: string) =>
  (await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/alerts?${query}` })).json().items as AlertRow[];

/** The server's fire (and repeat) or resolve notices in its chatter, oldest first. */
export const notices = (t: TestApp, serverId: number, prefix: '[ALERT]' | '[RESOLVED]') =>
  t.ctx.db.message.findMany({
    where: { model_name: 'svc.root.server', rec_id: serverId, subtype_xmlid: 'mail.mt_alert', body: { startsWith: prefix } },
    orderBy: { id: 'asc' },
  });

/** The pushes a push server received whose title contains `text`. */
export const pushes = (server: RecordingServer, text: string) =>
  server.callsTo('/').filter((c) => c.method === 'POST' && (JSON.parse(c.body) as { title: string }).title.includes(text));

/** A good poll of a server at `at` (ms since the epoch) with these figures, as a poll tells the observers. */
export const okPoll = (serverId: number, at: number, metrics: Record<string, number>): MonitorPollEvent => ({
  root_server_id: serverId,
  outcome: 'ok',
  previous_state: 'online',
  server_state: 'online',
  metrics,
  failures: 0,
  error: null,
  at: new Date(at),
});

/** POSTs each payload: each is a 400 naming its field. */
export async function expectEachRefused(t: TestApp, url: string, cases: [Record<string, unknown>, string][]) {
  for (const [payload, field] of cases) {
    const res = await request(t.app, t.as.operator, { method: 'POST', url, payload });
    expect(res.statusCode, JSON.stringify(payload)).toBe(400);
    const fields = (res.json().error.details.fields as { field: string }[]).map((f) => f.field.replace(/^body\./, '').split('.')[0]);
    expect(fields, res.body).toContain(field);
  }
}
