// Notification servers over the real API, real PostgreSQL, Redis and BullMQ worker, against two
// local HTTP servers that implement the APIs the service calls and record what they receive: an ntfy server
// (health, publish, account check, token creation; Basic and Bearer auth) and an FCM HTTP v1 +
// legacy API with an OAuth2 token endpoint that verifies the service account's RS256 JWT with a
// test RSA key pair generated here.
import { generateKeyPairSync, verify, type KeyObject } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { actionsOf, request, waitForJob } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';
import { sendJson, startRecordingServer, type RecordedRequest, type RecordingServer } from './helpers/http-recorder.js';
import { freePort } from './helpers/sshd.js';

const ADMIN = { username: 'admin', password: 'ntfy-admin-pw-1' };
// A publisher whose credentials are not ASCII: ntfy compares the UTF-8 bytes.
const UNICODE_USER = { username: 'José€', password: 'pässwörd€' };
const STATIC_TOKEN = 'tk_static_token_0001';
const LEGACY_KEY = 'legacy-server-key-0001';

let ntfy: RecordingServer;
let fcm: RecordingServer;
const issuedNtfyTokens: string[] = [];
const issuedAccessTokens: string[] = [];
const assertions: string[] = [];
// client_email → verification key and token lifetime known to the fake OAuth2 endpoint
const knownAccounts = new Map<string, { publicKey: KeyObject; expiresIn: number }>();

function basic(user: string, pass: string) {
  return `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`;
}

function ntfyHandler(req: RecordedRequest, res: import('node:http').ServerResponse) {
  const auth = req.headers.authorization;
  const isAdmin = auth === basic(ADMIN.username, ADMIN.password);
  const unauthorized = () => sendJson(res, 401, { code: 40101, http: 401, error: 'unauthorized' });
  if (req.method === 'GET' && req.path === '/v1/health') return sendJson(res, 200, { healthy: true });
  if (req.method === 'GET' && req.path === '/v1/account') {
    if (!auth) return sendJson(res, 200, { username: '*', role: 'anonymous' });
    return isAdmin ? sendJson(res, 200, { username: 'admin', role: 'admin' }) : unauthorized();
  }
  if (req.method === 'POST' && req.path === '/v1/account/token') {
    if (!isAdmin) return unauthorized();
    const { label, expires } = JSON.parse(req.body);
    const token = `tk_user_${issuedNtfyTokens.length}_${Math.random().toString(36).slice(2)}`;
    issuedNtfyTokens.push(token);
    return sendJson(res, 200, { token, label, last_access: Math.floor(Date.now() / 1000), expires });
  }
  if (req.method === 'POST' && req.path === '/') {
    const publisher = auth === `Bearer ${STATIC_TOKEN}` || auth === basic(UNICODE_USER.username, UNICODE_USER.password);
    if (auth && !isAdmin && !publisher) return unauthorized();
    const msg = JSON.parse(req.body);
    return sendJson(res, 200, { id: `m${ntfy.calls.length}`, time: 1, event: 'message', ...msg });
  }
  return sendJson(res, 404, { code: 40401, http: 404, error: 'page not found' });
}

function fcmHandler(req: RecordedRequest, res: import('node:http').ServerResponse) {
  if (req.method === 'POST' && req.path === '/token') {
    const form = new URLSearchParams(req.body);
    if (form.get('grant_type') !== 'urn:ietf:params:oauth:grant-type:jwt-bearer')
      return sendJson(res, 400, { error: 'unsupported_grant_type' });
    const jwt = form.get('assertion') ?? '';
    assertions.push(jwt);
    const [h, c, sig] = jwt.split('.');
    const header = JSON.parse(Buffer.from(h!, 'base64url').toString());
    const claims = JSON.parse(Buffer.from(c!, 'base64url').toString());
    const account = knownAccounts.get(claims.iss);
    const now = Math.floor(Date.now() / 1000);
    const valid =
      header.alg === 'RS256' &&
      account &&
      verify('RSA-SHA256', Buffer.from(`${h}.${c}`), account.publicKey, Buffer.from(sig!, 'base64url')) &&
      claims.aud === `${fcm.url}/token` &&
      claims.scope === 'https://www.googleapis.com/auth/firebase.messaging' &&
      claims.iat <= now + 5 &&
      claims.exp > now;
    if (!valid) return sendJson(res, 400, { error: 'invalid_grant', error_description: 'Invalid JWT Signature.' });
    const token = `ya29.access_${issuedAccessTokens.length}_${Math.random().toString(36).slice(2)}`;
    issuedAccessTokens.push(token);
    return sendJson(res, 200, { access_token: token, expires_in: account!.expiresIn, token_type: 'Bearer' });
  }
  const send = /^\/v1\/projects\/([^/]+)\/messages:send$/.exec(req.path);
  if (req.method === 'POST' && send) {
    const bearer = req.headers.authorization?.replace(/^Bearer /, '');
    if (!bearer || !issuedAccessTokens.includes(bearer)) {
      return sendJson(res, 401, {
        error: { code: 401, message: 'Request had invalid authentication credentials.', status: 'UNAUTHENTICATED' },
      });
    }
    return sendJson(res, 200, { name: `projects/${send[1]}/messages/${fcm.calls.length}` });
  }
  if (req.method === 'POST' && req.path === '/fcm/send') {
    if (req.headers.authorization !== `key=${LEGACY_KEY}`) {
      res.writeHead(401, { 'content-type': 'text/html' });
      return res.end('<HTML><TITLE>The request was missing an Authentication Key.</TITLE></HTML>');
    }
    const body = JSON.parse(req.body);
    return body.to.startsWith('/topics/')
      ? sendJson(res, 200, { message_id: 5551234 })
      : sendJson(res, 200, { multicast_id: 1, success: 1, failure: 0, results: [{ message_id: '0:1234' }] });
  }
  return sendJson(res, 404, { error: 'not found' });
}

/** A service-account JSON with a fresh RSA key that the fake token endpoint knows (or not). */
function serviceAccount(name: string, opts: { expiresIn?: number; known?: boolean; project_id?: string } = {}) {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const client_email = `${name}@test-project.iam.gserviceaccount.com`;
  if (opts.known !== false) knownAccounts.set(client_email, { publicKey, expiresIn: opts.expiresIn ?? 3600 });
  const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
  return {
    pem,
    json: JSON.stringify({
      type: 'service_account',
      project_id: opts.project_id ?? 'test-project',
      private_key_id: `kid-${name}`,
      private_key: pem,
      client_email,
      token_uri: `${fcm ? fcm.url : 'http://127.0.0.1:1'}/token`,
    }),
  };
}

beforeAll(async () => {
  ntfy = await startRecordingServer(ntfyHandler);
  fcm = await startRecordingServer(fcmHandler);
});
afterAll(async () => {
  await ntfy?.close();
  await fcm?.close();
});

const t = useTestApp({ workers: true, env: () => ({ FCM_API_URL: fcm.url, OUTBOUND_TIMEOUT_MS: '2000' }) });

const post = (payload: object) => request(t.app, t.as.operator, { method: 'POST', url: '/api/v1/notification-servers', payload });
const patch = (id: number, payload: object) =>
  request(t.app, t.as.operator, { method: 'PATCH', url: `/api/v1/notification-servers/${id}`, payload });
const act = actionsOf(t, 'notification-servers');

async function create(payload: object) {
  const res = await post(payload);
  expect(res.statusCode, res.body).toBe(201);
  return res.json() as { id: number } & Record<string, unknown>;
}

describe('validation: each rule is a 400 naming its field, and nothing is stored', () => {
  const wellFormed = JSON.parse(serviceAccount('bad', { known: false }).json);
  const badSa = (patchSa: Record<string, unknown>) => JSON.stringify({ ...wellFormed, ...patchSa });
  const rows: [string, object, string, RegExp][] = [
    ['self-hosted without url', { provider: 'selfhosted_push' }, 'url', /url is required/],
    [
      'self-hosted url not http(s)',
      { provider: 'selfhosted_push', url: 'ftp://push.example.com' },
      'url',
      /url must start with http:\/\/ or https:\/\//,
    ],
    ['self-hosted url without scheme', { provider: 'selfhosted_push', url: 'push.example.com' }, 'url', /must start with/],
    [
      'self-hosted url with a query',
      { provider: 'selfhosted_push', url: 'http://127.0.0.1:3939/internal?' },
      'url',
      /url must not have a query/,
    ],
    [
      'self-hosted url with a fragment',
      { provider: 'selfhosted_push', url: 'http://push.example.com/#x' },
      'url',
      /url must not have a fragment/,
    ],
    [
      'self-hosted url with credentials',
      { provider: 'selfhosted_push', url: 'http://me:pw@push.example.com' },
      'url',
      /url must not carry credentials/,
    ],
    [
      'admin username with a colon (Basic auth cannot carry it)',
      { provider: 'selfhosted_push', url: 'http://p', username: 'ad:min', password: 'x' },
      'username',
      /username must not contain ":"/,
    ],
    [
      'cloud with none of the three',
      { provider: 'cloud_push' },
      'fcm_project_id',
      /fcm_server_key, fcm_project_id or fcm_service_account_json/,
    ],
    [
      'service account not JSON',
      { provider: 'cloud_push', fcm_service_account_json: '{not json' },
      'fcm_service_account_json',
      /is not valid JSON/,
    ],
    [
      'service account not an object',
      { provider: 'cloud_push', fcm_service_account_json: '[1,2]' },
      'fcm_service_account_json',
      /must be a JSON object/,
    ],
    [
      'service account without private_key',
      { provider: 'cloud_push', fcm_service_account_json: badSa({ private_key: undefined }) },
      'fcm_service_account_json',
      /lacks "private_key"/,
    ],
    [
      'service account without client_email',
      { provider: 'cloud_push', fcm_service_account_json: badSa({ client_email: '' }) },
      'fcm_service_account_json',
      /lacks "client_email"/,
    ],
    [
      'service account with a broken key',
      {
        provider: 'cloud_push',
        fcm_service_account_json: badSa({ private_key: '-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n' }),
      },
      'fcm_service_account_json',
      /not a PEM private key/,
    ],
    [
      'service account token_uri not a URL',
      { provider: 'cloud_push', fcm_service_account_json: badSa({ token_uri: 'oauth2' }) },
      'fcm_service_account_json',
      /token_uri/,
    ],
    [
      'service account token_uri with credentials',
      { provider: 'cloud_push', fcm_service_account_json: badSa({ token_uri: 'https://me:pw@oauth2.example.com/token' }) },
      'fcm_service_account_json',
      /token_uri.*credentials/,
    ],
    [
      'service account token_uri with a fragment',
      { provider: 'cloud_push', fcm_service_account_json: badSa({ token_uri: 'https://oauth2.example.com/token#x' }) },
      'fcm_service_account_json',
      /token_uri.*fragment/,
    ],
    [
      'service account of another type',
      { provider: 'cloud_push', fcm_service_account_json: badSa({ type: 'authorized_user' }) },
      'fcm_service_account_json',
      /"type" other than "service_account"/,
    ],
    [
      'auto tokens without admin username',
      { provider: 'selfhosted_push', url: 'http://p', auto_generate_tokens: true, password: 'x' },
      'username',
      /auto_generate_tokens needs the admin username/,
    ],
    [
      'auto tokens without admin password',
      { provider: 'selfhosted_push', url: 'http://p', auto_generate_tokens: true, username: 'admin' },
      'password',
      /auto_generate_tokens needs the admin password/,
    ],
    [
      'auth without auth_method',
      { provider: 'selfhosted_push', url: 'http://p', auth_enabled: true },
      'auth_method',
      /auth_method \(password or token\) is required/,
    ],
    [
      'password method without username',
      { provider: 'selfhosted_push', url: 'http://p', auth_enabled: true, auth_method: 'password', password: 'x' },
      'username',
      /needs a username/,
    ],
    [
      'password method without password',
      { provider: 'selfhosted_push', url: 'http://p', auth_enabled: true, auth_method: 'password', username: 'u' },
      'password',
      /needs a password/,
    ],
    [
      'token method without token',
      { provider: 'selfhosted_push', url: 'http://p', auth_enabled: true, auth_method: 'token', username: 'u', password: 'p' },
      'auth_token',
      /needs an auth_token/,
    ],
    [
      'token_expiry_days 0',
      { provider: 'selfhosted_push', url: 'http://p', token_expiry_days: 0 },
      'token_expiry_days',
      /between 1 and 3650/,
    ],
    [
      'token_expiry_days 3651',
      { provider: 'selfhosted_push', url: 'http://p', token_expiry_days: 3651 },
      'token_expiry_days',
      /between 1 and 3650/,
    ],
  ];

  for (const [title, payload, field, message] of rows) {
    it(title, async () => {
      const before = await t.ctx.db.notificationServer.count();
      const res = await post(payload);
      expect(res.statusCode, res.body).toBe(400);
      const { error } = res.json();
      expect(error.code).toBe('validation_error');
      expect(error.message).toMatch(message);
      expect(error.message).toContain(field);
      expect(error.details).toEqual({ fields: [{ field, message: error.message }] });
      expect(await t.ctx.db.notificationServer.count()).toBe(before);
    });
  }

  it('the bounds 1 and 3650 and each valid shape are accepted', async () => {
    for (const payload of [
      { provider: 'selfhosted_push', url: 'https://push.example.com', token_expiry_days: 1 },
      { provider: 'selfhosted_push', url: 'http://push.example.com', token_expiry_days: 3650 },
      { provider: 'cloud_push', fcm_project_id: 'p' },
      { provider: 'cloud_push', fcm_server_key: 'k' },
      { provider: 'cloud_push', fcm_service_account_json: JSON.parse(serviceAccount('as-object').json) },
      { provider: 'selfhosted_push', url: 'http://p', auth_enabled: true, auth_method: 'token', auth_token: 't' },
    ]) {
      await create(payload);
    }
  });

  it('a change is checked against the record as it will be stored', async () => {
    const server = await create({
      provider: 'selfhosted_push',
      url: 'http://p',
      auth_enabled: true,
      auth_method: 'password',
      username: 'u',
      password: 'p',
    });
    for (const [payload, field] of [
      [{ password: '' }, 'password'],
      [{ username: null }, 'username'],
      [{ auth_method: 'token' }, 'auth_token'],
      [{ url: null }, 'url'],
      [{ provider: 'cloud_push' }, 'fcm_project_id'],
      [{ token_expiry_days: 4000 }, 'token_expiry_days'],
    ] as const) {
      const res = await patch(server.id, payload);
      expect(res.statusCode, JSON.stringify(payload)).toBe(400);
      expect(res.json().error.details.fields[0].field).toBe(field);
    }
    const stored = await t.ctx.db.notificationServer.findUniqueOrThrow({ where: { id: server.id } });
    expect(stored).toMatchObject({ provider: 'selfhosted_push', url: 'http://p', username: 'u', auth_method: 'password' });
    expect(stored.password).not.toBeNull();
    // A valid change passes: switching to token auth with the token supplied.
    expect((await patch(server.id, { auth_method: 'token', auth_token: 'tok' })).statusCode).toBe(200);
  });
});

describe('what the outbound client will use is checked when it is written', () => {
  const fieldsOf = (res: { json(): { error: { details: { fields: { field: string }[] } } } }) =>
    res.json().error.details.fields.map((d) => d.field);

  it('a url with a query, fragment or credentials is refused by PATCH too, changing nothing', async () => {
    const server = await create({ provider: 'selfhosted_push', url: ntfy.url });
    for (const url of [`${ntfy.url}/internal?`, `${ntfy.url}/#x`, `http://me:pw@127.0.0.1:${ntfy.port}`]) {
      const res = await patch(server.id, { url });
      expect(res.statusCode, url).toBe(400);
      expect(res.json().error.code).toBe('validation_error');
      expect(fieldsOf(res)).toEqual(['url']);
    }
    expect((await t.ctx.db.notificationServer.findUniqueOrThrow({ where: { id: server.id } })).url).toBe(ntfy.url);
  });

  it('secrets sent in an HTTP header (auth_token, fcm_server_key) are refused with characters a header cannot carry', async () => {
    const server = await create({ provider: 'selfhosted_push', url: ntfy.url });
    for (const [field, payload] of [
      ['auth_token', { provider: 'selfhosted_push', url: ntfy.url, auth_enabled: true, auth_method: 'token', auth_token: 'tok€' }],
      ['auth_token', { provider: 'selfhosted_push', url: ntfy.url, auth_token: 'tok\r\nX-Other: 1' }],
      ['fcm_server_key', { provider: 'cloud_push', fcm_server_key: 'key€' }],
    ] as const) {
      const before = await t.ctx.db.notificationServer.count();
      const created = await post(payload);
      expect(created.statusCode, JSON.stringify(payload)).toBe(400);
      expect(created.json().error.code).toBe('validation_error');
      expect(fieldsOf(created)).toEqual([`body.${field}`]);
      expect(await t.ctx.db.notificationServer.count()).toBe(before);
      const patched = await patch(server.id, { [field]: payload[field] });
      expect(patched.statusCode).toBe(400);
      expect(fieldsOf(patched)).toEqual([`body.${field}`]);
    }
  });

  it('Basic auth sends any username and password as UTF-8 (RFC 7617)', async () => {
    const server = await create({
      provider: 'selfhosted_push',
      url: ntfy.url,
      auth_enabled: true,
      auth_method: 'password',
      ...UNICODE_USER,
    });
    const res = await act(server.id, 'send_notification', { title: 'T', message: 'M' });
    expect(res.statusCode, res.body).toBe(200);
    const header = ntfy.callsTo('/').at(-1)!.headers.authorization!;
    expect(Buffer.from(header.replace(/^Basic /, ''), 'base64').toString('utf8')).toBe('José€:pässwörd€');
  });

  it('a header secret stored before that rule is a clear 400 when used, not a 500, and nothing is sent', async () => {
    const token = await create({ provider: 'selfhosted_push', url: ntfy.url, auth_enabled: true, auth_method: 'token', auth_token: 'tok' });
    await t.ctx.db.notificationServer.update({ where: { id: token.id }, data: { auth_token: await t.ctx.secretBox.encrypt('tok€') } });
    const legacy = await create({ provider: 'cloud_push', fcm_server_key: 'key' });
    await t.ctx.db.notificationServer.update({ where: { id: legacy.id }, data: { fcm_server_key: await t.ctx.secretBox.encrypt('key€') } });
    const calls = ntfy.calls.length + fcm.calls.length;
    for (const [id, name] of [
      [token.id, 'send_notification'],
      [legacy.id, 'test_connection'],
    ] as const) {
      const res = await act(id, name, name === 'send_notification' ? { title: 'T', message: 'M' } : undefined);
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json().error).toMatchObject({
        code: 'user_error',
        message: expect.stringMatching(/authorization header.*characters an HTTP header cannot carry/),
      });
      expect(res.body).not.toMatch(/tok€|key€/);
    }
    expect(ntfy.calls.length + fcm.calls.length).toBe(calls);
  });
});

describe('one default per company (a database constraint)', () => {
  it('a second default in the same company is 409; other companies and non-defaults are free', async () => {
    await t.ctx.db.notificationServer.updateMany({ data: { is_default: null } });
    const first = await create({ provider: 'selfhosted_push', url: 'http://a', is_default: true });
    expect(first.is_default).toBe(true);
    const second = await post({ provider: 'selfhosted_push', url: 'http://b', is_default: true });
    expect(second.statusCode).toBe(409);
    expect(second.json().error).toMatchObject({
      code: 'conflict',
      message: 'Company 1 already has a default notification server',
      details: { fields: [{ field: 'is_default' }], existing_id: first.id },
    });

    const plain = await create({ provider: 'selfhosted_push', url: 'http://c', is_default: false });
    expect(plain.is_default).toBe(false);
    expect((await patch(plain.id, { is_default: true })).statusCode).toBe(409);

    const other = await t.ctx.db.company.create({ data: { name: 'Other company' } });
    const otherDefault = await create({ provider: 'selfhosted_push', url: 'http://d', is_default: true, company_id: other.id });
    expect(otherDefault).toMatchObject({ company_id: other.id, is_default: true });

    // Moving the default: unset the first, then set the other.
    expect((await patch(first.id, { is_default: false })).json().is_default).toBe(false);
    expect((await patch(plain.id, { is_default: true })).json().is_default).toBe(true);
    // The rule is the database's own: a raw second default is refused there too.
    await expect(
      t.ctx.db
        .$executeRaw`INSERT INTO notification_servers (provider, url, is_default, company_id, updated_at) VALUES ('selfhosted_push', 'http://e', true, 1, now())`,
    ).rejects.toThrow(/notification_servers_company_id_is_default_key/);
  });
});

describe('secrets', () => {
  it('are encrypted at rest and write-only', async () => {
    const sa = serviceAccount('secrets');
    const server = await create({
      provider: 'cloud_push',
      fcm_project_id: 'test-project',
      fcm_server_key: 'server-key-zz',
      fcm_service_account_json: sa.json,
      username: 'u',
      password: 'admin-pw-zz',
      auth_token: 'auth-token-zz',
    });
    expect(server).toMatchObject({
      password_set: true,
      auth_token_set: true,
      fcm_server_key_set: true,
      fcm_service_account_json_set: true,
    });
    const out = JSON.stringify([
      server,
      (await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/notification-servers/${server.id}` })).json(),
    ]);
    for (const secret of ['server-key-zz', 'admin-pw-zz', 'auth-token-zz', 'PRIVATE KEY']) expect(out).not.toContain(secret);
    const [raw] = await t.ctx.db.$queryRaw<Record<string, string>[]>`
      SELECT password, auth_token, fcm_server_key, fcm_service_account_json FROM notification_servers WHERE id = ${server.id}`;
    for (const value of Object.values(raw!)) expect(value).toMatch(/^v\d+:[A-Za-z0-9+/=]+$/);
    expect(await t.ctx.secretBox.decrypt(raw!.fcm_service_account_json!)).toBe(sa.json);
  });

  it('users read, operators write', async () => {
    const res = await request(t.app, t.as.user, {
      method: 'POST',
      url: '/api/v1/notification-servers',
      payload: { provider: 'cloud_push', fcm_project_id: 'p' },
    });
    expect(res.statusCode).toBe(403);
  });
});

describe('self-hosted push (ntfy)', () => {
  it('test_connection checks /v1/health; a closed port is a clear 400', async () => {
    const server = await create({ provider: 'selfhosted_push', url: ntfy.url });
    const res = await act(server.id, 'test_connection');
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ ok: true, provider: 'selfhosted_push', api: 'ntfy' });
    expect(ntfy.callsTo('/v1/health').length).toBeGreaterThan(0);

    const down = await create({ provider: 'selfhosted_push', url: `http://127.0.0.1:${await freePort()}` });
    const failed = await act(down.id, 'test_connection');
    expect(failed.statusCode).toBe(400);
    expect(failed.json().error).toMatchObject({ code: 'user_error', message: expect.stringMatching(/\/v1\/health: connection refused$/) });
  });

  it('test_admin_credentials uses Basic auth on /v1/account; wrong credentials are refused', async () => {
    const server = await create({ provider: 'selfhosted_push', url: ntfy.url, username: ADMIN.username, password: ADMIN.password });
    const res = await act(server.id, 'test_admin_credentials');
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ ok: true, username: 'admin', role: 'admin' });
    expect(ntfy.callsTo('/v1/account').at(-1)!.headers.authorization).toBe(basic(ADMIN.username, ADMIN.password));

    await patch(server.id, { password: 'wrong-password' });
    const refused = await act(server.id, 'test_admin_credentials');
    expect(refused.statusCode).toBe(400);
    expect(refused.json().error.message).toMatch(/refused the credentials: GET .*\/v1\/account answered HTTP 401: .*unauthorized/);

    const noCreds = await create({ provider: 'selfhosted_push', url: ntfy.url });
    expect((await act(noCreds.id, 'test_admin_credentials')).json().error.message).toBe('Set the admin username and password first');
    const cloud = await create({ provider: 'cloud_push', fcm_project_id: 'p' });
    expect((await act(cloud.id, 'test_admin_credentials')).json().error.message).toBe(
      'This operation is for the self-hosted push provider',
    );
  });

  it('send_notification publishes JSON with no auth, Basic auth or Bearer auth as configured', async () => {
    const open = await create({ provider: 'selfhosted_push', url: ntfy.url });
    const withPassword = await create({
      provider: 'selfhosted_push',
      url: ntfy.url,
      auth_enabled: true,
      auth_method: 'password',
      ...ADMIN,
    });
    const withToken = await create({
      provider: 'selfhosted_push',
      url: ntfy.url,
      auth_enabled: true,
      auth_method: 'token',
      auth_token: STATIC_TOKEN,
    });
    const expected: [number, string | undefined][] = [
      [open.id, undefined],
      [withPassword.id, basic(ADMIN.username, ADMIN.password)],
      [withToken.id, `Bearer ${STATIC_TOKEN}`],
    ];
    for (const [id, authorization] of expected) {
      const res = await act(id, 'send_notification', { title: 'Backup done', message: 'db_1 backed up' });
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json()).toMatchObject({ provider: 'selfhosted_push', api: 'ntfy', id: expect.any(String) });
      const call = ntfy.callsTo('/').at(-1)!;
      expect(call.method).toBe('POST');
      expect(call.headers.authorization).toBe(authorization);
      expect(JSON.parse(call.body)).toEqual({ topic: 'svc', title: 'Backup done', message: 'db_1 backed up', priority: 3 });
    }
    await act(withToken.id, 'send_notification', { title: 'T', message: 'M', topic: 'ops-alerts', priority: 5 });
    expect(JSON.parse(ntfy.callsTo('/').at(-1)!.body)).toMatchObject({ topic: 'ops-alerts', priority: 5 });

    await patch(withToken.id, { auth_token: 'tk_revoked' });
    const refused = await act(withToken.id, 'send_notification', { title: 'T', message: 'M' });
    expect(refused.statusCode).toBe(400);
    expect(refused.json().error.message).toMatch(/refused the credentials/);
    const badBody = await act(open.id, 'send_notification', { title: 'T', message: 'M', topic: 'no spaces allowed' });
    expect(badBody.statusCode).toBe(400);
  });
});

describe('cloud push (FCM)', () => {
  const v1Sends = () => fcm.calls.filter((c) => c.path.endsWith('/messages:send'));

  it('HTTP v1: JWT verified by the token endpoint, access token cached, legacy key unused', async () => {
    const sa = serviceAccount('cached');
    const server = await create({
      provider: 'cloud_push',
      fcm_project_id: 'proj-a',
      fcm_service_account_json: sa.json,
      fcm_server_key: LEGACY_KEY,
    });
    const tokenCalls = () => fcm.callsTo('/token').length;
    const before = tokenCalls();

    const first = await act(server.id, 'send_notification', {
      title: 'Hi',
      message: 'to a device',
      token: 'device-reg-token-1',
      priority: 5,
    });
    expect(first.statusCode, first.body).toBe(200);
    expect(first.json()).toMatchObject({ provider: 'cloud_push', api: 'v1', id: expect.stringMatching(/^projects\/proj-a\/messages\//) });
    const second = await act(server.id, 'send_notification', { title: 'Hi', message: 'to the topic' });
    expect(second.statusCode).toBe(200);
    expect(tokenCalls()).toBe(before + 1); // the second send reused the cached token

    const [a, b] = v1Sends().slice(-2);
    expect(a!.path).toBe('/v1/projects/proj-a/messages:send');
    expect(a!.headers.authorization).toBe(`Bearer ${issuedAccessTokens.at(-1)}`);
    expect(JSON.parse(a!.body)).toEqual({
      message: { token: 'device-reg-token-1', notification: { title: 'Hi', body: 'to a device' }, android: { priority: 'HIGH' } },
    });
    expect(JSON.parse(b!.body)).toEqual({
      message: { topic: 'svc', notification: { title: 'Hi', body: 'to the topic' }, android: { priority: 'NORMAL' } },
    });
    expect(fcm.callsTo('/fcm/send')).toHaveLength(0);

    const tokenRequest = fcm.callsTo('/token').at(-1)!;
    expect(tokenRequest.headers['content-type']).toBe('application/x-www-form-urlencoded');
    const claims = JSON.parse(Buffer.from(assertions.at(-1)!.split('.')[1]!, 'base64url').toString());
    expect(claims).toMatchObject({ iss: 'cached@test-project.iam.gserviceaccount.com', aud: `${fcm.url}/token` });
  });

  it('a token that expires within the safety minute is not reused', async () => {
    const sa = serviceAccount('short-lived', { expiresIn: 30 });
    const server = await create({ provider: 'cloud_push', fcm_service_account_json: sa.json }); // project from the JSON
    const before = fcm.callsTo('/token').length;
    for (let i = 0; i < 2; i++) expect((await act(server.id, 'send_notification', { title: 'T', message: 'M' })).statusCode).toBe(200);
    expect(fcm.callsTo('/token').length).toBe(before + 2);
    expect(v1Sends().at(-1)!.path).toBe('/v1/projects/test-project/messages:send');
  });

  it('test_connection sends a validate_only message; a JWT the token endpoint cannot verify is a 400', async () => {
    const good = await create({ provider: 'cloud_push', fcm_project_id: 'proj-b', fcm_service_account_json: serviceAccount('probe').json });
    const res = await act(good.id, 'test_connection');
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toEqual({ ok: true, provider: 'cloud_push', api: 'v1' });
    expect(JSON.parse(v1Sends().at(-1)!.body)).toMatchObject({ validate_only: true, message: { topic: 'svc-connection-test' } });

    const stranger = await create({
      provider: 'cloud_push',
      fcm_project_id: 'proj-b',
      fcm_service_account_json: serviceAccount('stranger', { known: false }).json,
    });
    const refused = await act(stranger.id, 'test_connection');
    expect(refused.statusCode).toBe(400);
    expect(refused.json().error).toMatchObject({
      code: 'user_error',
      message: expect.stringMatching(/OAuth2 token.*answered HTTP 400: .*invalid_grant/),
    });

    const noCreds = await create({ provider: 'cloud_push', fcm_project_id: 'proj-b' });
    expect((await act(noCreds.id, 'test_connection')).json().error.message).toMatch(/No cloud push credentials/);
  });

  it('legacy server key only without a service account: dry_run test, topic and token sends, refusal', async () => {
    const server = await create({ provider: 'cloud_push', fcm_server_key: LEGACY_KEY });
    const tokenCalls = fcm.callsTo('/token').length;
    expect((await act(server.id, 'test_connection')).json()).toEqual({ ok: true, provider: 'cloud_push', api: 'legacy' });
    expect(JSON.parse(fcm.callsTo('/fcm/send').at(-1)!.body)).toMatchObject({ dry_run: true, to: '/topics/svc-connection-test' });

    const topic = await act(server.id, 'send_notification', { title: 'T', message: 'M', topic: 'news' });
    expect(topic.json()).toEqual({ provider: 'cloud_push', api: 'legacy', id: '5551234' });
    const device = await act(server.id, 'send_notification', { title: 'T', message: 'M', token: 'dev-2' });
    expect(device.json()).toEqual({ provider: 'cloud_push', api: 'legacy', id: '0:1234' });
    const call = fcm.callsTo('/fcm/send').at(-1)!;
    expect(call.headers.authorization).toBe(`key=${LEGACY_KEY}`);
    expect(JSON.parse(call.body)).toEqual({ to: 'dev-2', notification: { title: 'T', body: 'M' }, priority: 'normal' });
    expect(fcm.callsTo('/token').length).toBe(tokenCalls);

    await patch(server.id, { fcm_server_key: 'wrong-legacy-key' });
    const refused = await act(server.id, 'send_notification', { title: 'T', message: 'M' });
    expect(refused.statusCode).toBe(400);
    expect(refused.json().error.message).toMatch(/refused the credentials: POST .*\/fcm\/send answered HTTP 401/);
  });
});

describe('per-user tokens (auto_generate_tokens)', () => {
  it('saving such a server queues a job that gives every active user a token valid token_expiry_days', async () => {
    const activeUsers = await t.ctx.db.user.findMany({ where: { active: true }, orderBy: { id: 'asc' } });
    const before = ntfy.callsTo('/v1/account/token').length;
    const server = await create({
      provider: 'selfhosted_push',
      url: ntfy.url,
      auto_generate_tokens: true,
      token_expiry_days: 30,
      ...ADMIN,
    });
    const jobs = await t.ctx.queues.queue('notifications').getJobs(['waiting', 'active', 'completed', 'failed']);
    const job = jobs.find((j) => j.data.notification_server_id === server.id)!;
    expect(job).toBeDefined();
    const done = await waitForJob(t.app, t.as.operator, `notifications-${job.id}`);
    expect(done, JSON.stringify(done)).toMatchObject({
      state: 'completed',
      result: { users: activeUsers.length, created: activeUsers.length, renewed: 0, kept: 0 },
    });

    const calls = ntfy.callsTo('/v1/account/token').slice(before);
    expect(calls).toHaveLength(activeUsers.length);
    const tokens = await t.ctx.db.notificationUserToken.findMany({
      where: { notification_server_id: server.id },
      orderBy: { user_id: 'asc' },
    });
    expect(tokens.map((t) => t.user_id)).toEqual(activeUsers.map((u) => u.id));
    for (const [i, call] of calls.entries()) {
      expect(call.headers.authorization).toBe(basic(ADMIN.username, ADMIN.password));
      const body = JSON.parse(call.body);
      expect(body.label).toBe(`svc user ${activeUsers[i]!.email}`);
      expect(body.expires).toBe(Math.floor(tokens[i]!.expires_at.getTime() / 1000));
      const days = (tokens[i]!.expires_at.getTime() - tokens[i]!.created_at.getTime()) / 86_400_000;
      expect(Math.round(days)).toBe(30);
      expect(tokens[i]!.token).toMatch(/^v\d+:/);
      expect(issuedNtfyTokens).toContain(await t.ctx.secretBox.decrypt(tokens[i]!.token));
    }
    const listed = (
      await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/notification-servers/${server.id}/user-tokens` })
    ).json();
    expect(listed.items).toHaveLength(activeUsers.length);
    expect(JSON.stringify(listed)).not.toMatch(/tk_user_/);

    // Run again: valid tokens are kept; one close to expiry is renewed.
    await t.ctx.db.notificationUserToken.update({
      where: { notification_server_id_user_id: { notification_server_id: server.id, user_id: activeUsers[0]!.id } },
      data: { expires_at: new Date(Date.now() + 3600_000) },
    });
    const again = await act(server.id, 'generate_user_tokens');
    expect(again.statusCode).toBe(202);
    const second = await waitForJob(t.app, t.as.operator, again.json().job_id);
    expect(second.result).toEqual({ users: activeUsers.length, created: 0, renewed: 1, kept: activeUsers.length - 1 });
    const messages = (await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/notification-servers/${server.id}/messages` })).json();
    expect(messages.items[0].body).toBe(
      `User tokens: 0 created, 1 renewed, ${activeUsers.length - 1} still valid, of ${activeUsers.length} active users.`,
    );
  });

  it('wrong admin credentials fail the job visibly; servers without the option refuse the action', async () => {
    const server = await create({
      provider: 'selfhosted_push',
      url: ntfy.url,
      auto_generate_tokens: true,
      username: 'admin',
      password: 'not-it',
    });
    const res = await act(server.id, 'generate_user_tokens');
    const job = await waitForJob(t.app, t.as.operator, res.json().job_id);
    expect(job.state).toBe('failed');
    expect(job.error).toMatch(/^User tokens: 0 created.*Stopped: The push server refused the credentials/);
    const message = await t.ctx.db.message.findFirst({
      where: { model_name: 'svc.ntfy.server', rec_id: server.id },
      orderBy: { id: 'desc' },
    });
    expect(message!.body).toBe(job.error);

    const off = await create({ provider: 'selfhosted_push', url: ntfy.url });
    expect((await act(off.id, 'generate_user_tokens')).json().error.message).toBe('auto_generate_tokens is off for this server');
  });
});

describe('action log', () => {
  it('has an api_call row per outbound call, none holding a secret', async () => {
    const logs = await t.ctx.db.actionLog.findMany({ where: { model_name: 'svc.ntfy.server' } });
    expect(logs.length).toBeGreaterThan(20);
    expect(logs.every((l) => l.action_type === 'api_call')).toBe(true);
    const text = JSON.stringify(logs);
    const secrets = [
      ADMIN.password,
      STATIC_TOKEN,
      LEGACY_KEY,
      'wrong-legacy-key',
      'tk_revoked',
      ...issuedNtfyTokens,
      ...issuedAccessTokens,
      ...assertions,
    ];
    for (const secret of secrets) expect(text).not.toContain(secret);
    expect(text).not.toContain('PRIVATE KEY');
    expect(text).toContain('authorization: [redacted]');
    // Nor do the service's own log lines (requests carried several of them in their bodies).
    const serviceLog = t.ctx.logText();
    for (const secret of [...secrets, 'PRIVATE KEY']) expect(serviceLog).not.toContain(secret);
  });
});
