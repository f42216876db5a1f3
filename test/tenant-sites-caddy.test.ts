// The tenants' own addresses on a real Caddy: setup_proxy (run over a real sshd as root through
// sudo, Debian's Caddy) writes SUBSCRIPTION_URL's host pattern as a site. Plain HTTP for
// *.localhost: a request to <db>.localhost reaches the stand-in Odoo naming that database (whatever
// the client sent), /websocket its evented port; an https:// pattern is served with on-demand TLS,
// Caddy asking svc (listening on loopback, BASE_URL) before Pebble issues anything: a live tenant
// gets a certificate, a name nobody sells none. Holds the machine's Caddy (helpers/acme.ts).
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { request as httpRequest, createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { confirmedRootServer, request, waitForJob } from './helpers/api.js';
import { useTestApp, withConfig } from './helpers/app.js';
import { startAcmeLab, takeCaddyMachine, type AcmeLab, type CaddyMachine } from './helpers/acme.js';
import { freePort, startSshd, TEST_USERS, type Sshd } from './helpers/sshd.js';

const RUN = randomBytes(3).toString('hex');
const TLS_DOMAIN = `t${RUN}.test`;

interface StandIn {
  port: number;
  seen: { path: string; headers: IncomingHttpHeaders }[];
  server: Server;
}

function listen(port: number, name: string): Promise<StandIn> {
  const seen: StandIn['seen'] = [];
  const server = createServer((req, res) => {
    seen.push({ path: req.url ?? '', headers: req.headers });
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end(`${name}: ${req.headers['x-odoo-database'] ?? '-'}`);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve({ port, seen, server }));
  });
}

let machine: CaddyMachine;
let lab: AcmeLab;
let sshd: Sshd;
let odoo: StandIn;
let evented: StandIn;
let svcPort: number;

beforeAll(async () => {
  machine = await takeCaddyMachine();
  lab = await startAcmeLab();
  sshd = await startSshd();
  // Odoo's HTTP port and its evented port 3 above, both free.
  for (;;) {
    const port = await freePort();
    try {
      evented = await listen(port + 3, 'evented');
    } catch {
      continue;
    }
    odoo = await listen(port, 'http');
    break;
  }
  svcPort = await freePort();
});
afterAll(async () => {
  await machine?.release();
  await lab?.stop();
  await sshd?.stop();
  for (const s of [odoo, evented]) await new Promise((r) => s?.server.close(r));
});

const t = useTestApp({
  workers: true,
  env: () => ({
    BASE_URL: `http://127.0.0.1:${svcPort}`,
    ACME_CA_URL: lab.directory,
    ACME_CA_ROOT_PEM: lab.listenerRootFile,
    ODOO_HTTP_PORT: String(odoo.port),
    SUBSCRIPTION_URL: 'http://{database_name}.localhost',
    STAGING_URL: 'http://{database_name}.staging.localhost',
  }),
});

let rootServerId: number;
beforeAll(async () => {
  await t.app.listen({ port: svcPort, host: '127.0.0.1' });
  const root = await confirmedRootServer(t.app, t.as.operator, sshd, {
    username: TEST_USERS.sudoNoPassword.name,
    password: TEST_USERS.sudoNoPassword.password,
    sudo_user: true,
    sudo_user_no_password: true,
  });
  rootServerId = root.id;
});

async function setupProxy() {
  const res = await request(t.app, t.as.operator, { method: 'POST', url: `/api/v1/root-servers/${rootServerId}/actions/setup_proxy` });
  expect(res.statusCode, res.body).toBe(202);
  const job = await waitForJob(t.app, t.as.user, res.json().job_id, 120_000);
  expect(job.state, JSON.stringify(job)).toBe('completed');
  return job.result as Record<string, unknown>;
}

let n = 0;
async function tenant(database_name: string, opts: { created?: boolean } = {}) {
  n += 1;
  const partner = await t.ctx.db.partner.create({ data: { name: `P ${n}`, email: `p${n}-${RUN}@example.com` } });
  return t.ctx.db.subscription.create({
    data: {
      name: `S ${n}`,
      partner_id: partner.id,
      state: 'running',
      database_name,
      database_created_at: opts.created === false ? null : new Date(),
    },
  });
}

/** GET over plain HTTP to Caddy on 127.0.0.1:80 with `host` as Host. */
function httpGet(host: string, path: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port: 80, path, headers: { ...headers, host }, timeout: 10_000 }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.end();
  });
}

/** GET / over HTTPS to Caddy on 127.0.0.1:443 with `hostname` as SNI, the chain checked against Pebble's root. */
async function httpsGet(hostname: string): Promise<{ status: number; body: string; issuer: string; subject: string }> {
  const ca = await lab.issuingRoot();
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      { host: '127.0.0.1', port: 443, servername: hostname, path: '/web', headers: { host: hostname }, ca, timeout: 30_000 },
      (res) => {
        const cert = (res.socket as TLSSocket).getPeerCertificate();
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, body, issuer: String(cert.issuer?.CN), subject: String(cert.subjectaltname) }),
        );
      },
    );
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.end();
  });
}

// svc's log keeps a request's path, not its query's values: the asks are counted, not named.
const asks = () => t.ctx.logText().split('"url":"/svc/tls/ask?domain=').length - 1;

describe("the tenants' own addresses on Caddy", { timeout: 300_000 }, () => {
  it('plain HTTP for *.localhost: <db>.localhost reaches Odoo naming <db>, whatever the client sends; /websocket goes to the evented port', async () => {
    const result = await setupProxy();
    expect(result).toMatchObject({
      tenant_sites: [
        { variable: 'SUBSCRIPTION_URL', site: 'http://*.localhost', tls: 'none', odoo_port: odoo.port },
        { variable: 'STAGING_URL', site: 'http://*.staging.localhost', tls: 'none', odoo_port: odoo.port },
      ],
      tls_ask: null,
    });
    const caddyfile = await readFile('/etc/caddy/Caddyfile', 'utf8');
    expect(caddyfile).toContain('http://*.localhost {');
    expect(caddyfile).not.toContain('on_demand');

    const page = await httpGet('acme_1.localhost', '/web/login', {
      'X-Odoo-Database': 'other_2',
      X_Odoo_Database: 'other_2',
      'X-Odoo_Database': 'other_2',
      'X-Svc-Host-Secret': 'guess',
    });
    expect(page).toEqual({ status: 200, body: 'http: acme_1' });
    const seen = odoo.seen.at(-1)!;
    expect(seen.path).toBe('/web/login');
    expect(seen.headers['x-odoo-database']).toBe('acme_1');
    expect(Object.keys(seen.headers).filter((h) => /odoo.database|svc-host-secret/i.test(h))).toEqual(['x-odoo-database']);
    expect(seen.headers['x-forwarded-host']).toBe('acme_1.localhost');

    // The web client's live connection: to the evented port, the header set the same way.
    const ws = await httpGet('acme_1.localhost', '/websocket', { 'X-Odoo-Database': 'other_2' });
    expect(ws).toEqual({ status: 200, body: 'evented: acme_1' });
    expect(evented.seen.at(-1)!.headers['x-odoo-database']).toBe('acme_1');

    // A staging copy's address, under its own pattern.
    expect(await httpGet('acme_1_stg_0a1b.staging.localhost', '/web')).toEqual({ status: 200, body: 'http: acme_1_stg_0a1b' });

    // Names that are no database name reach no Odoo.
    const before = odoo.seen.length;
    expect((await httpGet('Bad-Name.localhost', '/web')).status).toBe(404);
    expect((await httpGet('9acme.localhost', '/web')).status).toBe(404);
    expect(odoo.seen.length).toBe(before);
  });

  it('HTTPS by on-demand TLS: Caddy asks svc; a live tenant gets its certificate, a name nobody sells none', async () => {
    const pattern = `https://{database_name}.${TLS_DOMAIN}`;
    await withConfig(t, { SUBSCRIPTION_URL: pattern }, async () => {
      const result = await setupProxy();
      expect(result).toMatchObject({
        tenant_sites: [{ variable: 'SUBSCRIPTION_URL', site: `https://*.${TLS_DOMAIN}`, tls: 'on_demand' }, { variable: 'STAGING_URL' }],
        tls_ask: `http://127.0.0.1:${svcPort}/svc/tls/ask`,
      });
      const live = `live${RUN}`;
      const later = `later${RUN}`;
      await tenant(live);
      await tenant(later, { created: false });
      for (const db of [live, later, `nobody${RUN}`]) await lab.setA(`${db}.${TLS_DOMAIN}`, ['127.0.0.1']);

      const page = await httpsGet(`${live}.${TLS_DOMAIN}`);
      expect(page).toMatchObject({ status: 200, body: `http: ${live}`, subject: `DNS:${live}.${TLS_DOMAIN}` });
      expect(page.issuer).toMatch(/Pebble/);
      let asked = asks();
      expect(asked).toBeGreaterThan(0);

      // Not a tenant: svc says no, Caddy completes no handshake and asks Pebble for nothing.
      await expect(httpsGet(`nobody${RUN}.${TLS_DOMAIN}`)).rejects.toThrow();
      expect(asks()).toBeGreaterThan(asked);
      asked = asks();
      // A subscription whose database is not made yet: no; once it is, yes (Caddy asks again).
      await expect(httpsGet(`${later}.${TLS_DOMAIN}`)).rejects.toThrow();
      expect(asks()).toBeGreaterThan(asked);
      await t.ctx.db.subscription.update({ where: { database_name: later }, data: { database_created_at: new Date() } });
      expect(await httpsGet(`${later}.${TLS_DOMAIN}`)).toMatchObject({ status: 200, body: `http: ${later}` });
      expect(lab.logText()).not.toContain(`nobody${RUN}`);
    });
  });
});
