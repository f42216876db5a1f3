// An inbound webhook's token is its secret: it must reach no log line, however the path that
// carries it is spelled. Real HTTP requests (raw paths, sent as written: app.inject would
// normalise them first) to the app on loopback, on real PostgreSQL and Redis; the log lines are
// the app's own, kept by the test context.
import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { beforeAll, describe, expect, it } from 'vitest';
import { loggerOptions } from '../src/core/logger.js';
import { request } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';

const t = useTestApp();
let port: number;
let token: string;

beforeAll(async () => {
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  port = (t.app.server.address() as AddressInfo).port;
  const partner = await t.ctx.db.partner.create({ data: { name: 'Log redaction', email: 'log-redaction@example.com' } });
  const sub = await t.ctx.db.subscription.create({ data: { name: 'Log redaction', partner_id: partner.id } });
  const hook = await request(t.app, t.as.admin, {
    method: 'POST',
    url: '/api/v1/webhooks',
    payload: { model_name: 'svc.subscription', rec_id: sub.id },
  });
  expect(hook.statusCode, hook.body).toBe(201);
  token = hook.json().token;
});

/** POSTs to the path exactly as written; answers the status. */
function post(path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, method: 'POST', path, headers: { 'content-type': 'application/json' } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode!));
    });
    req.on('error', reject);
    req.end('{"message":"log redaction"}');
  });
}

const encodeAll = (s: string) => [...s].map((c) => `%${c.charCodeAt(0).toString(16).padStart(2, '0')}`).join('');
/** Percent-decodes repeatedly, byte by byte (malformed sequences stay). */
function decoded(text: string): string {
  let out = text;
  for (let prev = ''; prev !== out; ) {
    prev = out;
    out = out.replace(/%([0-9a-f]{2})/gi, (_, h: string) => String.fromCharCode(Number.parseInt(h, 16)));
  }
  return out;
}

describe('the webhook token in logged request URLs', () => {
  it('is redacted after decoding and normalising the path: case, slashes, percent-encoding, dot segments', async () => {
    // Reaches the webhook: the call is answered (and was logged with its token).
    expect(await post(`/%73vc/webhook/${token}`)).toBe(200);
    const spellings = [
      `/svc/./webhook/${token}`,
      `/svc%2Fwebhook%2F${token}`,
      `/svc/webhook%2f${token}`,
      `/svc%252Fwebhook%252F${token}`,
      `/SVC/WebHook/${token}`,
      `//svc///webhook//${token}`,
      `/svc/%77%65bhook/${token}`,
      `/svc/webhook/${encodeAll(token)}`,
      `/svc/webhook/${token.slice(0, 30)}%${token.charCodeAt(30).toString(16)}${token.slice(31)}`,
      `/svc/x/../webhook/${token}`,
      `/svc/%2e/webhook/${token}`,
      `/svc/%2E%2E/svc/webhook/${token}`,
      `/svc/webhook/../../${token}`,
      `/svc\\webhook\\${token}`,
      `/svc/webhook/${token}?a=1`,
    ];
    for (const path of spellings) expect(await post(path), path).toBeGreaterThanOrEqual(200);

    const log = t.ctx.logText();
    expect(log).toContain('/svc/webhook/[redacted]');
    for (const text of [log, decoded(log)]) {
      expect(text).not.toContain(token);
      // Nor any part of it: every 12-character piece of a random 64-hex token is absent.
      for (let at = 0; at + 12 <= token.length; at += 4) expect(text, token.slice(at, at + 12)).not.toContain(token.slice(at, at + 12));
    }
  });

  it('leaves ordinary URLs readable (query parameters named, without values)', async () => {
    await request(t.app, t.as.admin, { method: 'GET', url: '/api/v1/action-logs?model_name=q-secret-value&limit=5' });
    expect(await post('/api/v1/nothing%20here/./x')).toBe(404);
    const log = t.ctx.logText();
    expect(log).toContain('"url":"/api/v1/action-logs?model_name=&limit="');
    expect(log).not.toContain('q-secret-value');
    expect(log).toContain('"url":"/api/v1/nothing%20here/./x"');
  });

  it('is redacted in logged errors too, whatever quotes the URL', () => {
    const lines: string[] = [];
    const log = pino(loggerOptions('info'), { write: (line: string) => void lines.push(line) });
    const err = new Error(`Route POST:/svc%2Fwebhook%2F${token} not found; see http://svc.test/svc/./webhook/${token}`);
    log.error({ err }, 'failed');
    const text = lines.join('');
    expect(text).not.toContain(token);
    expect(text).toContain('Route POST:/svc/webhook/[redacted] not found; see http://svc.test/svc/webhook/[redacted]');
  });
});
