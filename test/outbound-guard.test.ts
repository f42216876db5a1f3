// The outbound address guard on real sockets, with OUTBOUND_ALLOW_NETS empty (as in production by
// default): every outbound client (backup API, ntfy, FCM's token_uri, the git host through Octokit
// and its tarball download) refuses a loopback target — written as an address, as a name that
// resolves to one, IPv4-mapped, or reached through a redirect — with a 400 user_error, before a
// byte is sent, and the action log holds none of the target's answer. Link-local addresses are
// covered by the unit test (no packet may leave this machine, even if the guard were broken).
import { generateKeyPairSync } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OutboundError } from '../src/core/outbound-error.js';
import { createOutboundHttp } from '../src/core/outbound-http.js';
import { createGitHost } from '../src/git/git-host.js';
import { request } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';
import { sendJson, startRecordingServer, type RecordingServer } from './helpers/http-recorder.js';

// What an internal service would answer: it must never reach the action log.
const INTERNAL = 'internal-answer-4e1f9c';
const BLOCKED = /127\.0\.0\.1 is a loopback address: the service does not call loopback, link-local or unspecified addresses/;

let internal: RecordingServer;
let recId = 0;

beforeAll(async () => {
  internal = await startRecordingServer((_req, res) =>
    sendJson(res, 200, { status: 'ok', healthy: true, secret: INTERNAL, access_token: INTERNAL, sha: 'a'.repeat(40) }),
  );
});
afterAll(async () => {
  await internal?.close();
});

const t = useTestApp({ env: () => ({ OUTBOUND_ALLOW_NETS: '', GIT_API_URL: internal.url, FCM_API_URL: internal.url }) });

const post = (url: string, payload: object) => request(t.app, t.as.operator, { method: 'POST', url, payload });
const logsOf = (model_name: 'svc.saas.backup.server' | 'svc.ntfy.server', rec_id: number) =>
  t.ctx.db.actionLog.findMany({ where: { model_name, rec_id } });

/** A refused call: 400 user_error with the reason, nothing received, a failure row without the answer. */
async function expectRefused(res: Awaited<ReturnType<typeof post>>, logs: () => Promise<{ status: string }[]>, message = BLOCKED) {
  expect(res.statusCode).toBe(400);
  expect(res.json().error).toMatchObject({ code: 'user_error', message: expect.stringMatching(message) });
  const rows = await logs();
  expect(rows.length).toBeGreaterThan(0);
  expect(rows.every((r) => r.status === 'failure')).toBe(true);
  expect(JSON.stringify(rows)).not.toContain(INTERNAL);
}

describe('with OUTBOUND_ALLOW_NETS empty, each client refuses loopback', () => {
  it('backup server: test_connection, also when the name resolves to loopback (localhost)', async () => {
    for (const [url, message] of [
      [internal.url, BLOCKED],
      [`http://localhost:${internal.port}`, /localhost \((127\.0\.0\.1|::1)\) is a loopback address/],
    ] as const) {
      const created = await post('/api/v1/backup-servers', { url, download_url: 'https://d.example.com', api_key: 'k-1' });
      expect(created.statusCode, created.body).toBe(201);
      const id = created.json().id;
      const res = await post(`/api/v1/backup-servers/${id}/actions/test_connection`, {});
      await expectRefused(res, () => logsOf('svc.saas.backup.server', id), message);
    }
    expect(internal.calls).toHaveLength(0);
  });

  it('ntfy: test_connection and send_notification', async () => {
    const created = await post('/api/v1/notification-servers', { provider: 'selfhosted_push', url: internal.url });
    expect(created.statusCode, created.body).toBe(201);
    const id = created.json().id;
    await expectRefused(await post(`/api/v1/notification-servers/${id}/actions/test_connection`, {}), () => logsOf('svc.ntfy.server', id));
    const sent = await post(`/api/v1/notification-servers/${id}/actions/send_notification`, { title: 'T', message: 'M' });
    await expectRefused(sent, () => logsOf('svc.ntfy.server', id));
    expect(internal.calls).toHaveLength(0);
  });

  it("FCM: the service account's token_uri", async () => {
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const account = {
      type: 'service_account',
      project_id: 'p',
      private_key: privateKey.export({ type: 'pkcs8', format: 'pem' }),
      client_email: 'sa@p.iam.gserviceaccount.com',
      token_uri: `${internal.url}/token`,
    };
    const created = await post('/api/v1/notification-servers', { provider: 'cloud_push', fcm_service_account_json: account });
    expect(created.statusCode, created.body).toBe(201);
    const id = created.json().id;
    const res = await post(`/api/v1/notification-servers/${id}/actions/test_connection`, {});
    await expectRefused(res, () => logsOf('svc.ntfy.server', id), new RegExp(`^POST ${internal.url}/token: ${BLOCKED.source}`));
    expect(internal.calls).toHaveLength(0);
  });

  it('git host: the REST calls through Octokit and the tarball download', async () => {
    const host = createGitHost(t.ctx);
    const target = { model_name: 'svc.saas.git.repository' as const, rec_id: ++recId };
    const head = await host.branchHead('ghp_guard', 'acme/shop', 'main', target).catch((e) => e);
    expect(head).toMatchObject({ statusCode: 400, code: 'user_error', message: expect.stringMatching(BLOCKED) });
    const tarball = await host
      .tarball('ghp_guard', 'acme/shop', 'a'.repeat(40), target, { maxBytes: 10_000, timeoutMs: 2_000 })
      .catch((e) => e);
    expect(tarball).toMatchObject({ statusCode: 400, code: 'user_error', message: expect.stringMatching(BLOCKED) });
    expect(internal.calls).toHaveLength(0);
    const rows = await t.ctx.db.actionLog.findMany({ where: { model_name: 'svc.saas.git.repository', rec_id: target.rec_id } });
    expect(rows.map((r) => r.status)).toEqual(['failure', 'failure']);
    expect(JSON.stringify(rows)).not.toContain(INTERNAL);
  });

  it('the core client: every spelling of a refused address, checked before connecting', async () => {
    const http = createOutboundHttp(t.ctx);
    for (const host of ['127.0.0.1', '127.0.0.2', '[::ffff:127.0.0.1]', '[::ffff:7f00:1]', '[::1]', '0.0.0.0', '[::]', 'localhost']) {
      const err = await http
        .request({ model_name: 'svc.saas.backup.server', rec_id: ++recId }, { url: `http://${host}:${internal.port}/x` })
        .catch((e) => e);
      expect(err, host).toBeInstanceOf(OutboundError);
      expect(err, host).toMatchObject({ reason: 'blocked', message: expect.stringMatching(/is an? (loopback|unspecified) address/) });
    }
    expect(internal.calls).toHaveLength(0);
  });
});

describe('allowing one address does not allow the rest of loopback', () => {
  let redirector: Server;
  let redirectorUrl: string;

  beforeAll(async () => {
    // A stand-in on 127.0.0.2 (the one allowed address) that redirects to the refused 127.0.0.1.
    redirector = createServer((req, res) => {
      if (req.url === '/ok') {
        res.writeHead(200, { 'content-type': 'application/json' });
        return res.end('{"ok":true}');
      }
      res.writeHead(302, { location: `${internal.url}/file` });
      res.end();
    });
    await new Promise<void>((resolve) => redirector.listen(0, '127.0.0.2', resolve));
    redirectorUrl = `http://127.0.0.2:${(redirector.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    redirector.closeAllConnections();
    await new Promise((resolve) => redirector.close(resolve));
  });

  it('a redirect from the allowed stand-in to loopback on another address and port is refused', async () => {
    const http = createOutboundHttp({ db: t.ctx.db, config: { ...t.ctx.config, OUTBOUND_ALLOW_NETS: ['127.0.0.2/32'] } });
    const ok = await http.request({ model_name: 'svc.saas.backup.server', rec_id: ++recId }, { url: `${redirectorUrl}/ok` });
    expect(ok.json()).toEqual({ ok: true });

    const target = { model_name: 'svc.saas.backup.server' as const, rec_id: ++recId };
    const err = await http.download(target, { url: `${redirectorUrl}/archive` }, { maxRedirects: 3 }).catch((e) => e);
    expect(err).toMatchObject({ reason: 'blocked', message: expect.stringMatching(BLOCKED) });
    expect(internal.calls).toHaveLength(0);
    const [row] = await t.ctx.db.actionLog.findMany({ where: { model_name: 'svc.saas.backup.server', rec_id: target.rec_id } });
    expect(row).toMatchObject({ status: 'failure', output_text: expect.stringContaining(`HTTP 302 → ${internal.url}/file`) });
  });
});
