// A stored secret is bound to where it is sent: it is never sent to another host. The attacker is an operator: they
// retarget each kind of record (root, PostgreSQL, backup and notification server) to a server of
// their own on loopback and run the record's operations; the stand-ins record everything they
// receive, and none of it may hold a stored secret. Real parts: PostgreSQL, Redis, a BullMQ
// worker, a real OpenSSH server for the legitimate host; the attacker's servers are an SSH server
// (ssh2's own server, recording every authentication attempt), a PostgreSQL wire-protocol server
// that asks for the password in clear text, and HTTP servers recording every request.
import { generateKeyPairSync } from 'node:crypto';
import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import ssh2 from 'ssh2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { confirmedRootServer, postAction, request, waitForJob, type Caller } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';
import { sendJson, startRecordingServer, type RecordingServer } from './helpers/http-recorder.js';
import { passwordLogin, useSshd, TEST_USERS } from './helpers/sshd.js';

const sshd = useSshd();

const t = useTestApp({ workers: true });

/** An SSH server of the attacker's: records every authentication attempt, accepts none. */
async function attackerSshServer() {
  const attempts: string[] = [];
  const hostKey = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    privateKeyEncoding: { type: 'pkcs1', format: 'pem' },
    publicKeyEncoding: { type: 'spki', format: 'pem' },
  }).privateKey;
  const server = new ssh2.Server({ hostKeys: [hostKey] }, (client) => {
    client.on('authentication', (auth) => {
      attempts.push(
        JSON.stringify({
          method: auth.method,
          user: auth.username,
          ...('password' in auth ? { password: auth.password } : {}),
          ...('key' in auth ? { key: auth.key.data.toString('base64') } : {}),
        }),
      );
      auth.reject(['password', 'publickey']);
    });
    client.on('error', () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as AddressInfo).port, attempts, close: () => new Promise<void>((r) => server.close(() => r())) };
}

/** A PostgreSQL server of the attacker's: refuses TLS, asks for the password in clear text, records what comes. */
async function attackerPgServer() {
  const received: Buffer[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('data', (data) => {
      received.push(data);
      if (data.length === 8 && data.readInt32BE(4) === 80877103) return void socket.write('N'); // SSLRequest: no TLS
      if (data[0] === 0x70) return void socket.end(); // 'p': the password message, recorded
      const auth = Buffer.alloc(9);
      auth.write('R', 0);
      auth.writeInt32BE(8, 1);
      auth.writeInt32BE(3, 5); // AuthenticationCleartextPassword
      socket.write(auth);
    });
    socket.on('error', () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    received: () => Buffer.concat(received).toString('latin1'),
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

const api = (caller: Caller, method: 'GET' | 'POST' | 'PATCH', url: string, payload?: object) =>
  request(t.app, caller, { method, url, payload });

describe('root servers', () => {
  it('moving ip, port or username clears password, key and code editor password; run_cmd sends nothing to the new host', async () => {
    const attacker = await attackerSshServer();
    try {
      const password = TEST_USERS.password.password;
      const editor = 'Editor-pw-4411aa';
      const { id } = await confirmedRootServer(t.app, t.as.operator, sshd, {
        ...passwordLogin(),
        key: sshd.keys.ed25519Openssh,
        code_server_password: editor,
      });

      const moved = await api(t.as.operator, 'PATCH', `/api/v1/root-servers/${id}`, { port: attacker.port });
      expect(moved.statusCode).toBe(200);
      expect(moved.json()).toMatchObject({
        port: attacker.port,
        password_set: false,
        key_set: false,
        code_server_password_set: false,
        host_key: null,
      });

      const job = await postAction(t.app, t.as.operator, 'root-servers', id, 'run_cmd', { cmd: 'id' });
      expect(job.statusCode).toBe(202);
      const done = await waitForJob(t.app, t.as.operator, job.json().job_id);
      expect(done.state).toBe('failed');
      expect(done.error).toMatch(/Neither a password nor a private key/);

      // Username and ip move the credentials' destination just the same.
      for (const patch of [{ username: 'someone_else' }, { ip: 'localhost' }]) {
        await t.ctx.db.rootServer.update({ where: { id }, data: { password: await t.ctx.secretBox.encrypt(password) } });
        expect((await api(t.as.operator, 'PATCH', `/api/v1/root-servers/${id}`, patch)).json().password_set).toBe(false);
      }
      const seen = attacker.attempts.join('\n');
      for (const secret of [password, editor, 'PRIVATE KEY']) expect(seen).not.toContain(secret);
      const logs = JSON.stringify(await t.ctx.db.actionLog.findMany({ where: { rec_id: id } }));
      expect(logs).not.toContain(password);
    } finally {
      await attacker.close();
    }
  });

  it('credentials set again in the same request are kept and go to the new host; other fields keep the secrets', async () => {
    const created = await api(t.as.operator, 'POST', '/api/v1/root-servers', {
      ip: '10.0.0.1',
      password: 'old-pass-1',
      code_server_password: 'old-editor-pw',
    });
    const id = created.json().id;
    const renamed = await api(t.as.operator, 'PATCH', `/api/v1/root-servers/${id}`, { name: 'web 1', sudo_user: false, port: 22 });
    expect(renamed.json()).toMatchObject({ name: 'web 1', password_set: true, code_server_password_set: true });
    const moved = await api(t.as.operator, 'PATCH', `/api/v1/root-servers/${id}`, {
      ip: sshd.host,
      port: sshd.port,
      username: TEST_USERS.password.name,
      password: TEST_USERS.password.password,
    });
    expect(moved.json()).toMatchObject({ password_set: true, code_server_password_set: false });
    expect((await postAction(t.app, t.as.operator, 'root-servers', id, 'confirm')).statusCode).toBe(200);
  });
});

describe('PostgreSQL servers', () => {
  it('moving ip, port or username clears the password; test_connection sends none to the new host', async () => {
    const attacker = await attackerPgServer();
    try {
      const password = 'pg-secret-77c1';
      const id = (
        await api(t.as.operator, 'POST', '/api/v1/postgresql-servers', { ip: '127.0.0.1', port: 5432, username: 'postgres', password })
      ).json().id;
      const moved = await api(t.as.operator, 'PATCH', `/api/v1/postgresql-servers/${id}`, { port: attacker.port });
      expect(moved.json()).toMatchObject({ port: attacker.port, password_set: false });
      const tested = await postAction(t.app, t.as.operator, 'postgresql-servers', id, 'test_connection');
      expect(tested.statusCode).toBe(400);
      expect(attacker.received()).toContain('postgres'); // the attacker's server was reached...
      expect(attacker.received()).not.toContain(password); // ...and got no password
      const kept = await api(t.as.operator, 'PATCH', `/api/v1/postgresql-servers/${id}`, { name: 'renamed' });
      expect(kept.json().password_set).toBe(false);
      const reset = await api(t.as.operator, 'PATCH', `/api/v1/postgresql-servers/${id}`, { port: 5432, password: 'given-again' });
      expect(reset.json().password_set).toBe(true);
    } finally {
      await attacker.close();
    }
  });
});

describe('database templates', () => {
  it("moving their PostgreSQL server's ip or port clears the owner role's password, which would be sent there", async () => {
    const server = (
      await api(t.as.operator, 'POST', '/api/v1/postgresql-servers', { ip: '127.0.0.1', port: 5432, username: 'postgres' })
    ).json();
    const created = await api(t.as.operator, 'POST', '/api/v1/database-templates', {
      name: 'bound',
      postgresql_server_id: server.id,
      template_db_name: 'bound_tpl',
      owner_role: 'odoo',
      owner_password: 'owner-secret-5d1',
    });
    expect(created.json()).toMatchObject({ owner_password_set: true });
    const renamed = await api(t.as.operator, 'PATCH', `/api/v1/postgresql-servers/${server.id}`, { name: 'renamed' });
    expect(renamed.statusCode).toBe(200);
    const template = () => api(t.as.user, 'GET', `/api/v1/database-templates/${created.json().id}`).then((r) => r.json());
    expect(await template()).toMatchObject({ owner_password_set: true });
    const moved = await api(t.as.operator, 'PATCH', `/api/v1/postgresql-servers/${server.id}`, { port: 6543 });
    expect(moved.statusCode, moved.body).toBe(200);
    expect(await template()).toMatchObject({ owner_role: 'odoo', owner_password_set: false });
  });
});

describe('Odoo hosts', () => {
  it("moving their PostgreSQL server's ip or port clears the host role's password, which would be sent there", async () => {
    const server = (
      await api(t.as.operator, 'POST', '/api/v1/postgresql-servers', { ip: '127.0.0.1', port: 5432, username: 'postgres' })
    ).json();
    const host = await t.ctx.db.rootServer.create({
      data: {
        ip: '127.0.0.1',
        odoo_postgresql_server_id: server.id,
        odoo_db_user: 'odoo_host',
        odoo_db_password: await t.ctx.secretBox.encrypt('host-role-secret-9e2'),
      },
    });
    const password = async () => (await t.ctx.db.rootServer.findUniqueOrThrow({ where: { id: host.id } })).odoo_db_password;
    expect((await api(t.as.operator, 'PATCH', `/api/v1/postgresql-servers/${server.id}`, { name: 'renamed' })).statusCode).toBe(200);
    expect(await password()).not.toBeNull();
    const moved = await api(t.as.operator, 'PATCH', `/api/v1/postgresql-servers/${server.id}`, { ip: '127.0.0.2' });
    expect(moved.statusCode, moved.body).toBe(200);
    expect(await password()).toBeNull();
  });
});

describe('backup servers', () => {
  let legit: RecordingServer;
  let attacker: RecordingServer;
  beforeAll(async () => {
    legit = await startRecordingServer((_req, res) => sendJson(res, 200, []));
    attacker = await startRecordingServer((_req, res) => sendJson(res, 200, []));
  });
  afterAll(async () => {
    await legit.close();
    await attacker.close();
  });

  it('moving url clears the API key; test_connection and sync_cloud_accounts send nothing to the new host', async () => {
    const apiKey = 'backup-key-5f0e2d';
    const id = (
      await api(t.as.operator, 'POST', '/api/v1/backup-servers', { url: legit.url, download_url: legit.url, api_key: apiKey })
    ).json().id;
    expect((await postAction(t.app, t.as.operator, 'backup-servers', id, 'test_connection')).statusCode).toBe(200);
    expect(legit.calls.at(-1)!.headers['x-api-key']).toBe(apiKey);

    const moved = await api(t.as.operator, 'PATCH', `/api/v1/backup-servers/${id}`, { url: attacker.url });
    expect(moved.json()).toMatchObject({ url: attacker.url, api_key_set: false });
    for (const action of ['test_connection', 'sync_cloud_accounts']) {
      const res = await postAction(t.app, t.as.operator, 'backup-servers', id, action);
      expect(res.statusCode).toBe(400);
      expect(res.json().error.message).toMatch(/no api_key/);
    }
    expect(attacker.calls).toEqual([]);
    // A path change is no move (it is appended to the same host).
    const again = await api(t.as.operator, 'PATCH', `/api/v1/backup-servers/${id}`, { url: legit.url, api_key: apiKey });
    expect(again.json().api_key_set).toBe(true);
    expect(
      (await api(t.as.operator, 'PATCH', `/api/v1/backup-servers/${id}`, { backup_db_path: '/other/backup' })).json().api_key_set,
    ).toBe(true);
  });
});

describe('notification servers', () => {
  let attacker: RecordingServer;
  beforeAll(async () => {
    attacker = await startRecordingServer((_req, res) => sendJson(res, 200, { username: 'admin', role: 'admin' }));
  });
  afterAll(() => attacker.close());

  it('moving url or provider clears the secrets; test_admin_credentials sends nothing to the new host', async () => {
    const password = 'ntfy-admin-9d8c';
    const created = await api(t.as.operator, 'POST', '/api/v1/notification-servers', {
      provider: 'selfhosted_push',
      url: 'http://ntfy.invalid',
      username: 'admin',
      password,
      auth_token: 'tk_abc',
    });
    expect(created.statusCode).toBe(201);
    const id = created.json().id;
    const moved = await api(t.as.operator, 'PATCH', `/api/v1/notification-servers/${id}`, { url: attacker.url });
    expect(moved.json()).toMatchObject({ url: attacker.url, password_set: false, auth_token_set: false });
    const res = await postAction(t.app, t.as.operator, 'notification-servers', id, 'test_admin_credentials');
    expect(res.statusCode).toBe(400);
    expect(JSON.stringify(attacker.calls)).not.toContain(Buffer.from(`admin:${password}`).toString('base64'));
    expect(attacker.calls).toEqual([]);
  });

  it('a server whose authentication needs the password refuses a url change without it, and changes nothing', async () => {
    const password = 'ntfy-pub-31f0';
    const id = (
      await api(t.as.operator, 'POST', '/api/v1/notification-servers', {
        provider: 'selfhosted_push',
        url: 'http://ntfy.invalid',
        auth_enabled: true,
        auth_method: 'password',
        username: 'pub',
        password,
      })
    ).json().id;
    const refused = await api(t.as.operator, 'PATCH', `/api/v1/notification-servers/${id}`, { url: attacker.url });
    expect(refused.statusCode).toBe(400);
    expect(refused.json().error.message).toMatch(/changing url clears the stored secrets/);
    expect((await api(t.as.operator, 'GET', `/api/v1/notification-servers/${id}`)).json()).toMatchObject({
      url: 'http://ntfy.invalid',
      password_set: true,
    });
    const withPassword = await api(t.as.operator, 'PATCH', `/api/v1/notification-servers/${id}`, {
      url: attacker.url,
      password: 'new-one-for-new-host',
    });
    expect(withPassword.json()).toMatchObject({ url: attacker.url, password_set: true });
    const toCloud = await api(t.as.operator, 'PATCH', `/api/v1/notification-servers/${id}`, {
      provider: 'cloud_push',
      auth_enabled: false,
      fcm_project_id: 'p1',
    });
    expect(toCloud.json()).toMatchObject({ provider: 'cloud_push', password_set: false });
  });
});
