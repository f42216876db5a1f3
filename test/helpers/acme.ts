// A private ACME setup on loopback for the customer-domain tests and bench: Pebble (Let's
// Encrypt's test ACME server) and pebble-challtestsrv as the DNS server both Pebble and the
// service ask (records added through its management API), each on free loopback ports. Pebble
// validates on ports 80 and 443 of 127.0.0.1, where Caddy (run as root by the service over SSH)
// listens: only one such Caddy can run on the machine, so its users hold the machine-wide lock
// below for as long as they use it, and put the machine's Caddy back as they found it.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { CADDY_ADMIN_SOCKET } from '../../src/servers/caddy.js';
import { freePort } from './sshd.js';

const run = promisify(execFile);

export interface AcmeLab {
  /** host:port of the DNS server (for DNS_CLOUDFLARE_SERVERS). */
  dns: string;
  /** Pebble's ACME directory (ACME_CA_URL). */
  directory: string;
  /** The PEM of Pebble's own HTTPS certificate (ACME_CA_ROOT_PEM). */
  listenerRootFile: string;
  /** Answers A queries for `host` with `addresses` (replacing earlier ones). */
  setA(host: string, addresses: string[]): Promise<void>;
  clearA(host: string): Promise<void>;
  /** The PEM of the root that signs the certificates Pebble issues (for checking a served chain). */
  issuingRoot(): Promise<string>;
  /** Pebble's own output so far. */
  logText(): string;
  stop(): Promise<void>;
}

export interface AcmeLabOptions {
  /** Host names Pebble refuses to issue for (rejectedIdentifier). */
  refused?: string[];
  /** Validity of the certificates Pebble issues (default 5 years). */
  validitySeconds?: number;
}

async function waitForPort(port: number, proc: ChildProcess, output: () => string) {
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    if (proc.exitCode !== null) throw new Error(`exited with ${proc.exitCode}:\n${output()}`);
    const ok = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1', () => {
        socket.end();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`nothing listens on ${port}:\n${output()}`);
}

function start(cmd: string, args: string[], env: NodeJS.ProcessEnv = {}) {
  const proc = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  let text = '';
  proc.stdout!.on('data', (c: Buffer) => (text += c.toString()));
  proc.stderr!.on('data', (c: Buffer) => (text += c.toString()));
  return { proc, output: () => text };
}

async function stopProcess(proc: ChildProcess) {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  const exited = new Promise((r) => proc.once('exit', r));
  proc.kill('SIGTERM');
  await exited;
}

export async function startAcmeLab(opts: AcmeLabOptions = {}): Promise<AcmeLab> {
  const dir = await mkdtemp(path.join(tmpdir(), 'svc-acme-'));
  const cert = path.join(dir, 'pebble-cert.pem');
  const key = path.join(dir, 'pebble-key.pem');
  await run('openssl', [
    ...['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '7'],
    ...['-keyout', key, '-out', cert, '-subj', '/CN=pebble', '-addext', 'subjectAltName=IP:127.0.0.1'],
  ]);
  const [dnsPort, challMgmt, acmePort, acmeMgmt] = [await freePort(), await freePort(), await freePort(), await freePort()];
  const config = {
    pebble: {
      listenAddress: `127.0.0.1:${acmePort}`,
      managementListenAddress: `127.0.0.1:${acmeMgmt}`,
      certificate: cert,
      privateKey: key,
      httpPort: 80,
      tlsPort: 443,
      ocspResponderURL: '',
      externalAccountBindingRequired: false,
      domainBlocklist: opts.refused ?? [],
      ...(opts.validitySeconds ? { certificateValidityPeriod: opts.validitySeconds } : {}),
    },
  };
  await writeFile(path.join(dir, 'pebble.json'), JSON.stringify(config));

  // No default answers: a name resolves only once a test adds its record.
  const chall = start('pebble-challtestsrv', [
    ...['-dns01', `127.0.0.1:${dnsPort}`, '-http01', '', '-https01', '', '-tlsalpn01', ''],
    ...['-management', `127.0.0.1:${challMgmt}`, '-defaultIPv4', '', '-defaultIPv6', ''],
  ]);
  await waitForPort(challMgmt, chall.proc, chall.output);
  const pebble = start('pebble', ['-config', path.join(dir, 'pebble.json'), '-dnsserver', `127.0.0.1:${dnsPort}`], {
    PEBBLE_VA_NOSLEEP: '1',
  });
  await waitForPort(acmePort, pebble.proc, pebble.output);

  const manage = async (what: string, body: object) => {
    const res = await fetch(`http://127.0.0.1:${challMgmt}/${what}`, { method: 'POST', body: JSON.stringify(body) });
    if (!res.ok) throw new Error(`challtestsrv ${what}: ${res.status} ${await res.text()}`);
  };
  const fqdn = (host: string) => `${host}.`;

  return {
    dns: `127.0.0.1:${dnsPort}`,
    directory: `https://127.0.0.1:${acmePort}/dir`,
    listenerRootFile: cert,
    async setA(host, addresses) {
      await manage('clear-a', { host: fqdn(host) });
      await manage('add-a', { host: fqdn(host), addresses });
    },
    clearA: (host) => manage('clear-a', { host: fqdn(host) }),
    async issuingRoot() {
      // Pebble's management API is HTTPS with the listener certificate.
      const { stdout } = await run('curl', ['-sf', '--cacert', cert, `https://127.0.0.1:${acmeMgmt}/roots/0`]);
      return stdout;
    },
    logText: pebble.output,
    async stop() {
      await stopProcess(pebble.proc);
      await stopProcess(chall.proc);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

const LOCK = path.join(tmpdir(), 'svc-caddy-machine.lock');
const CADDY_DIR = '/etc/caddy';
const SITES = `${CADDY_DIR}/svc.d`;

export interface CaddyMachine {
  /** Stops the Caddy the service started, removes what it wrote, puts the Caddyfile back, frees the lock. */
  release(): Promise<void>;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Takes the machine's Caddy (ports 80, 443 and 2019) for one test file or bench, waiting for another
 * holder to finish; a lock left by a process that died is taken over. No Caddy may be running.
 */
export async function takeCaddyMachine(timeoutMs = 10 * 60_000): Promise<CaddyMachine> {
  const me = `${process.pid}-${randomBytes(4).toString('hex')}`;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      await mkdir(LOCK);
      await writeFile(path.join(LOCK, 'owner'), me);
      await writeFile(path.join(LOCK, 'pid'), String(process.pid));
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const pid = Number(await readFile(path.join(LOCK, 'pid'), 'utf8').catch(() => '0'));
      const age = Date.now() - (await stat(LOCK).catch(() => ({ mtimeMs: Date.now() }))).mtimeMs;
      if ((pid > 0 && !alive(pid)) || (pid === 0 && age > 10_000)) {
        await rm(LOCK, { recursive: true, force: true });
        await stopCaddy(); // its Caddy may still run
        continue;
      }
      if (Date.now() > deadline) throw new Error(`The machine's Caddy is held by process ${pid} (${LOCK})`);
      await new Promise((r) => setTimeout(r, 500));
    }
  }
  const caddyfile = await readFile(`${CADDY_DIR}/Caddyfile`, 'utf8').catch(() => null);
  await clearSites();
  return {
    async release() {
      await stopCaddy();
      await clearSites();
      await rm(`${CADDY_DIR}/svc-acme-ca-root.pem`, { force: true });
      await rm(`${CADDY_DIR}/Caddyfile.before-svc`, { force: true });
      if (caddyfile !== null) await writeFile(`${CADDY_DIR}/Caddyfile`, caddyfile);
      await forgetPebbleCertificates();
      if ((await readFile(path.join(LOCK, 'owner'), 'utf8').catch(() => '')) === me) await rm(LOCK, { recursive: true, force: true });
    },
  };
}

/** `caddy stop` through its admin API: svc's socket, else Caddy's default address (no Caddy running: nothing to do). */
async function stopCaddy() {
  await run('caddy', ['stop', '--address', `unix/${CADDY_ADMIN_SOCKET}`]).catch(() => {});
  await run('caddy', ['stop']).catch(() => {});
}

async function clearSites() {
  if (!existsSync(SITES)) return;
  for (const name of await readdir(SITES)) await rm(path.join(SITES, name), { force: true });
}

/** Certificates and ACME accounts Caddy kept for Pebble servers (named after 127.0.0.1-<port>-dir). */
async function forgetPebbleCertificates() {
  for (const base of ['/root/.local/share/caddy/certificates', '/root/.local/share/caddy/acme']) {
    if (!existsSync(base)) continue;
    for (const name of await readdir(base)) {
      if (/^127\.0\.0\.1-\d+-dir$/.test(name)) await rm(path.join(base, name), { recursive: true, force: true });
    }
  }
}
