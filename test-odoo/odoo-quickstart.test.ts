// The README's quick start as written (issue 50): a fresh `git clone` of this repository, then the
// commands of the README's "Quick start" block, taken from the clone's README and run with bash in
// the clone one after the other (`npm start` left running), against the real Odoo of ODOO_SOURCE;
// then a visitor in Chromium fills the trial form, enters the code of the mail svc wrote to
// data/mail, and signs in to their Odoo through the proxy at the address the ready mail gives.
// Prints the number of commands and the minutes. Then quickstart again: nothing it made changes.
//
// What differs from a user's machine, and only that: the settings of the README's one place
// (PORT, BASE_URL, SUBSCRIPTION_URL and STAGING_URL, ODOO_HTTP_PORT, ODOO_BASE_PATH) and svc's database, Redis
// prefix and master key come from the environment (so this run keeps to its ports, 20800-20999,
// and its own database); "this machine" is the tests' sshd (its sudo NOPASSWD user and its
// authorized_keys file, named by quickstart's documented --ssh-port/--ssh-user/--authorized-keys,
// appended to the quickstart line); `npm install` runs as written, with npm's cache.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { clusterSnapshot, dropWhatWasMade, type ClusterSnapshot } from '../test/helpers/cluster-cleanup.js';
import { credentialsIn } from '../test/helpers/customer-credentials.js';
import { describeOdooSource, odooSourceFiles } from '../test/helpers/odoo-source.js';
import { databaseUrl, REDIS_URL } from '../test/helpers/pg.js';
import { codeFrom, textOf, type ReceivedMail } from '../test/helpers/smtp.js';
import { childEnv } from '../test/helpers/spawn.js';
import { TEST_USERS, useSshd } from '../test/helpers/sshd.js';

const PORTS = { svc: 20800, odoo: 20869, proxy: 20880 };
const REPOSITORY = path.resolve(import.meta.dirname, '..');
const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run'];

const source = describeOdooSource(odooSourceFiles(process.env.ODOO_SOURCE)[0]!);
const sshd = useSshd();
const svcDb = `${inject('dbRun')}_quickstart_${randomBytes(3).toString('hex')}`;
let work: string;
let clone: string;
let before: ClusterSnapshot;
let service: ChildProcess | null = null;
let serviceOutput = '';
let browser: Browser | null = null;

const env = () => ({
  ODOO_SOURCE: source.file,
  DATABASE_URL: databaseUrl(svcDb),
  REDIS_URL,
  QUEUE_PREFIX: svcDb,
  PORT: String(PORTS.svc),
  HOST: '127.0.0.1',
  BASE_URL: `http://localhost:${PORTS.svc}`,
  SUBSCRIPTION_URL: `http://{database_name}.localhost:${PORTS.proxy}`,
  STAGING_URL: `http://{database_name}.staging.localhost:${PORTS.proxy + 1}`,
  ODOO_HTTP_PORT: String(PORTS.odoo),
  ODOO_BASE_PATH: path.join(work, 'odoo'),
  ODOO_HEALTH_TIMEOUT_MS: '180000',
});
const thisMachine = () =>
  ` --ssh-port ${sshd.port} --ssh-user ${TEST_USERS.sudoNoPassword.name} --authorized-keys ${path.join(sshd.dir, 'authorized_keys', TEST_USERS.sudoNoPassword.name)}`;

/** The commands of the README's Quick start: the lines of its first ```sh block (the later ones run the tests). */
function quickStartCommands(readme: string): string[] {
  const start = readme.indexOf('\n## Quick start\n');
  expect(start).toBeGreaterThan(-1);
  const section = readme.slice(start, readme.indexOf('\n## ', start + 1));
  const blocks = [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
  expect(blocks[0]).toContain(' quickstart ');
  return blocks[0]!.split('\n').filter((l) => l.trim() !== '' && !l.trim().startsWith('#'));
}

/** One command line with bash in the clone; its output kept; rejects on a non-zero exit. */
function run(line: string, timeoutMs = 15 * 60_000): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-e', '-o', 'pipefail', '-c', line], {
      cwd: clone,
      env: childEnv(env()),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      if (code === 0) resolve(out);
      else reject(new Error(`${line}\nexited with ${code}:\n${out.slice(-6000)}`));
    });
  });
}

/** `npm start` as the README says, in its own process group (stopped by its id after the test). */
function start(line: string): Promise<void> {
  service = spawn('bash', ['-c', line], { cwd: clone, env: childEnv(env()), stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  return new Promise((resolve, reject) => {
    const read = (c: Buffer) => {
      serviceOutput += c.toString();
      if (serviceOutput.includes('"msg":"svc started"')) resolve();
    };
    service!.stdout!.on('data', read);
    service!.stderr!.on('data', read);
    service!.once('exit', (code) => reject(new Error(`${line} exited with ${code}:\n${serviceOutput.slice(-4000)}`)));
  });
}

/** The newest mail to `to` in the clone's MAIL_DIR (data/mail) matching `test`, waited for. */
async function mailTo(to: string, test: (raw: string) => boolean, timeoutMs: number): Promise<ReceivedMail> {
  const dir = path.join(clone, 'data', 'mail');
  const until = Date.now() + timeoutMs;
  for (;;) {
    const files = existsSync(dir)
      ? (await readdir(dir))
          .filter((f) => f.endsWith('.eml'))
          .sort()
          .reverse()
      : [];
    for (const file of files) {
      const raw = await readFile(path.join(dir, file), 'utf8');
      if (new RegExp(`^To: .*${to.replace(/[.@]/g, '\\$&')}`, 'mi').test(raw) && test(raw)) return { raw } as ReceivedMail;
    }
    if (Date.now() > until) throw new Error(`no mail to ${to} in ${dir} (${files.length} files)`);
    await new Promise((r) => setTimeout(r, 1000));
  }
}

/** What quickstart made, as svc's database holds it (root servers without what monitoring updates). */
async function records() {
  const client = new pg.Client({ connectionString: databaseUrl(svcDb) });
  await client.connect();
  try {
    const rows = async (sql: string) => (await client.query(sql)).rows;
    return {
      root_servers: await rows(
        'SELECT id, ip, port, username, key, state, host_key, odoo_state, odoo_version_id, odoo_http_port, odoo_postgresql_server_id, odoo_db_user FROM root_servers ORDER BY id',
      ),
      postgresql_servers: await rows('SELECT * FROM postgresql_servers ORDER BY id'),
      odoo_versions: await rows('SELECT * FROM odoo_versions ORDER BY id'),
      database_templates: await rows('SELECT * FROM database_templates ORDER BY id'),
      trial_packages: await rows('SELECT * FROM trial_packages ORDER BY id'),
      users: await rows('SELECT * FROM users ORDER BY id'),
    };
  } finally {
    await client.end();
  }
}

/** Whether a Caddy runs on this machine (setup_proxy starts the system's one when none does). */
function caddyRuns(): boolean {
  try {
    execFileSync('pgrep', ['-x', 'caddy'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}
let caddyBefore = true;

beforeAll(async () => {
  caddyBefore = caddyRuns();
  before = await clusterSnapshot();
  work = await mkdtemp(path.join(tmpdir(), 'svc-quickstart-'));
  await chmod(work, 0o755);
  clone = path.join(work, 'svc');
});

afterAll(async () => {
  await browser?.close();
  // Odoo stopped through svc's API (the service still runs), then the service by its process group.
  const token = /\n(svc_[A-Za-z0-9_-]+)\s*$/.exec(quickstartOutput)?.[1];
  const host = /root server (\d+)/.exec(quickstartOutput)?.[1];
  if (token && host && service) {
    const api = (url: string, method = 'GET') =>
      fetch(`http://127.0.0.1:${PORTS.svc}/api/v1/${url}`, { method, headers: { authorization: `Bearer ${token}` } });
    // Until its job ends (at most a minute), not a fixed wait.
    const stop = await api(`root-servers/${host}/actions/stop_odoo`, 'POST').catch(() => null);
    const jobId = stop?.ok ? ((await stop.json()) as { job_id?: string }).job_id : undefined;
    if (jobId) {
      await vi
        .waitFor(
          async () => {
            const { state } = (await (await api(`jobs/${jobId}`)).json()) as { state: string };
            if (state !== 'completed' && state !== 'failed') throw new Error(`stop_odoo still ${state}`);
          },
          { timeout: 60_000, interval: 250 },
        )
        .catch((err: Error) => console.error(`Odoo was not stopped: ${err.message}`));
    }
  }
  if (service?.pid && service.exitCode === null) {
    const exited = new Promise((r) => service!.once('exit', r));
    process.kill(-service.pid, 'SIGTERM');
    await Promise.race([exited, new Promise((r) => setTimeout(r, 60_000))]);
  }
  // The Caddy setup_proxy started for this run, when none ran before it (through its admin socket).
  if (!caddyBefore && caddyRuns()) {
    try {
      execFileSync('caddy', ['stop', '--address', 'unix//var/lib/caddy/svc-admin/admin.sock'], { stdio: 'ignore' });
    } catch {
      console.error('the Caddy setup_proxy started could not be stopped through its admin socket');
    }
  }
  const problems = await dropWhatWasMade([svcDb], before);
  if (problems.length > 0) console.error(`not dropped:\n  ${problems.join('\n  ')}`);
  if (work) await rm(work, { recursive: true, force: true });
}, 5 * 60_000);

let quickstartOutput = '';

describe(`the README's quick start on Odoo ${source.name}`, () => {
  it('from a fresh clone to a visitor signed in to their Odoo through the proxy, as written', async () => {
    const began = Date.now();
    execFileSync('git', ['clone', '--quiet', REPOSITORY, clone]);
    const commands = quickStartCommands(await readFile(path.join(clone, 'README.md'), 'utf8'));
    expect(commands.length, 'commands after git clone').toBeLessThanOrEqual(4);
    const took: string[] = [];
    for (const line of commands) {
      const at = Date.now();
      if (line.trim() === 'npm start') await start(line);
      else if (line.includes(' quickstart ')) quickstartOutput = await run(line + thisMachine());
      else await run(line);
      took.push(`${line.split(' ').slice(0, 4).join(' ')}: ${((Date.now() - at) / 60_000).toFixed(1)} min`);
    }
    const trialUrl = /The trial form: (\S+)/.exec(quickstartOutput)?.[1];
    expect(trialUrl, quickstartOutput).toBe(`http://localhost:${PORTS.svc}/saas/trial/odoo`);

    browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: CHROMIUM_ARGS });
    const page = await (await browser.newContext()).newPage();
    const email = `visitor-${randomBytes(3).toString('hex')}@example.com`;
    await page.goto(trialUrl!);
    await page.getByLabel('Your name').fill('Vera Visitor');
    await page.getByLabel('Company name').fill('Visitor GmbH');
    await page.getByLabel('E-mail address').fill(email);
    await page.getByLabel('Mobile number').fill('+49 170 5550101');
    await page.getByLabel('Company size').selectOption('1-5');
    await page.getByRole('button', { name: 'Send me the code' }).click();
    const code = codeFrom(await mailTo(email, (raw) => /^ {4}\d{6}\r?$/m.test(raw), 60_000));
    await page.getByLabel('Verification code').fill(code);
    await page.getByRole('button', { name: 'Confirm' }).click();

    // The trial page follows the deployment and, once ready, posts its one-time sign-in link to the
    // instance: the visitor lands in their Odoo through the proxy, signed in.
    await page.waitForURL((url) => url.host.endsWith(`.localhost:${PORTS.proxy}`), { timeout: 10 * 60_000 });
    await page.locator('.o_main_navbar').waitFor({ timeout: 5 * 60_000 });
    const ready = textOf(await mailTo(email, (raw) => /Login: /.test(textOf({ raw } as ReceivedMail)), 60_000));
    const address = new RegExp(`http://[a-z0-9_]+\\.localhost:${PORTS.proxy}`).exec(ready)?.[0];
    expect(address, ready).toBeTruthy();
    expect(new URL(page.url()).host, 'the mailed address').toBe(new URL(address!).host);
    expect(credentialsIn(ready).login).toBe(email);
    const minutes = (Date.now() - began) / 60_000;
    console.log(
      `README quick start: git clone + ${commands.length} commands, a visitor signed in after ${minutes.toFixed(1)} min (${took.join('; ')})`,
    );

    // Again, with everything right: nothing it made changes.
    const made = await records();
    const again = await run(commands.find((l) => l.includes(' quickstart '))! + thisMachine());
    expect(again).toMatch(/Odoo on root server \d+: already running/);
    expect(again).not.toMatch(/created|put right|built by Odoo/);
    expect(await records()).toEqual(made);
  });
});
