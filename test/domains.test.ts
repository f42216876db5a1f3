// Customer domains with automatic TLS, on real parts: the service sets up Caddy (Debian's package,
// run as root through the sudo NOPASSWD user of a real sshd on this machine), Pebble issues the
// certificates, pebble-challtestsrv is the DNS server of both Pebble and the service (the DNS
// Resolver setting's servers point there), a stand-in Odoo on ODOO_HTTP_PORT records what reaches
// it, and the customer databases are real ones deployed from an Odoo-shaped template. Caddy binds
// 80 and 443 of this machine: the file holds the machine's Caddy (helpers/acme.ts) while it runs.
// Pebble issues 10-day certificates here, so every active domain is within the expiry notice's 14 days.
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { request as httpsRequest } from 'node:https';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { promisify } from 'node:util';
import type { TLSSocket } from 'node:tls';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { domainJobs } from '../src/domains/domain-job-specs.js';
import { CADDY_ADMIN_SOCKET } from '../src/servers/caddy.js';
import { withDeadline } from '../src/domains/job-deadline.js';
import { webhookJobs } from '../src/webhooks/webhook-job-specs.js';
import { confirmedRootServer, request, waitForJob } from './helpers/api.js';
import { useTestApp } from './helpers/app.js';
import { startAcmeLab, takeCaddyMachine, type AcmeLab, type CaddyMachine } from './helpers/acme.js';
import { sendJson, startRecordingServer, type RecordingServer } from './helpers/http-recorder.js';
import { act, connect, messages, useLifecycle, type Subscription } from './helpers/lifecycle.js';
import { startSshd, TEST_USERS, type Sshd } from './helpers/sshd.js';

const RUN = randomBytes(3).toString('hex');
const REFUSED = `refused-${RUN}.shop.test`;
const host = (name: string) => `${name}-${RUN}.shop.test`;
const SITES = '/etc/caddy/svc.d';

let machine: CaddyMachine;
let lab: AcmeLab;
let sshd: Sshd;
let odoo: RecordingServer;
let ntfy: RecordingServer;
let base: string;

beforeAll(async () => {
  machine = await takeCaddyMachine();
  lab = await startAcmeLab({ refused: [REFUSED], validitySeconds: 10 * 86_400 });
  sshd = await startSshd();
  odoo = await startRecordingServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end('odoo stand-in');
  });
  ntfy = await startRecordingServer((_req, res) => sendJson(res, 200, { id: `m${ntfy.calls.length}`, event: 'message' }));
  base = await mkdtemp(path.join(tmpdir(), 'svc-odoo-'));
});
afterAll(async () => {
  await machine?.release();
  await lab?.stop();
  await sshd?.stop();
  await odoo?.close();
  await ntfy?.close();
  await rm(base, { recursive: true, force: true });
});

const t = useTestApp({
  workers: true,
  env: () => ({
    ACME_CA_URL: lab.directory,
    ACME_EMAIL: 'ops@shop.test',
    ACME_CA_ROOT_PEM: lab.listenerRootFile,
    ODOO_HTTP_PORT: String(odoo.port),
    DNS_CLOUDFLARE_SERVERS: lab.dns,
    ODOO_BASE_PATH: base,
    SUBSCRIPTION_URL: 'https://{database_name}.odoo.test',
  }),
});

const fx = useLifecycle(t);
let rootServerId: number;

beforeAll(async () => {
  const root = await confirmedRootServer(t.app, t.as.operator, sshd, {
    username: TEST_USERS.sudoNoPassword.name,
    password: TEST_USERS.sudoNoPassword.password,
    sudo_user: true,
    sudo_user_no_password: true,
  });
  rootServerId = root.id;
  const res = await request(t.app, t.as.operator, {
    method: 'PATCH',
    url: `/api/v1/database-templates/${fx.templateId}`,
    payload: { root_server_id: rootServerId },
  });
  expect(res.statusCode, res.body).toBe(200);
  const push = await request(t.app, t.as.operator, {
    method: 'POST',
    url: '/api/v1/notification-servers',
    payload: { name: 'ntfy', provider: 'selfhosted_push', url: ntfy.url, is_default: true },
  });
  expect(push.statusCode, push.body).toBe(201);
});

interface DomainOut {
  id: number;
  subscription_id: number;
  hostname: string;
  is_primary: boolean;
  state: string;
  dns_target: string | null;
  verified_at: string | null;
  certificate_not_after: string | null;
  certificate_issuer: string | null;
  last_error: string | null;
  site_file: string | null;
}

const api = (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, payload?: object, caller = t.as.operator) =>
  request(t.app, caller, { method, url: `/api/v1${url}`, payload });

async function createDomain(payload: object) {
  const res = await api('POST', '/domains', payload);
  expect(res.statusCode, res.body).toBe(201);
  return res.json() as DomainOut;
}

async function getDomain(id: number) {
  const res = await api('GET', `/domains/${id}`, undefined, t.as.user);
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as DomainOut;
}

/** Runs the verify action to its end; answers the job and the domain after it. */
async function verify(id: number) {
  const res = await api('POST', `/domains/${id}/actions/verify`);
  expect(res.statusCode, res.body).toBe(202);
  const job = await waitForJob(t.app, t.as.user, res.json().job_id, 150_000);
  return { job, domain: await getDomain(id) };
}

/** The run's job, completed (it only queues). */
async function runOnly() {
  const jobId = await t.ctx.queues.enqueue(domainJobs.verify_domains, { user_id: null });
  const job = await waitForJob(t.app, t.as.user, jobId, 30_000);
  expect(job.state, JSON.stringify(job)).toBe('completed');
  return { id: jobId as string, result: job.result };
}

/** The verify_domain jobs of one domain, as BullMQ holds them. */
async function jobsOfDomain(domainId: number) {
  const jobs = await t.ctx.queues.queue('domains').getJobs(['waiting', 'active', 'prioritized', 'delayed', 'completed', 'failed']);
  return jobs.filter((j) => j.name === 'verify_domain' && j.data.domain_id === domainId);
}

/** The run, then every per-domain job it queued, to their end. */
async function runChecks() {
  const run = await runOnly();
  await vi.waitFor(
    async () => {
      const left = await t.ctx.queues.queue('domains').getJobCounts('waiting', 'active', 'prioritized', 'delayed');
      expect(left).toEqual({ waiting: 0, active: 0, prioritized: 0, delayed: 0 });
    },
    { timeout: 150_000, interval: 100 },
  );
  return run.result;
}

/** GET / over HTTPS to Caddy on 127.0.0.1:443 with `hostname` as SNI, checking the chain against Pebble's root. */
async function httpsGet(hostname: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string; issuer: string }> {
  const ca = await lab.issuingRoot();
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      { host: '127.0.0.1', port: 443, servername: hostname, path: '/', headers: { ...headers, host: hostname }, ca, timeout: 10_000 },
      (res) => {
        const issuer = String((res.socket as TLSSocket).getPeerCertificate().issuer?.CN);
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body, issuer }));
      },
    );
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.end();
  });
}

async function webBaseUrl(database: string) {
  const client = await connect(database);
  try {
    const { rows } = await client.query(`SELECT value FROM ir_config_parameter WHERE key = 'web.base.url'`);
    return rows[0]?.value as string | undefined;
  } finally {
    await client.end();
  }
}

const execFileP = promisify(execFile);

/** Caddy's admin socket: its directory's mode, what root gets from it, and whether `nobody` gets in. */
async function adminSocket() {
  const dir = (await stat(path.dirname(CADDY_ADMIN_SOCKET))).mode & 0o777;
  const curl = (asNobody: boolean) =>
    execFileP('sh', [
      '-c',
      `${asNobody ? 'setpriv --reuid=nobody --regid=nogroup --clear-groups ' : ''}curl -s -o /dev/null -w '%{http_code}' -H 'Host: ' --unix-socket ${CADDY_ADMIN_SOCKET} http://localhost/config/ || echo refused`,
    ]).then((r) => r.stdout.trim());
  const root = await curl(false);
  return { dir: dir.toString(8), root: Number(root), nobody: (await curl(true)).includes('refused') ? 'refused' : 'reached' };
}

const siteFiles = async () => (existsSync(SITES) ? await readdir(SITES) : []).filter((n) => n.endsWith('.caddy')).sort();

describe('setup_proxy', { timeout: 300_000 }, () => {
  it('installs the main Caddyfile (ACME server, its root, the site files) and runs Caddy', async () => {
    const res = await api('POST', `/root-servers/${rootServerId}/actions/setup_proxy`);
    expect(res.statusCode, res.body).toBe(202);
    const job = await waitForJob(t.app, t.as.user, res.json().job_id, 120_000);
    expect(job.state, JSON.stringify(job)).toBe('completed');
    expect(job.result).toMatchObject({ caddyfile: '/etc/caddy/Caddyfile', sites_dir: SITES, status: 'caddy started' });
    const caddyfile = await readFile('/etc/caddy/Caddyfile', 'utf8');
    expect(caddyfile).toContain(`acme_ca ${lab.directory}`);
    expect(caddyfile).toContain('email ops@shop.test');
    expect(caddyfile).toContain('acme_ca_root /etc/caddy/svc-acme-ca-root.pem');
    expect(caddyfile).toContain(`import ${SITES}/*.caddy`);
    expect(await readFile('/etc/caddy/svc-acme-ca-root.pem', 'utf8')).toBe(await readFile(lab.listenerRootFile, 'utf8'));
    // Caddy's admin API is a Unix socket only root (and Caddy's user) reaches, not a TCP port
    // anything on the host could POST /stop to (a tenant's webhook sent by Odoo, for one).
    expect(caddyfile).toContain(`admin unix/${CADDY_ADMIN_SOCKET}`);
    await expect(fetch('http://127.0.0.1:2019/config/')).rejects.toThrow();
    expect(await adminSocket()).toEqual({ dir: '700', root: 200, nobody: 'refused' });

    // Again: the running Caddy is reloaded with the same file.
    const again = await api('POST', `/root-servers/${rootServerId}/actions/setup_proxy`);
    const second = await waitForJob(t.app, t.as.user, again.json().job_id, 120_000);
    expect(second.result).toMatchObject({ status: 'caddy reloaded' });
  });

  it('a host set up before the admin socket (Caddy on its default admin address) converges at the next setup_proxy', async () => {
    const caddyfile = await readFile('/etc/caddy/Caddyfile', 'utf8');
    await execFileP('caddy', ['stop', '--address', `unix/${CADDY_ADMIN_SOCKET}`]);
    await writeFile('/etc/caddy/Caddyfile', caddyfile.replace(/^\tadmin .*\n/m, ''));
    // (Its output elsewhere: the Caddy it leaves running would hold this test's pipes open.)
    await execFileP('sh', ['-c', 'caddy start --config /etc/caddy/Caddyfile --adapter caddyfile >/dev/null 2>&1 </dev/null']);
    expect((await fetch('http://127.0.0.1:2019/config/')).status).toBe(200);

    const res = await api('POST', `/root-servers/${rootServerId}/actions/setup_proxy`);
    const job = await waitForJob(t.app, t.as.user, res.json().job_id, 120_000);
    expect(job.result, JSON.stringify(job)).toMatchObject({ status: 'caddy reloaded' });
    await expect(fetch('http://127.0.0.1:2019/config/')).rejects.toThrow();
    expect(await adminSocket()).toEqual({ dir: '700', root: 200, nobody: 'refused' });
  });
});

describe('refused input', () => {
  let sub: Subscription;
  beforeAll(async () => {
    sub = await fx.deployed();
  });

  it('host names that are IP literals, wildcards, the service itself, too long or with bad labels: 400 naming hostname, nothing made', async () => {
    const bad = [
      '203.0.113.5',
      '[2001:db8::1]',
      '2001:db8::1',
      '10.1.2.300',
      '*.shop.test',
      'svc.test',
      'SVC.test.',
      `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(63)}.test`,
      `${'x'.repeat(64)}.shop.test`,
      'a..shop.test',
      '-a.shop.test',
      'a_b.shop.test',
      'shop test.example',
      'localhost',
      "x.test';touch /tmp/pwned;'",
      'x.test{',
      'evil.test/x',
      '0x7f.1',
      '',
    ];
    for (const hostname of bad) {
      const res = await api('POST', '/domains', { subscription_id: sub.id, hostname });
      expect(res.statusCode, `${hostname}: ${res.body}`).toBe(400);
      expect(res.json().error.code).toBe('validation_error');
      expect(res.json().error.details.fields.map((f: { field: string }) => f.field)).toEqual(['hostname']);
    }
    expect(await t.ctx.db.domain.count()).toBe(0);
    expect(await siteFiles()).toEqual([]);
  });

  it('a host name belongs to one subscription (409); a template without a root server: 409 naming it', async () => {
    const other = await fx.deployed();
    const name = host('taken');
    const first = await createDomain({ subscription_id: sub.id, hostname: name.toUpperCase() });
    expect(first).toMatchObject({ hostname: name, state: 'pending_dns', dns_target: 'A 127.0.0.1', is_primary: false });
    const again = await api('POST', '/domains', { subscription_id: other.id, hostname: `${name}.` });
    expect(again.statusCode).toBe(409);
    expect(again.json().error.details.fields).toEqual([{ field: 'hostname', message: 'already used by another record' }]);

    const bare = await api('POST', '/database-templates', {
      name: 'No host',
      postgresql_server_id: fx.serverId,
      template_db_name: fx.templateDb,
    });
    expect(bare.statusCode, bare.body).toBe(201);
    const partner = await fx.partner();
    const hostless = await api('POST', '/subscriptions', {
      name: 'Hostless',
      partner_id: partner.id,
      database_template_id: bare.json().id,
    });
    const res = await api('POST', '/domains', { subscription_id: hostless.json().id, hostname: host('hostless') });
    expect(res.statusCode).toBe(409);
    expect(res.json().error.message).toContain(`Database template ${bare.json().id} (No host)`);
    expect(res.json().error.message).toContain('root_server_id');

    // IDN host names are stored in their ASCII form; users read but do not write.
    const idn = await createDomain({ subscription_id: sub.id, hostname: `bücher-${RUN}.shop.test` });
    expect(idn.hostname).toBe(new URL(`http://bücher-${RUN}.shop.test`).hostname);
    expect(idn.hostname).toMatch(/^xn--/);
    expect((await api('POST', '/domains', { subscription_id: sub.id, hostname: host('user') }, t.as.user)).statusCode).toBe(403);
    expect((await api('GET', `/domains?subscription_id=${sub.id}`, undefined, t.as.user)).json().total).toBe(2);
    for (const d of [first, idn]) expect((await api('DELETE', `/domains/${d.id}`)).statusCode).toBe(204);
  });
});

describe('a domain goes live', { timeout: 300_000 }, () => {
  let sub: Subscription;
  let shop: DomainOut;
  const name = host('www');

  beforeAll(async () => {
    sub = await fx.deployed();
  });

  it('waits in pending_dns while the name does not point at the host, with nothing written there', async () => {
    shop = await createDomain({ subscription_id: sub.id, hostname: name, is_primary: true });
    const none = await verify(shop.id);
    expect(none.job.state).toBe('completed');
    expect(none.domain.state).toBe('pending_dns');
    expect(none.domain.last_error).toContain(name);
    expect(none.domain.site_file).toBeNull();

    await lab.setA(name, ['192.0.2.7']);
    const elsewhere = await verify(shop.id);
    expect(elsewhere.domain).toMatchObject({ state: 'pending_dns', dns_target: 'A 127.0.0.1' });
    expect(elsewhere.domain.last_error).toBe(`${name} resolves to 192.0.2.7, not only to the Odoo host's 127.0.0.1; set A 127.0.0.1`);
    expect(await siteFiles()).toEqual([]);
  });

  it('once it does: the site file, a Pebble certificate read back over TLS, HTTPS to Odoo with the database header, web.base.url', async () => {
    await lab.setA(name, ['127.0.0.1']);
    const { job, domain } = await verify(shop.id);
    expect(job.state, JSON.stringify(job)).toBe('completed');
    expect(domain).toMatchObject({ state: 'active', last_error: null, site_file: `${SITES}/${sub.database_name}--${name}.caddy` });
    expect(domain.certificate_issuer).toMatch(/Pebble Intermediate CA/);
    const notAfter = Date.parse(domain.certificate_not_after!);
    expect(notAfter - Date.now()).toBeGreaterThan(9 * 86_400_000);
    expect(notAfter - Date.now()).toBeLessThanOrEqual(10 * 86_400_000);
    expect(domain.verified_at).not.toBeNull();

    expect(await readFile(domain.site_file!, 'utf8')).toContain(`header_up X-Odoo-Database ${sub.database_name}`);
    const before = odoo.calls.length;
    const res = await httpsGet(name);
    expect(res).toMatchObject({ status: 200, body: 'odoo stand-in' });
    expect(res.issuer).toMatch(/Pebble Intermediate CA/);
    // A client naming another database itself: Caddy replaces the header with the tenant's.
    expect(await httpsGet(name, { 'X-Odoo-Database': 'another_tenant_1' })).toMatchObject({ status: 200 });
    const reached = odoo.calls.slice(before);
    expect(reached.map((c) => c.headers['x-odoo-database'])).toEqual([sub.database_name, sub.database_name]);
    expect(reached[0]!.headers['x-forwarded-proto']).toBe('https');

    expect(await webBaseUrl(sub.database_name)).toBe(`https://${name}`);
    const thread = (await messages(t, sub.id)).map((m) => m.body);
    expect(thread).toContain(`The instance's web.base.url is now https://${name}.`);
  });

  it('a certificate within 14 days of its end: one alert in the subscription chatter and one push, not repeated by the run', async () => {
    const alerts = async () =>
      (await messages(t, sub.id)).filter((m) => m.subtype_xmlid === 'mail.mt_alert' && m.body.startsWith(`Certificate of ${name} expires`));
    expect(await alerts()).toHaveLength(1);
    const pushes = () => ntfy.calls.filter((c) => c.body.includes(name));
    expect(pushes()).toHaveLength(1);
    expect(JSON.parse(pushes()[0]!.body)).toMatchObject({
      title: expect.stringMatching(new RegExp(`^Certificate of ${name} expires in 9 days$`)),
    });

    const result = await runChecks();
    expect(result.certificate_checks).toBeGreaterThanOrEqual(1);
    const check = (await jobsOfDomain(shop.id)).find((j) => j.data.scheduled);
    expect(check?.returnvalue).toMatchObject({ state: 'active', hostname: name, certificate: { issuer: expect.stringMatching(/Pebble/) } });
    await verify(shop.id);
    expect(await alerts()).toHaveLength(1);
    expect(pushes()).toHaveLength(1);
  });

  it('domains verified at once on one host all go live (a reload cancelling another attempt is no refusal)', async () => {
    const names = [1, 2, 3, 4, 5].map((i) => host(`together${i}`));
    const made = await Promise.all(
      names.map(async (n) => {
        await lab.setA(n, ['127.0.0.1']);
        return createDomain({ subscription_id: sub.id, hostname: n });
      }),
    );
    const results = await Promise.all(made.map((d) => verify(d.id)));
    for (const { job, domain } of results)
      expect([domain.hostname, domain.state, job.state]).toEqual([domain.hostname, 'active', 'completed']);
    for (const n of names) expect((await httpsGet(n)).status).toBe(200);
    for (const d of made) expect((await api('DELETE', `/domains/${d.id}`)).statusCode).toBe(204);
  });

  it('the ACME server refusing a certificate: failed with its reason, the file taken out, the other domains still served', async () => {
    const other = await fx.deployed();
    await lab.setA(REFUSED, ['127.0.0.1']);
    const refused = await createDomain({ subscription_id: other.id, hostname: REFUSED });
    const { job, domain } = await verify(refused.id);
    expect(job.state).toBe('failed');
    expect(domain.state).toBe('failed');
    expect(domain.last_error).toContain(`The ACME server refused the certificate of ${REFUSED}`);
    expect(domain.last_error).toContain('rejectedIdentifier');
    expect(job.error).toBe(domain.last_error);
    expect(domain.site_file).toBeNull();
    expect(await siteFiles()).toEqual([`${sub.database_name}--${name}.caddy`]);
    expect((await httpsGet(name)).status).toBe(200);
    const thread = (await api('GET', `/domains/${refused.id}/messages`, undefined, t.as.user)).json().items;
    expect(
      thread.some(
        (m: { body: string; subtype_xmlid: string }) => m.subtype_xmlid === 'mail.mt_alert' && m.body.includes('rejectedIdentifier'),
      ),
    ).toBe(true);
    expect((await api('DELETE', `/domains/${refused.id}`)).statusCode).toBe(204);
  });

  it('caddy validate failing: failed with its output, the running configuration unchanged', async () => {
    const other = await fx.deployed();
    const name2 = host('broken');
    await lab.setA(name2, ['127.0.0.1']);
    // Somebody else's broken file on the host: every validation fails until it is mended.
    const broken = `${SITES}/zz-broken.caddy`;
    await writeFile(broken, 'this is { not a site\n');
    try {
      const d = await createDomain({ subscription_id: other.id, hostname: name2 });
      const { job, domain } = await verify(d.id);
      expect(job.state).toBe('failed');
      expect(domain.state).toBe('failed');
      expect(domain.last_error).toMatch(new RegExp(`^Loading the site of ${name2} failed: .*caddy validate failed: `, 's'));
      expect(domain.site_file).toBeNull();
      expect(await siteFiles()).toEqual([`${sub.database_name}--${name}.caddy`, 'zz-broken.caddy']);
      expect((await httpsGet(name)).status).toBe(200);
      await rm(broken);
      const fixed = await verify(d.id);
      expect(fixed.domain.state, fixed.domain.last_error ?? '').toBe('active');
      expect((await httpsGet(name2)).status).toBe(200);
      expect((await api('DELETE', `/domains/${d.id}`)).statusCode).toBe(204);
    } finally {
      await rm(broken, { force: true });
    }
  });

  it('PATCH is_primary moves the tenant address; DELETE takes the site away and puts web.base.url back', async () => {
    const second = await createDomain({ subscription_id: sub.id, hostname: host('shop') });
    await lab.setA(second.hostname, ['127.0.0.1']);
    const live = (await verify(second.id)).domain;
    expect(live.state, live.last_error ?? '').toBe('active');
    expect(await webBaseUrl(sub.database_name)).toBe(`https://${name}`);

    const moved = await api('PATCH', `/domains/${second.id}`, { is_primary: true });
    expect(moved.statusCode, moved.body).toBe(200);
    expect(moved.json().is_primary).toBe(true);
    expect((await getDomain(shop.id)).is_primary).toBe(false);
    expect(await webBaseUrl(sub.database_name)).toBe(`https://${second.hostname}`);

    expect((await api('DELETE', `/domains/${second.id}`)).statusCode).toBe(204);
    expect(await webBaseUrl(sub.database_name)).toBe(`https://${sub.database_name}.odoo.test`);
    expect(await siteFiles()).toEqual([`${sub.database_name}--${name}.caddy`]);
    await expect(httpsGet(second.hostname)).rejects.toThrow();
    expect((await httpsGet(name)).status).toBe(200);
  });

  it("a cancelled subscription's domains are removed by the run", async () => {
    expect((await act(t, sub.id, 'cancel')).statusCode).toBe(200);
    const result = await runChecks();
    expect(result.removals).toBe(1);
    expect(await t.ctx.db.domain.count({ where: { subscription_id: sub.id } })).toBe(0);
    expect(await siteFiles()).toEqual([]);
    await expect(httpsGet(name)).rejects.toThrow();
    const thread = (await messages(t, sub.id)).map((m) => m.body);
    expect(thread).toContain(`Domain ${name} removed (subscription ${sub.id} is cancelled).`);
  });
});

describe('a dead host', { timeout: 120_000 }, () => {
  // Accepts SSH connections and never answers: the host is there and does nothing (until released).
  let blackhole: Server;
  const held = new Set<Socket>();
  beforeAll(async () => {
    blackhole = createServer((socket) => {
      held.add(socket);
      socket.on('error', () => {});
    });
    await new Promise<void>((resolve) => blackhole.listen(0, '127.0.0.1', resolve));
  });
  afterAll(async () => {
    for (const socket of held) socket.destroy();
    await new Promise((resolve) => blackhole?.close(resolve));
  });

  it("holds up only its own domain's job: the run only queues, other domains and maintenance jobs go on", async () => {
    // A subscription on its own Odoo host, deployed while the host answered, then cancelled with a
    // domain live there; the host then stops answering.
    const dead = await confirmedRootServer(t.app, t.as.operator, sshd, {
      username: TEST_USERS.sudoNoPassword.name,
      password: TEST_USERS.sudoNoPassword.password,
      sudo_user: true,
      sudo_user_no_password: true,
    });
    const template = await api('POST', '/database-templates', {
      name: 'Dead host',
      postgresql_server_id: fx.serverId,
      template_db_name: fx.templateDb,
      root_server_id: dead.id,
    });
    expect(template.statusCode, template.body).toBe(201);
    const gone = await fx.deployed({ database_template_id: template.json().id });
    const deadName = host('deadhost');
    const stuck = await createDomain({ subscription_id: gone.id, hostname: deadName });
    await t.ctx.db.domain.update({
      where: { id: stuck.id },
      data: { state: 'active', root_server_id: dead.id, site_file: `${SITES}/${gone.database_name}--${deadName}.caddy` },
    });
    expect((await act(t, gone.id, 'cancel')).statusCode).toBe(200);
    await t.ctx.db.rootServer.update({ where: { id: dead.id }, data: { port: (blackhole.address() as { port: number }).port } });

    // Another customer's domain waiting for DNS, on the live host.
    const live = await fx.deployed();
    const waiting = await createDomain({ subscription_id: live.id, hostname: host('waiting') });

    const run = await runOnly();
    expect(run.result).toMatchObject({ removals: 1, verifications: 1 });
    // The run touched no host and no tenant: nothing in the action log under its job.
    expect(await t.ctx.db.actionLog.count({ where: { job_id: run.id } })).toBe(0);

    // The dead host's job is under way (its SSH connection waits)...
    const [deadJob] = await jobsOfDomain(stuck.id);
    expect(deadJob).toBeDefined();
    await vi.waitFor(async () => expect(await deadJob!.getState()).toBe('active'), { timeout: 5_000, interval: 50 });
    // ... while the other domain's verification ends, and so does a maintenance job queued after the run.
    await vi.waitFor(
      async () => {
        const [other] = await jobsOfDomain(waiting.id);
        expect(await other?.getState()).toBe('completed');
      },
      { timeout: 10_000, interval: 50 },
    );
    expect((await getDomain(waiting.id)).state).toBe('pending_dns');
    const prune = await t.ctx.queues.enqueue(webhookJobs.prune_webhook_calls, {});
    expect((await waitForJob(t.app, t.as.user, prune, 10_000)).state).toBe('completed');
    expect(await deadJob!.getState()).toBe('active');

    // One job per domain at a time: the operator's verify answers the job under way.
    const again = await api('POST', `/domains/${stuck.id}/actions/verify`);
    expect(again.statusCode, again.body).toBe(202);
    expect(again.json().job_id).toBe(`domains-${deadJob!.id}`);

    // The host goes away altogether: the removal fails, the domain stays and says why.
    for (const socket of held) socket.destroy();
    const ended = await waitForJob(t.app, t.as.user, `domains-${deadJob!.id}`, 30_000);
    expect(ended.state).toBe('failed');
    expect(ended.error).toContain(`Removing ${deadName} of ended subscription ${gone.id} failed`);
    expect((await getDomain(stuck.id)).last_error).toBe(ended.error);
    await t.ctx.db.domain.deleteMany({ where: { id: { in: [stuck.id, waiting.id] } } });
  });
});

describe("a domain job's deadline", () => {
  it('aborts the work, records why, and fails with the reason; work within it answers as usual', async () => {
    const recorded: string[] = [];
    let closed = false;
    const hung = withDeadline(
      100,
      'verify_domain of x.test',
      (signal) =>
        new Promise((_, reject) =>
          signal.addEventListener('abort', () => {
            closed = true;
            reject(new Error('Connection closed'));
          }),
        ),
      async (reason) => {
        recorded.push(reason);
      },
    );
    await expect(hung).rejects.toThrow('verify_domain of x.test did not finish within 0.1 s');
    expect(closed).toBe(true);
    expect(recorded).toEqual(['verify_domain of x.test did not finish within 0.1 s']);

    const quick = await withDeadline(
      60_000,
      'verify_domain of y.test',
      async () => 'done',
      async () => {
        throw new Error('not expected');
      },
    );
    expect(quick).toBe('done');
  });
});
