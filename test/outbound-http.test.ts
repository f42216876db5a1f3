// The outbound HTTP client against real local HTTP servers (node:http) and the real PostgreSQL
// action log: timeouts, bounded answers, failure reasons, secret-free action-log rows, and the
// fetch-compatible form driven by the real Octokit client.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Octokit } from '@octokit/rest';
import { OutboundError } from '../src/core/outbound-error.js';
import { createOutboundHttp, type OutboundHttp } from '../src/core/outbound-http.js';
import { createTestContext, type TestContext } from './helpers/context.js';
import { sendJson, startRecordingServer, type RecordingServer } from './helpers/http-recorder.js';
import { freePort } from './helpers/sshd.js';

let ctx: TestContext;
let http: OutboundHttp;
let remote: RecordingServer;
let recId = 0;
const target = () => ({ model_name: 'svc.saas.backup.server' as const, rec_id: ++recId });
const logsOf = (rec_id: number) => ctx.db.actionLog.findMany({ where: { rec_id, model_name: 'svc.saas.backup.server' } });

beforeAll(async () => {
  ctx = await createTestContext({ OUTBOUND_TIMEOUT_MS: '300', OUTBOUND_MAX_RESPONSE_BYTES: '2048' });
  http = createOutboundHttp(ctx);
  remote = await startRecordingServer((req, res) => {
    switch (req.path) {
      case '/echo':
        return sendJson(res, 200, { received: JSON.parse(req.body || 'null'), token: 'tk_answer_secret', ok: true });
      case '/hang':
        return; // never answers
      case '/big-declared':
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100000' });
        return res.end('x'.repeat(100000));
      case '/big-streamed':
        res.writeHead(200, { 'content-type': 'text/plain' }); // chunked, no length announced
        for (let i = 0; i < 10; i++) res.write('y'.repeat(1000));
        return res.end();
      case '/html':
        res.writeHead(200, { 'content-type': 'text/html' });
        return res.end('<html><body>Welcome to nginx</body></html>');
      case '/long':
        res.writeHead(200, { 'content-type': 'text/plain' });
        return res.end(`${'w'.repeat(1500)}END-OF-ANSWER`);
      case '/moved':
        res.writeHead(302, { location: '/echo' });
        return res.end();
      case '/repos/acme/old-name/commits/main':
        res.writeHead(301, { location: '/repos/acme/shop/commits/main', 'content-type': 'application/json' });
        return res.end('{"message":"Moved Permanently"}');
      case '/repos/acme/shop/commits/main':
        return sendJson(res, 200, { sha: 'abc123', commit: { message: 'Fix', author: { name: 'Ann' } } });
      default:
        return sendJson(res, 404, { error: 'not found' });
    }
  });
});
afterAll(async () => {
  await remote.close();
  await ctx.cleanup();
});

describe('request', () => {
  it('sends JSON with headers, and logs an api_call row without secrets', async () => {
    const t = target();
    const res = await http.request(
      t,
      {
        method: 'POST',
        url: `${remote.url}/echo`,
        headers: { 'X-API-Key': 'key-abc-123' },
        json: { db_name: 'shop', password: 'pw-xyz-789' },
      },
      { secrets: ['key-abc-123'] },
    );
    expect(res.status).toBe(200);
    expect(res.json()).toMatchObject({ received: { db_name: 'shop', password: 'pw-xyz-789' }, ok: true });
    const call = remote.calls.at(-1)!;
    expect(call.headers['x-api-key']).toBe('key-abc-123');
    expect(call.headers['content-type']).toBe('application/json');

    const [log] = await logsOf(t.rec_id);
    expect(log).toMatchObject({ action_type: 'api_call', status: 'success' });
    expect(log!.input_text).toContain(`POST ${remote.url}/echo`);
    expect(log!.input_text).toContain('x-api-key: [redacted]');
    expect(log!.input_text).toContain('"db_name":"shop"');
    expect(log!.output_text).toMatch(/^HTTP 200/);
    const stored = log!.input_text + log!.output_text;
    for (const secret of ['key-abc-123', 'pw-xyz-789', 'tk_answer_secret']) expect(stored).not.toContain(secret);
  });

  it('form bodies have their secret fields redacted in the log', async () => {
    const t = target();
    await http.request(t, { method: 'POST', url: `${remote.url}/echo`, form: { grant_type: 'jwt', assertion: 'eyJ.secret.sig' } });
    expect(remote.calls.at(-1)!.body).toBe('grant_type=jwt&assertion=eyJ.secret.sig');
    const [log] = await logsOf(t.rec_id);
    expect(log!.input_text).toContain('grant_type=jwt&assertion=%5Bredacted%5D');
    expect(log!.input_text).not.toContain('eyJ.secret.sig');
  });

  it('gives up after the timeout with reason timeout, and logs the failure', async () => {
    const t = target();
    const err = await http.request(t, { url: `${remote.url}/hang` }).catch((e) => e);
    expect(err).toBeInstanceOf(OutboundError);
    expect(err).toMatchObject({ reason: 'timeout', statusCode: 400, code: 'user_error' });
    expect(err.message).toContain('no answer within 300 ms');
    const [log] = await logsOf(t.rec_id);
    expect(log).toMatchObject({ action_type: 'api_call', status: 'failure', output_text: err.message });
  });

  it('a refused connection fails with reason refused', async () => {
    const port = await freePort();
    const err = await http.request(target(), { url: `http://127.0.0.1:${port}/api/ping` }).catch((e) => e);
    expect(err).toMatchObject({ reason: 'refused' });
    expect(err.message).toBe(`GET http://127.0.0.1:${port}/api/ping: connection refused`);
  });

  it('answers beyond the size bound fail, whether announced or streamed', async () => {
    for (const path of ['/big-declared', '/big-streamed']) {
      const err = await http.request(target(), { url: `${remote.url}${path}` }).catch((e) => e);
      expect(err).toMatchObject({ reason: 'too_large' });
      expect(err.message).toContain('limit of 2048 bytes');
    }
  });

  it('a non-JSON answer is reported with an excerpt when JSON is expected', async () => {
    const res = await http.request(target(), { url: `${remote.url}/html` });
    expect(() => res.json()).toThrow(/not JSON: <html><body>Welcome to nginx/);
  });

  it('read: the caller judges the answer before it is logged; a refusal is a failure row with its reason', async () => {
    const t = target();
    const value = await http.request(t, { url: `${remote.url}/echo` }, { read: (res) => (res.okJson() as { ok: boolean }).ok });
    expect(value).toBe(true);
    const t2 = target();
    const err = await http.request(t2, { url: `${remote.url}/html` }, { read: (res) => res.json() }).catch((e) => e);
    expect(err).toMatchObject({ reason: 'not_json' });
    const [log] = await logsOf(t2.rec_id);
    expect(log!.status).toBe('failure');
    expect(log!.output_text).toMatch(/^HTTP 200\n<html>[\s\S]*\n\nGET .* with something that is not JSON/);
    expect((await logsOf(t.rec_id))[0]!.status).toBe('success');
  });

  it('does not follow redirects (credentials stay with their host)', async () => {
    const before = remote.callsTo('/echo').length;
    const res = await http.request(target(), { url: `${remote.url}/moved`, headers: { 'x-api-key': 'k' } });
    expect(res.status).toBe(302);
    expect(remote.callsTo('/echo').length).toBe(before);
  });

  it('the action log keeps a short excerpt of the answer', async () => {
    const t = target();
    await http.request(t, { url: `${remote.url}/long` });
    const [log] = await logsOf(t.rec_id);
    expect(log!.output_text).toMatch(/^HTTP 200\nw{300}… \[1213 more characters\]$/);
  });

  it('a header value HTTP cannot carry fails with bad_header naming the header, sending nothing', async () => {
    const calls = remote.calls.length;
    for (const value of ['key€', 'key\r\nX-Injected: 1']) {
      const t = target();
      const err = await http
        .request(t, { url: `${remote.url}/echo`, headers: { 'X-API-Key': value } }, { secrets: [value] })
        .catch((e) => e);
      expect(err).toBeInstanceOf(OutboundError);
      expect(err).toMatchObject({ reason: 'bad_header', statusCode: 400, code: 'user_error' });
      expect(err.message).toBe(
        `GET ${remote.url}/echo: the x-api-key header would carry characters an HTTP header cannot carry; set that value again`,
      );
      const dl = await http.download(t, { url: `${remote.url}/echo`, headers: { 'X-API-Key': value } }).catch((e) => e);
      expect(dl).toMatchObject({ reason: 'bad_header' });
      const octokit = new Octokit({ baseUrl: remote.url, auth: value, request: { fetch: http.fetchFor(t) } });
      const viaOctokit = await octokit.rest.repos.getCommit({ owner: 'acme', repo: 'shop', ref: 'main' }).catch((e) => e);
      expect(viaOctokit.cause).toMatchObject({ reason: 'bad_header' });
    }
    expect(remote.calls.length).toBe(calls);
  });

  it('never stores or repeats credentials given in the URL', async () => {
    const t = target();
    await http.request(t, { url: `${remote.url}/echo?access_token=qs-secret&x=1` });
    const [log] = await logsOf(t.rec_id);
    expect(log!.input_text).not.toContain('qs-secret');
    expect(log!.input_text).toContain('access_token=%5Bredacted%5D&x=1');

    const calls = remote.calls.length;
    const err = await http.request(target(), { url: `http://user:urlpass@127.0.0.1:${remote.port}/echo` }).catch((e) => e);
    expect(err).toMatchObject({ reason: 'bad_url' });
    expect(err.message).toContain('credentials in the URL are not supported');
    expect(err.message).not.toContain('urlpass');
    expect(remote.calls.length).toBe(calls);
  });
});

describe('fetchFor (fetch-compatible, for Octokit)', () => {
  it('drives the real Octokit client, with the token redacted from the log', async () => {
    const t = target();
    const octokit = new Octokit({ baseUrl: remote.url, auth: 'ghp_octo_secret', request: { fetch: http.fetchFor(t) } });
    const { data } = await octokit.rest.repos.getCommit({ owner: 'acme', repo: 'shop', ref: 'main' });
    expect(data.sha).toBe('abc123');
    expect(remote.calls.at(-1)!.headers.authorization).toBe('token ghp_octo_secret');
    const [log] = await logsOf(t.rec_id);
    expect(log!.input_text).toContain(`GET ${remote.url}/repos/acme/shop/commits/main`);
    expect(log!.input_text).toContain('authorization: [redacted]');
    expect(log!.input_text + log!.output_text).not.toContain('ghp_octo_secret');
  });

  it('a redirect is a failure naming it, not followed (nor handed to Octokit as data)', async () => {
    const t = target();
    const octokit = new Octokit({ baseUrl: remote.url, auth: 'ghp_octo_secret', request: { fetch: http.fetchFor(t) } });
    const before = remote.callsTo('/repos/acme/shop/commits/main').length;
    const err = await octokit.rest.repos.getCommit({ owner: 'acme', repo: 'old-name', ref: 'main' }).catch((e) => e);
    expect(err.cause).toBeInstanceOf(OutboundError);
    expect(err.cause).toMatchObject({
      reason: 'http_status',
      message: `GET ${remote.url}/repos/acme/old-name/commits/main answered HTTP 301 (to ${remote.url}/repos/acme/shop/commits/main): redirects are not followed`,
    });
    expect(remote.callsTo('/repos/acme/shop/commits/main').length).toBe(before);
    expect((await logsOf(t.rec_id))[0]).toMatchObject({ status: 'failure' });
  });

  it('rejects with OutboundError when there is no answer', async () => {
    const fetchFn = http.fetchFor(target());
    await expect(fetchFn(`${remote.url}/hang`)).rejects.toMatchObject({ reason: 'timeout' });
  });
});

describe('download (a large answer as a stream)', () => {
  let files: RecordingServer;
  let api: RecordingServer;
  const drain = async (body: NodeJS.ReadableStream) => {
    let bytes = 0;
    for await (const chunk of body) bytes += (chunk as Buffer).length;
    return bytes;
  };

  beforeAll(async () => {
    // A file host that refuses credentials, and an API that redirects to it with a URL token.
    files = await startRecordingServer((req, res) => {
      if (req.headers.authorization !== undefined || req.headers['x-api-key'] !== undefined) {
        res.writeHead(400);
        return res.end('no credentials here');
      }
      if (req.path === '/slow') {
        res.writeHead(200, { 'content-type': 'application/octet-stream' });
        return res.write('x'.repeat(100)); // and never more
      }
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      const size = Number(req.query.get('size') ?? 1000);
      for (let sent = 0; sent < size; sent += 500) res.write('z'.repeat(Math.min(500, size - sent)));
      res.end();
    });
    api = await startRecordingServer((req, res) => {
      if (req.path === '/archive') {
        res.writeHead(302, { location: `${files.url}/blob?size=${req.query.get('size') ?? 1000}&token=url-secret-123` });
        return res.end();
      }
      if (req.path === '/to-ftp') {
        res.writeHead(302, { location: 'ftp://127.0.0.1/blob' });
        return res.end();
      }
      return sendJson(res, 404, { message: 'Not Found', token: 'tk_in_answer' });
    });
  });
  afterAll(async () => {
    await files.close();
    await api.close();
  });

  it('follows the redirect without the credential, streams the body, and logs one row without either secret', async () => {
    const t = target();
    const dl = await http.download(
      t,
      { url: `${api.url}/archive?size=1800`, headers: { authorization: 'token ghp_dl_secret' } },
      { secrets: ['ghp_dl_secret'], maxRedirects: 1 },
    );
    expect(dl.status).toBe(200);
    expect(await drain(dl.body)).toBe(1800);
    await dl.logged;
    expect(api.calls.at(-1)!.headers.authorization).toBe('token ghp_dl_secret');
    expect(files.calls.at(-1)!.headers.authorization).toBeUndefined();
    const [log] = await logsOf(t.rec_id);
    expect(log).toMatchObject({ action_type: 'api_call', status: 'success' });
    expect(log!.input_text).toContain('authorization: [redacted]');
    expect(log!.output_text).toBe(`HTTP 302 → ${files.url}/blob?[redacted]\nHTTP 200 application/octet-stream\n1800 bytes received`);
    expect(log!.input_text + log!.output_text).not.toMatch(/ghp_dl_secret|url-secret-123/);
  });

  it('without maxRedirects a redirect is a refusal; a redirect to another scheme is refused', async () => {
    const t = target();
    await expect(http.download(t, { url: `${api.url}/archive` })).rejects.toMatchObject({ reason: 'http_status' });
    await expect(http.download(target(), { url: `${api.url}/to-ftp` }, { maxRedirects: 3 })).rejects.toMatchObject({
      reason: 'bad_url',
      message: `GET ${api.url}/to-ftp redirected to an unusable location (ftp://127.0.0.1/blob)`,
    });
    expect((await logsOf(t.rec_id))[0]!.status).toBe('failure');
  });

  it('a non-2xx answer fails with the caller’s error, its body read and redacted in the row', async () => {
    const t = target();
    const err = await http
      .download(t, { url: `${api.url}/missing` }, { refused: (res) => new Error(`refused with ${res.status}: ${res.excerpt()}`) })
      .catch((e) => e);
    expect(err.message).toBe('refused with 404: {"message":"Not Found","token":"[redacted]"}');
    const [log] = await logsOf(t.rec_id);
    expect(log!.output_text).toMatch(/^HTTP 404\n\{"message":"Not Found","token":"\[redacted\]"\}/);
  });

  it('a body beyond the bound fails as it streams; one that stalls fails at the deadline; a dropped one says so', async () => {
    const big = await http.download(target(), { url: `${api.url}/archive?size=5000` }, { maxRedirects: 1, maxResponseBytes: 2000 });
    await expect(drain(big.body)).rejects.toMatchObject({ reason: 'too_large' });
    await big.logged;

    const t = target();
    const slow = await http.download(t, { url: `${files.url}/slow` });
    await expect(drain(slow.body)).rejects.toMatchObject({
      reason: 'timeout',
      message: `GET ${files.url}/slow: the answer did not arrive in full within 300 ms (100 bytes received)`,
    });
    await slow.logged;
    expect((await logsOf(t.rec_id))[0]).toMatchObject({
      status: 'failure',
      output_text: expect.stringContaining('did not arrive in full'),
    });

    const t2 = target();
    const dropped = await http.download(t2, { url: `${api.url}/archive?size=1000` }, { maxRedirects: 1 });
    dropped.body.destroy();
    await dropped.logged;
    expect((await logsOf(t2.rec_id))[0]).toMatchObject({
      status: 'failure',
      output_text: expect.stringMatching(/stopped by the receiver after \d+ bytes$/),
    });
  });
});
