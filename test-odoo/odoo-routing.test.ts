// Which database a request reaches on a host serving several tenants, on the real Odoo and through a
// real Caddy: two tenants deployed on one host, each reached by its own address (a wildcard site in
// front of Odoo, dbfilter ^%d$) and by a customer domain (the very site file svc writes, which sets
// X-Odoo-Database); a request naming the other tenant, a template, or carrying the other tenant's
// session is refused. Also: svc's addons are on the host with the repository's checksum, readable
// and not writable by odoo, and setup_odoo sends them again only when they differ.
// Odoo's ports: 18300 (first source), 18350 (second); this file's Caddy: 18380-18382.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { siteConfig } from '../src/domains/caddy-sites.js';
import { addonsBundle } from '../src/odoo/odoo-svc-addons.js';
import { request, waitForJob } from '../test/helpers/api.js';
import { queryIn } from '../test/helpers/odoo-template.js';
import { codeFrom, textOf, useSmtpServer } from '../test/helpers/smtp.js';
import { injectTransport, Visitor } from '../test/helpers/trial.js';
import { odooGet, odooSources, svcHeaders, useOdooFixture } from './odoo-fixture.js';
import { newOdooVersion } from './odoo-host.js';

const sources = odooSources();
const smtp = useSmtpServer();
const DOMAIN = 'routing.test';
const f = useOdooFixture({
  get SMTP_URL() {
    return smtp.url;
  },
  SUBSCRIPTION_URL: `https://{database_name}.${DOMAIN}`,
} as Record<string, string>);

const CADDY = { https: 18380, http: 18381, admin: 18382 };

/** A Caddy of this file's own (its ports, its storage, certificates from its internal CA), fed the site files. */
const caddy = { dir: '', proc: null as ChildProcess | null, output: '' };

async function caddyReload() {
  execFileSync(
    'caddy',
    ['reload', '--config', path.join(caddy.dir, 'Caddyfile'), '--adapter', 'caddyfile', '--address', `127.0.0.1:${CADDY.admin}`],
    {
      env: caddyEnv(),
      stdio: 'pipe',
    },
  );
}
const caddyEnv = () => ({ ...process.env, HOME: caddy.dir, XDG_DATA_HOME: caddy.dir, XDG_CONFIG_HOME: caddy.dir });

beforeAll(async () => {
  caddy.dir = await mkdtemp(path.join(tmpdir(), 'svc-routing-caddy-'));
  await mkdir(path.join(caddy.dir, 'sites'));
  await writeFile(
    path.join(caddy.dir, 'Caddyfile'),
    [
      '{',
      `\tadmin 127.0.0.1:${CADDY.admin}`,
      `\thttp_port ${CADDY.http}`,
      `\thttps_port ${CADDY.https}`,
      '\tlocal_certs',
      '\tskip_install_trust',
      '\tauto_https disable_redirects',
      `\tstorage file_system ${caddy.dir}/storage`,
      '}',
      `import ${caddy.dir}/sites/*.caddy`,
      '',
    ].join('\n'),
  );
  const proc = spawn('caddy', ['run', '--config', path.join(caddy.dir, 'Caddyfile'), '--adapter', 'caddyfile'], { env: caddyEnv() });
  caddy.proc = proc;
  proc.stdout.on('data', (c: Buffer) => (caddy.output += c.toString()));
  proc.stderr.on('data', (c: Buffer) => (caddy.output += c.toString()));
  const deadline = Date.now() + 15_000;
  for (;;) {
    const up = await new Promise<boolean>((resolve) => {
      const s = connect(CADDY.admin, '127.0.0.1', () => {
        s.end();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
    if (up) break;
    if (Date.now() > deadline || proc.exitCode !== null) throw new Error(`Caddy did not start:\n${caddy.output}`);
    await new Promise((r) => setTimeout(r, 100));
  }
});

afterAll(async () => {
  caddy.proc?.kill('SIGTERM');
  if (caddy.dir) await rm(caddy.dir, { recursive: true, force: true });
});

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** A request to this file's Caddy (tried again for a few seconds while a new site's certificate is being made). */
async function throughCaddy(host: string, url: string, init: { method?: string; headers?: Record<string, string>; body?: string } = {}) {
  for (let attempt = 0; ; attempt++) {
    try {
      return await throughCaddyOnce(host, url, init);
    } catch (err) {
      if (attempt >= 20) throw err;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}

/** HTTPS with the name as SNI for a customer domain, plain HTTP for the wildcard site. */
function throughCaddyOnce(
  host: string,
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<Answer> {
  const tls = !host.endsWith(`.${DOMAIN}`);
  const options = {
    host: '127.0.0.1',
    port: tls ? CADDY.https : CADDY.http,
    method: init.method ?? 'GET',
    path: url,
    headers: { ...init.headers, host },
    timeout: 30_000,
    ...(tls ? { servername: host, rejectUnauthorized: false } : {}),
  };
  return new Promise((resolve, reject) => {
    const req = (tls ? httpsRequest : httpRequest)(options, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.end(init.body);
  });
}

/** The host's secret (what svc's own calls carry), from Odoo's configuration file on this machine. */
const hostSecret = async (base: string, port: number) => (await svcHeaders(base, port))['X-Svc-Host-Secret']!;

/** JSON-RPC straight to the host's Odoo on 127.0.0.1 (no proxy), with the given headers: its result, or the error's name. */
async function loopbackRpc(port: number, service: string, method: string, args: unknown[], headers: Record<string, string> = {}) {
  const res = await fetch(`http://127.0.0.1:${port}/jsonrpc`, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', method: 'call', id: 1, params: { service, method, args } }),
    signal: AbortSignal.timeout(30_000),
  });
  const json = JSON.parse(await res.text());
  return json.error ? `error: ${json.error.data?.name ?? json.error.message}` : json.result;
}

/** A model method called with the session `cookie` at `host` (the web client's call_kw): its result, or the error's message. */
async function callKw(host: string, cookie: string, model: string, method: string, args: unknown[], kwargs: Record<string, unknown> = {}) {
  const res = await throughCaddy(host, `/web/dataset/call_kw/${model}/${method}`, {
    method: 'POST',
    headers: { cookie, 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', method: 'call', id: 1, params: { model, method, args, kwargs } }),
  });
  const json = JSON.parse(res.body);
  if (json.error) return { error: String(json.error.data?.message ?? json.error.message) };
  return { result: json.result as unknown };
}

const cookieOf = (a: Answer) => String([a.headers['set-cookie'] ?? []].flat()[0] ?? '').split(';')[0]!;

async function rpcThrough(host: string, service: string, method: string, args: unknown[], headers: Record<string, string> = {}) {
  const res = await throughCaddy(host, '/jsonrpc', {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', method: 'call', id: 1, params: { service, method, args } }),
  });
  const json = JSON.parse(res.body);
  return json.error ? `error: ${json.error.data?.name ?? json.error.message}` : json.result;
}

/** Which database and user a session cookie stands for at `host` (or the error's name). */
async function sessionAt(host: string, cookie: string) {
  const res = await throughCaddy(host, '/web/session/get_session_info', {
    method: 'POST',
    headers: { cookie, 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', method: 'call', id: 1, params: {} }),
  });
  const json = JSON.parse(res.body);
  return json.result ? { db: json.result.db, uid: json.result.uid } : String(json.error?.data?.name ?? json.error?.message);
}

/** The web login form at `host`: the sign-in's answer and the session it leaves. */
async function webLogin(host: string, login: string, password: string, headers: Record<string, string> = {}) {
  const form = await throughCaddy(host, '/web/login', { headers });
  const csrf = /name="csrf_token" value="([^"]+)"/.exec(form.body)?.[1];
  if (!csrf) return { status: form.status, form: false as const, location: form.headers.location };
  const cookie = cookieOf(form);
  const res = await throughCaddy(host, '/web/login', {
    method: 'POST',
    headers: { ...headers, cookie, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ login, password, csrf_token: csrf, redirect: '' }).toString(),
  });
  const session = cookieOf(res) || cookie;
  return {
    status: res.status,
    form: true as const,
    location: res.headers.location,
    cookie: session,
    session: await sessionAt(host, session),
  };
}

/** The web client's websocket handshake at `host` (a customer domain): the HTTP status it gets (101: upgraded). */
function websocketAt(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest({
      host: '127.0.0.1',
      port: CADDY.https,
      path: '/websocket?version=1',
      servername: host,
      rejectUnauthorized: false,
      timeout: 30_000,
      headers: {
        host,
        origin: `https://${host}`,
        connection: 'Upgrade',
        upgrade: 'websocket',
        'sec-websocket-version': '13',
        'sec-websocket-key': randomBytes(16).toString('base64'),
      },
    });
    req.on('upgrade', (res, socket) => {
      socket.destroy();
      resolve(res.statusCode ?? 0);
    });
    req.on('response', (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.end();
  });
}

/** What installedAddons prints on the host: the checksum of the tree there. */
const hostAddonsSum = (dir: string) =>
  execFileSync(
    'sh',
    [
      '-c',
      "find . -name __pycache__ -prune -o -type f ! -name '*.pyc' ! -name '.svc-*' -print | LC_ALL=C sort | xargs -r -d '\\n' sha256sum | sha256sum | cut -d' ' -f1",
    ],
    { cwd: dir, encoding: 'utf8' },
  ).trim();

describe.each(sources.map((s, i) => ({ ...s, port: 18300 + 50 * i, index: i })))('routing on Odoo $name', (src) => {
  const made = { host: 0, versionId: 0, templateId: 0, templateDb: '' };
  const tenants: { id: number; database: string; login: string; password: string; domain: string }[] = [];
  /** The template administrator's password (build's, kept encrypted on the template record). */
  const templateAdminPassword = async () => {
    const row = await f.t.ctx.db.databaseTemplate.findUniqueOrThrow({ where: { id: made.templateId } });
    return (await f.t.ctx.secretBox.reveal(row.admin_password)) ?? 'admin';
  };
  // The first source runs without workers (the web client's websocket on Odoo's HTTP port), the
  // second with one (its websocket on the evented port): the site file serves both.
  const workers = src.index === 0 ? 0 : 1;
  const setupBody = () => ({
    odoo_version_id: made.versionId,
    postgresql_server_id: f.pgServerId,
    http_port: src.port,
    workers,
    max_cron_threads: 0,
  });

  test("setup_odoo puts svc's addons on the host (checksum, root's, not writable by odoo) and sends them again only when they differ", async () => {
    const version = await newOdooVersion(f, src, 'routing');
    made.versionId = version.id;
    made.host = await f.newHost();
    const first = await f.runJob(made.host, 'setup_odoo', setupBody());
    expect(first.state, JSON.stringify(first)).toBe('completed');

    const dir = `${f.base}/svc-addons`;
    const bundle = addonsBundle();
    expect(hostAddonsSum(dir)).toBe(bundle.sha256);
    expect(
      execFileSync('stat', ['-c', '%U:%G %a', dir, `${dir}/svc_instance/__init__.py`], { encoding: 'utf8' })
        .trim()
        .split('\n'),
    ).toEqual(['root:root 755', 'root:root 644']);
    const asOdoo = (cmd: string) =>
      execFileSync('sh', ['-c', `setpriv --reuid=odoo --regid=odoo --init-groups sh -c '${cmd}' && echo yes || echo no`], {
        encoding: 'utf8',
      }).trim();
    expect(asOdoo(`cat ${dir}/svc_instance/__manifest__.py >/dev/null`)).toBe('yes');
    expect(asOdoo(`touch ${dir}/svc_instance/x.py 2>/dev/null`)).toBe('no');
    const config = await readFile(`${f.base}/config/odoo-${src.port}.conf`, 'utf8');
    expect(config).toMatch(new RegExp(`^addons_path = .*,${dir}$`, 'm'));
    expect(config).toMatch(/^server_wide_modules = .*,svc_instance$/m);
    expect(config).toMatch(/^dbfilter = \^%d\$$/m);
    expect(await readFile(`${f.base}/logs/odoo-${src.port}.log`, 'utf8')).toContain('svc routing: X-Odoo-Database pins a request');
    // The host's secret (what svc's own calls carry): in the configuration, kept encrypted on the
    // record, never in an answer or the action log.
    const secret = await hostSecret(f.base, src.port);
    const record = await f.t.ctx.db.rootServer.findUniqueOrThrow({ where: { id: made.host } });
    expect(record.odoo_host_secret).not.toContain(secret);
    expect(await f.t.ctx.secretBox.reveal(record.odoo_host_secret)).toBe(secret);
    const answer = await request(f.t.app, f.t.as.operator, { method: 'GET', url: `/api/v1/root-servers/${made.host}` });
    expect(answer.body).not.toContain(secret);
    expect(answer.json()).not.toHaveProperty('odoo_host_secret');
    const logged = await f.t.ctx.db.actionLog.findMany({ where: { model_name: 'svc.root.server', rec_id: made.host } });
    expect(logged.length).toBeGreaterThan(0);
    expect(logged.filter((row) => `${row.input_text}${row.output_text}`.includes(secret))).toEqual([]);
    expect(logged.some((row) => row.input_text.includes('host_secret = ********'))).toBe(true);

    const again = await f.runJob(made.host, 'setup_odoo', setupBody());
    expect(again.result).toMatchObject({ restarted: false, changed: { source: false, addons: false, config: false, service: false } });

    // Broken on the host so that it does not import (Odoo only logs a server-wide module that
    // fails): restart_odoo sees the routing is not loaded (the probe, db.db_exist through a proxy,
    // answered by core), stops that Odoo and marks the server failed with the end of its log.
    await writeFile(`${dir}/svc_instance/models/__init__.py`, '\nraise ImportError("svc test: broken on the host")\n', { flag: 'a' });
    const broken = await f.runJob(made.host, 'restart_odoo');
    expect(broken.state, JSON.stringify(broken)).toBe('failed');
    expect(broken.error).toContain("svc's routing is not loaded");
    const failed = await f.server(made.host);
    expect(failed.odoo_state).toBe('failed');
    expect(failed.odoo_error).toMatch(
      /^svc's routing is not loaded: Odoo answered db\.db_exist to a request through a proxy \(False\).*Odoo was stopped/,
    );
    expect(failed.odoo_error).toContain('svc test: broken on the host');
    await expect(odooGet(src.port, '/web/health')).rejects.toThrow();

    // Found by its checksum, sent again, and Odoo restarted to load it: running, the routing loaded.
    const repaired = await f.runJob(made.host, 'setup_odoo', setupBody());
    expect(repaired.result).toMatchObject({ restarted: true, changed: { addons: true, config: false } });
    expect(hostAddonsSum(dir)).toBe(bundle.sha256);
    const status = await request(f.t.app, f.t.as.operator, {
      method: 'POST',
      url: `/api/v1/root-servers/${made.host}/actions/odoo_status`,
    });
    expect(status.json()).toMatchObject({ odoo_state: 'running', healthy: true, routing_loaded: true });
  });

  test('two tenants on the host (one a trial from the form to the ready mail), each reached by its own address and by its customer domain', async () => {
    made.templateDb = `svc_odoo_r_tpl${src.series}_${Date.now().toString(36)}`;
    const template = await request(f.t.app, f.t.as.operator, {
      method: 'POST',
      url: '/api/v1/database-templates',
      payload: {
        name: `Routing ${src.name}`,
        postgresql_server_id: f.pgServerId,
        template_db_name: made.templateDb,
        root_server_id: made.host,
      },
    });
    expect(template.statusCode, template.body).toBe(201);
    made.templateId = template.json().id;
    const built = await f.runJob(made.templateId, 'build', { modules: ['base'] }, 'database-templates');
    expect(built.state, JSON.stringify(built)).toBe('completed');

    // Tenant a: a subscription an operator deploys. Tenant b: a trial from the public form to the ready mail.
    const passwordIn = async (email: string, n: number) => {
      const password = /Password: +(\S+)/.exec(textOf(await smtp.waitFor(email, n, 120_000)))?.[1];
      expect(password, `the ready mail to ${email} tells a password`).toBeTruthy();
      return password!;
    };
    {
      const email = `routing-a-${src.series}-${Date.now()}@example.com`;
      const partner = await request(f.t.app, f.t.as.operator, {
        method: 'POST',
        url: '/api/v1/partners',
        payload: { name: 'Tenant a', email },
      });
      const database = `svc_odoo_r_a${src.series}_${Date.now().toString(36)}`;
      const created = await request(f.t.app, f.t.as.operator, {
        method: 'POST',
        url: '/api/v1/subscriptions',
        payload: {
          name: 'Routing a',
          partner_id: partner.json().id,
          database_template_id: made.templateId,
          database_name: database,
          is_trial: true,
          trial_end_date: new Date(Date.now() + 14 * 86_400_000).toISOString(),
        },
      });
      expect(created.statusCode, created.body).toBe(201);
      const id = created.json().id as number;
      const act = (name: string) =>
        request(f.t.app, f.t.as.operator, { method: 'POST', url: `/api/v1/subscriptions/${id}/actions/${name}` });
      expect((await act('confirm')).statusCode).toBe(200);
      const job = await waitForJob(f.t.app, f.t.as.user, (await act('deploy')).json().job_id, 10 * 60_000);
      expect(job.state, job.error).toBe('completed');
      tenants.push({ id, database, login: email, password: await passwordIn(email, 1), domain: `erp-a${src.series}.customer-a.example` });
    }
    {
      const pkg = await request(f.t.app, f.t.as.operator, {
        method: 'POST',
        url: '/api/v1/trial-packages',
        payload: {
          name: `Routing ${src.name}`,
          url_string: `routing-${src.series}`,
          auto_run_subscription: true,
          database_template_id: made.templateId,
        },
      });
      expect(pkg.statusCode, pkg.body).toBe(201);
      const email = `routing-b-${src.series}-${Date.now()}@example.com`;
      const visitor = new Visitor(injectTransport(f.t.app));
      await visitor.open(`/saas/trial/routing-${src.series}`);
      const page = await visitor.submit(email, pkg.json().id, { company_name: `Routing B ${src.series}` });
      expect(page.status, page.html.slice(0, 500)).toBe(200);
      expect((await visitor.verify(page.token!, codeFrom(await smtp.waitFor(email, 1, 60_000)))).status).toBe(200);
      const password = await passwordIn(email, 2);
      const sub = await f.t.ctx.db.subscription.findFirstOrThrow({ where: { partner: { email } } });
      expect(sub.state).toBe('running');
      tenants.push({ id: sub.id, database: sub.database_name!, login: email, password, domain: `erp-b${src.series}.customer-b.example` });
    }

    // The proxy: each tenant's customer domain is the site file svc writes; the tenants' own
    // addresses go through the operator's wildcard site (no header: dbfilter ^%d$ picks the database).
    for (const t of tenants) {
      await writeFile(
        path.join(caddy.dir, 'sites', `${t.database}.caddy`),
        siteConfig({ hostname: t.domain, database: t.database, odooPort: src.port }),
      );
    }
    await writeFile(
      path.join(caddy.dir, 'sites', `wildcard-${src.port}.caddy`),
      `http://*.${DOMAIN} {\n\treverse_proxy 127.0.0.1:${src.port} {\n\t\theader_up -X-Odoo-Database\n\t}\n}\n`,
    );
    // One wildcard site at a time: the later source's takes over (each describe runs whole before the next).
    for (const other of sources.map((_, i) => 18300 + 50 * i).filter((p) => p !== src.port)) {
      await rm(path.join(caddy.dir, 'sites', `wildcard-${other}.caddy`), { force: true });
    }
    await caddyReload();

    for (const t of tenants) {
      for (const host of [`${t.database}.${DOMAIN}`, t.domain]) {
        const signed = await webLogin(host, t.login, t.password);
        expect(signed, host).toMatchObject({ status: 303, form: true, session: { db: t.database, uid: 2 } });
        // The session stays (a browser stays signed in): 19.0's own header handling would not keep it.
        expect(await sessionAt(host, signed.form ? signed.cookie : '')).toEqual({ db: t.database, uid: 2 });
      }
      expect(await rpcThrough(t.domain, 'common', 'authenticate', [t.database, t.login, t.password, {}])).toBe(2);
      expect(await websocketAt(t.domain), `the websocket of ${t.domain} (workers: ${workers})`).toBe(101);
    }
  });

  test("a request naming another tenant's database is refused, whatever names it", async () => {
    const [a, b] = tenants as [(typeof tenants)[number], (typeof tenants)[number]];
    // RPC (which core never filters) with the other tenant's real credentials, through A's domain.
    expect(await rpcThrough(a.domain, 'common', 'authenticate', [b.database, b.login, b.password, {}])).toBe(
      'error: odoo.exceptions.AccessDenied',
    );
    expect(await rpcThrough(a.domain, 'object', 'execute_kw', [b.database, 2, b.password, 'res.users', 'search_count', [[]]])).toBe(
      'error: odoo.exceptions.AccessDenied',
    );
    // The header sent by the client itself: Caddy replaces it, so B's login is unknown where it lands (A).
    const spoofed = await webLogin(a.domain, b.login, b.password, { 'X-Odoo-Database': b.database });
    expect(spoofed).toMatchObject({ form: true, status: 200 });
    expect(
      await rpcThrough(a.domain, 'common', 'authenticate', [b.database, b.login, b.password, {}], { 'X-Odoo-Database': b.database }),
    ).toBe('error: odoo.exceptions.AccessDenied');
    // /web/session/authenticate naming B, through A's domain.
    const named = await throughCaddy(a.domain, '/web/session/authenticate', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', method: 'call', id: 1, params: { db: b.database, login: b.login, password: b.password } }),
    });
    expect(JSON.parse(named.body).error?.data?.name).toBe('odoo.exceptions.AccessError');
    // A's session, carried to B's domain, is not a session there.
    const signedA = await webLogin(a.domain, a.login, a.password);
    expect(signedA).toMatchObject({ session: { db: a.database, uid: 2 } });
    expect(await sessionAt(b.domain, signedA.form ? signedA.cookie : '')).toBe('odoo.http.SessionExpiredException');
    // A's own address (the wildcard site, which drops a client's header) with B's header: still A.
    expect(await webLogin(`${a.database}.${DOMAIN}`, b.login, b.password, { 'X-Odoo-Database': b.database })).toMatchObject({
      form: true,
      status: 200,
    });
    // A crafted X-Forwarded-Host at A's own address: Caddy replaces it, the database stays A's.
    const crafted = await webLogin(`${a.database}.${DOMAIN}`, b.login, b.password, { 'X-Forwarded-Host': `${b.database}.${DOMAIN}` });
    expect(crafted).toMatchObject({ form: true, status: 200 });
    // Databases to manage: refused through the proxy.
    expect(await rpcThrough(a.domain, 'db', 'list', [])).toBe('error: odoo.exceptions.AccessDenied');
  });

  test("the template is not served through the proxy, even with its administrator's password; on the host's loopback only to svc's own calls (the host's secret)", async () => {
    // The worst case: whoever tries knows the template administrator's password (build's random one).
    const password = await templateAdminPassword();
    // Straight to 127.0.0.1 without the secret and without any proxy header (what a tenant's
    // webhook sent by Odoo, or anything else on the host, would send): tenants only.
    expect(await loopbackRpc(src.port, 'common', 'authenticate', [made.templateDb, 'admin', password, {}])).toBe(
      'error: odoo.exceptions.AccessDenied',
    );
    const secret = await hostSecret(f.base, src.port);
    expect(
      await loopbackRpc(src.port, 'common', 'authenticate', [made.templateDb, 'admin', password, {}], { 'X-Svc-Host-Secret': secret }),
    ).toBe(2);
    expect(
      await loopbackRpc(src.port, 'common', 'authenticate', [made.templateDb, 'admin', password, {}], {
        'X-Svc-Host-Secret': `${secret}x`,
      }),
    ).toBe('error: odoo.exceptions.AccessDenied');
    expect(await loopbackRpc(src.port, 'db', 'list', [])).toBe('error: odoo.exceptions.AccessDenied');
    // A tenant is still reached that way (by its own database's credentials).
    const a = tenants[0]!;
    expect(await loopbackRpc(src.port, 'common', 'authenticate', [a.database, a.login, a.password, {}])).toBe(2);
    // The secret never goes through svc's site to Odoo (the site removes it): a client sending it,
    // were it ever known, is still a tenant's request.
    expect(
      await rpcThrough(a.domain, 'common', 'authenticate', [made.templateDb, 'admin', password, {}], { 'X-Svc-Host-Secret': secret }),
    ).toBe('error: odoo.exceptions.AccessDenied');
    expect(await rpcThrough(tenants[0]!.domain, 'common', 'authenticate', [made.templateDb, 'admin', password, {}])).toBe(
      'error: odoo.exceptions.AccessDenied',
    );
    const byAddress = await webLogin(`${made.templateDb}.${DOMAIN}`, 'admin', password);
    expect(byAddress.form).toBe(false);
    expect(await rpcThrough(`${made.templateDb}.${DOMAIN}`, 'common', 'authenticate', [made.templateDb, 'admin', password, {}])).toBe(
      'error: odoo.exceptions.AccessDenied',
    );
  });
  test("a tenant administrator's webhook server action to Odoo's loopback /jsonrpc is refused: no user appears in the template", async () => {
    const a = tenants[0]!;
    const signed = await webLogin(a.domain, a.login, a.password);
    expect(signed).toMatchObject({ session: { db: a.database, uid: 2 } });
    const cookie = signed.form ? signed.cookie : '';
    const intruder = `intruder-${src.series}-${Date.now().toString(36)}`;
    // The webhook posts the fields it is given of the record: a client action's `params` (a dict)
    // becomes the JSON-RPC call's params, naming the template and its administrator's credentials.
    const client = await callKw(a.domain, cookie, 'ir.actions.client', 'create', [
      {
        name: 'webhook payload',
        tag: 'svc_test',
        params: {
          service: 'object',
          method: 'execute_kw',
          args: [made.templateDb, 2, await templateAdminPassword(), 'res.users', 'create', [{ name: 'Intruder', login: intruder }]],
        },
      },
    ]);
    expect(client.error).toBeUndefined();
    const modelId = (await callKw(a.domain, cookie, 'ir.model', 'search', [[['model', '=', 'ir.actions.client']]])).result as number[];
    const fieldId = (
      await callKw(a.domain, cookie, 'ir.model.fields', 'search', [
        [
          ['model', '=', 'ir.actions.client'],
          ['name', '=', 'params'],
        ],
      ])
    ).result as number[];
    const target = async (url: string) => {
      const action = await callKw(a.domain, cookie, 'ir.actions.server', 'create', [
        { name: `webhook to ${url}`, model_id: modelId[0], state: 'webhook', webhook_url: url, webhook_field_ids: [[6, 0, fieldId]] },
      ]);
      expect(action.error).toBeUndefined();
      return callKw(a.domain, cookie, 'ir.actions.server', 'run', [[action.result]], {
        context: { active_id: client.result, active_ids: [client.result], active_model: 'ir.actions.client' },
      });
    };
    const runs: { url: string; error?: string }[] = [];
    for (const url of [
      `http://127.0.0.1:${src.port}/jsonrpc`,
      `http://localhost:${src.port}/jsonrpc`,
      `http://[::ffff:127.0.0.1]:${src.port}/jsonrpc`,
    ]) {
      runs.push({ url, error: (await target(url)).error });
    }
    // 19.0 sends a webhook after the commit: give it the time it would take.
    await new Promise((r) => setTimeout(r, 2000));
    expect(await queryIn(made.templateDb, 'SELECT login FROM res_users WHERE login = $1', [intruder])).toEqual([]);
    for (const run of runs)
      expect(run.error, run.url).toMatch(/Odoo may not connect to .*: it resolves to .*, which is not a public address/);
  });

  test('a header spelled X_Odoo_Database pins nothing: through the documented wildcard site nor a customer domain', async () => {
    const [a, b] = tenants as [(typeof tenants)[number], (typeof tenants)[number]];
    for (const name of ['X_Odoo_Database', 'x_odoo_database', 'X-Odoo_Database', 'X_Odoo-Database']) {
      // A's own address: the wildcard site removes only X-Odoo-Database; the addon drops the rest.
      expect(await webLogin(`${a.database}.${DOMAIN}`, b.login, b.password, { [name]: b.database }), name).toMatchObject({
        form: true,
        status: 200,
      });
      expect(await webLogin(a.domain, b.login, b.password, { [name]: b.database }), name).toMatchObject({ form: true, status: 200 });
    }
  });

  test('/web/database/* answers 404 through the proxy (and to any request without the secret)', async () => {
    const a = tenants[0]!;
    for (const host of [a.domain, `${a.database}.${DOMAIN}`, `${made.templateDb}.${DOMAIN}`]) {
      for (const url of [
        '/web/database/manager',
        '/web/database/selector',
        '/web/database/list',
        '/web/database/backup',
        '/web/database',
      ]) {
        expect((await throughCaddy(host, url)).status, `${host}${url}`).toBe(404);
      }
      const posted = await throughCaddy(host, '/web/database/list', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{}',
      });
      expect(posted.status).toBe(404);
    }
    expect((await odooGet(src.port, '/web/database/manager')).status).toBe(404);
    // The web client itself still answers.
    expect((await throughCaddy(a.domain, '/web/login')).status).toBe(200);
  });

  test("Odoo's logs are root's and odoo's only; a host set up before converges at the next setup_odoo", async () => {
    const logs = `${f.base}/logs`;
    const stat = (p: string) => execFileSync('stat', ['-c', '%U:%G %a', p], { encoding: 'utf8' }).trim();
    // As `user`: "yes" or "no" as the command succeeds; setpriv itself failing (an unknown group) throws.
    const as = (user: string, group: string, cmd: string) =>
      execFileSync('sh', ['-c', `setpriv --reuid=${user} --regid=${group} --init-groups -- sh -c '${cmd} && echo yes || echo no'`], {
        encoding: 'utf8',
      }).trim();
    expect(stat(logs)).toBe('root:odoo 750');
    expect(as('odoo', 'odoo', `cat ${logs}/odoo-${src.port}.log >/dev/null`)).toBe('yes');
    expect(as('nobody', 'nogroup', 'true')).toBe('yes');
    expect(as('nobody', 'nogroup', `cat ${logs}/odoo-${src.port}.log >/dev/null 2>&1`)).toBe('no');
    expect(as('nobody', 'nogroup', `ls ${logs} >/dev/null 2>&1`)).toBe('no');

    // As a host set up before left them: the directory and a log readable by everyone.
    execFileSync('sh', ['-c', `chmod 755 ${logs} && echo old > ${logs}/old.log && chmod 644 ${logs}/old.log`]);
    const again = await f.runJob(made.host, 'setup_odoo', setupBody());
    expect(again.state, JSON.stringify(again)).toBe('completed');
    expect(stat(logs)).toBe('root:odoo 750');
    expect(stat(`${logs}/old.log`)).toBe('root:odoo 640');
    await rm(`${logs}/old.log`);
  });

  test("a tenant administrator's webhook to Caddy's admin API on the host's loopback is refused: Caddy keeps serving", async () => {
    const a = tenants[0]!;
    const signed = await webLogin(a.domain, a.login, a.password);
    const cookie = signed.form ? signed.cookie : '';
    const modelId = (await callKw(a.domain, cookie, 'ir.model', 'search', [[['model', '=', 'res.partner']]])).result as number[];
    const action = await callKw(a.domain, cookie, 'ir.actions.server', 'create', [
      { name: 'stop Caddy', model_id: modelId[0], state: 'webhook', webhook_url: `http://127.0.0.1:${CADDY.admin}/stop` },
    ]);
    expect(action.error).toBeUndefined();
    // What /stop would do: every customer domain of the host down until an operator acts.
    const stop = await callKw(a.domain, cookie, 'ir.actions.server', 'run', [[action.result]], {
      context: { active_id: 1, active_ids: [1], active_model: 'res.partner' },
    });
    await new Promise((r) => setTimeout(r, 2000));
    expect(caddy.proc?.exitCode).toBeNull();
    expect(await sessionAt(a.domain, cookie)).toEqual({ db: a.database, uid: 2 });
    expect(stop.error).toMatch(/which is not a public address/);
  });
});
