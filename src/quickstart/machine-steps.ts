// The machine as svc's first root server and its PostgreSQL server, through the API: each found by
// its address, checked, and made or put right only where it is not right.
import type { ApiSession } from './api-session.js';
import type { MachineKey } from './machine-key.js';
import type { QuickstartOptions } from './quickstart-options.js';
import { QuickstartError } from './quickstart-errors.js';

type Row = Record<string, unknown> & { id: number };
type Print = (line: string) => void;

const ROOT_SERVER_NAME = 'this machine';

/** The root server on this machine's sshd, logged in with svc's key; confirmed (which records the host key). */
export async function convergeRootServer(api: ApiSession, o: QuickstartOptions, key: MachineKey, print: Print): Promise<Row> {
  const list = await api.call<{ items: Row[] }>('GET', `/api/v1/root-servers?ip=${encodeURIComponent(o.ssh.host)}&limit=100`);
  const login = { username: o.ssh.user, sudo_user: o.ssh.user !== 'root', sudo_user_no_password: o.ssh.user !== 'root' };
  let server = list.items.find((s) => s.port === o.ssh.port && s.username === o.ssh.user && s.state !== 'cancel');
  if (!server) {
    server = await api.call<Row>('POST', '/api/v1/root-servers', {
      name: ROOT_SERVER_NAME,
      ip: o.ssh.host,
      port: o.ssh.port,
      ...login,
      key: key.privateKey,
    });
    print(`root server ${server.id} (${o.ssh.user}@${o.ssh.host}:${o.ssh.port}): created with svc's key`);
  } else {
    const wrong = Object.entries(login).filter(([k, v]) => server![k] !== v);
    if (wrong.length > 0 || server.key_set !== true) {
      server = await api.call<Row>('PATCH', `/api/v1/root-servers/${server.id}`, { ...Object.fromEntries(wrong), key: key.privateKey });
      print(`root server ${server.id}: login put right (${[...wrong.map(([k]) => k), 'key'].join(', ')})`);
    }
  }
  if (server.state !== 'confirmed') {
    server = await api.call<Row>('POST', `/api/v1/root-servers/${server.id}/actions/confirm`);
    print(`root server ${server.id}: confirmed over SSH, host key ${server.host_key} recorded`);
  } else {
    print(`root server ${server.id}: already confirmed (host key ${server.host_key})`);
  }
  if (!server.host_key) throw new QuickstartError(`root server ${server.id} has no recorded host key after confirm`);
  return server;
}

/** The PostgreSQL server of DATABASE_URL (Odoo's databases live there). */
export async function convergePostgresServer(api: ApiSession, databaseUrl: string, print: Print): Promise<Row> {
  const url = new URL(databaseUrl);
  const want = {
    ip: url.hostname,
    port: Number(url.port || 5432),
    username: decodeURIComponent(url.username) || 'postgres',
  };
  const password = url.password ? decodeURIComponent(url.password) : null;
  const list = await api.call<{ items: Row[] }>('GET', '/api/v1/postgresql-servers?limit=100');
  let server = list.items.find((s) => s.ip === want.ip && s.port === want.port);
  if (!server) {
    server = await api.call<Row>('POST', '/api/v1/postgresql-servers', { name: 'local', ...want, ...(password ? { password } : {}) });
    print(`PostgreSQL server ${server.id} (${want.username}@${want.ip}:${want.port}): created`);
  } else if (server.username !== want.username || (password !== null && server.password_set !== true)) {
    server = await api.call<Row>('PATCH', `/api/v1/postgresql-servers/${server.id}`, {
      username: want.username,
      ...(password ? { password } : {}),
    });
    print(`PostgreSQL server ${server.id}: login put right`);
  } else {
    print(`PostgreSQL server ${server.id} (${want.username}@${want.ip}:${want.port}): already there`);
  }
  return server;
}
