// A real OpenSSH server for tests: Debian's /usr/sbin/sshd run in the foreground on 127.0.0.1 and a
// free port, with its own host key, config and authorized keys in a temporary directory (never the
// system's port 22 or config). The test users it logs in are real system accounts, created when
// missing (tests run as root): a password user, a key user, a sudo NOPASSWD user and two sudo users
// that need their password (entries in /etc/sudoers.d). Fixed passwords: these accounts exist only
// for tests and only this loopback server lets them in (AllowUsers).
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { createHash, createPublicKey, generateKeyPairSync } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { SshTarget } from '../../src/core/ssh.js';
import { afterAll, beforeAll } from 'vitest';

export const SSHD_BIN = '/usr/sbin/sshd';

export interface TestUser {
  name: string;
  password: string;
}

export const TEST_USERS = {
  /** Logs in with its password (and the harness keys). */
  password: { name: 'svc_t_pw', password: 'Pw-svc-t-3c91e7' },
  /** Logs in with a key; its password is unusable for SSH ('*'). */
  key: { name: 'svc_t_key', password: '' },
  /** May run any command with `sudo -n` (NOPASSWD). */
  sudoNoPassword: { name: 'svc_t_sudo_np', password: 'Pw-svc-t-5b02d4' },
  /** May run any command with sudo after giving its password. */
  sudoPassword: { name: 'svc_t_sudo_pw', password: 'Pw-svc-t-8e4af0' },
  /**
   * As sudoPassword, for the one test file (test/ssh.test.ts) that plants fake sudo programs in its
   * start-up files and PATH: no other test may rely on its home.
   */
  sudoPlanted: { name: 'svc_t_sudo_pl', password: 'Pw-svc-t-2d7c19' },
} as const satisfies Record<string, TestUser>;

/** A root server's login fields for the password user. */
export const passwordLogin = () => ({ username: TEST_USERS.password.name, password: TEST_USERS.password.password });

/** A root server's login fields for the key user, with a key `sshd` authorizes. */
export const keyLogin = (sshd: Sshd) => ({ username: TEST_USERS.key.name, key: sshd.keys.ed25519Openssh });

/** A connection target for core/ssh.ts: the password user of `sshd` unless `over` says otherwise. */
export const sshTarget = (sshd: Sshd, over: Partial<SshTarget> = {}): SshTarget => ({
  host: sshd.host,
  port: sshd.port,
  username: TEST_USERS.password.name,
  password: TEST_USERS.password.password,
  privateKey: null,
  sudo: 'none',
  knownHostKey: null,
  ...over,
});

/** Private keys authorized for every test user of a harness. */
export interface TestKeys {
  rsaOpenssh: string;
  rsaPem: string;
  ed25519Openssh: string;
  /** PKCS#8 PEM, the only PEM form an Ed25519 key has. */
  ed25519Pem: string;
  /** A key sshd does not authorize. */
  unauthorized: string;
  /** An authorized key protected by the passphrase "secret-passphrase". */
  encrypted: string;
  /** The public half of ed25519Openssh (not usable to log in). */
  publicKey: string;
}

export interface SshdOptions {
  /** Connections that may be mid-handshake at once (sshd MaxStartups). */
  maxStartups?: number;
  /** Channels per connection (sshd MaxSessions). */
  maxSessions?: number;
}

export interface Sshd {
  host: string;
  port: number;
  /** The host key as svc records it: "<algorithm> SHA256:<base64>". */
  hostKey: string;
  keys: TestKeys;
  /** The temporary directory holding config, keys and logs. */
  dir: string;
  /** sshd's log lines so far (stderr, -e). */
  logText(): string;
  /** Accepted logins of `user` so far (sshd's log). */
  logins(user: string): number;
  /**
   * Stops and starts again on the same port, with a fresh host key when asked. Open connections
   * survive a restart (their sshd processes go on) unless `dropConnections` ends them too.
   */
  restart(opts?: { newHostKey?: boolean; dropConnections?: boolean }): Promise<void>;
  /** Freezes (SIGSTOP) or thaws (SIGCONT) the sshd processes of open connections: a server that stops answering. */
  freezeConnections(frozen: boolean): Promise<void>;
  stop(): Promise<void>;
}

function run(cmd: string, args: string[], input?: string): string {
  return execFileSync(cmd, args, { encoding: 'utf8', input, stdio: ['pipe', 'pipe', 'pipe'] });
}

/**
 * Runs `fn` while holding a lock shared by every test process (mkdir is atomic): useradd and
 * chpasswd refuse to run while another process holds /etc/passwd or /etc/shadow.
 */
async function withUsersLock<T>(fn: () => Promise<T>): Promise<T> {
  const lock = path.join(tmpdir(), 'svc-test-users.lock');
  for (;;) {
    try {
      await mkdir(lock);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const age = Date.now() - (await stat(lock).catch(() => ({ mtimeMs: Date.now() }))).mtimeMs;
      if (age > 60_000) await rm(lock, { recursive: true, force: true }); // left by a killed process
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  try {
    return await fn();
  } finally {
    await rm(lock, { recursive: true, force: true });
  }
}

/** Creates the test users and their sudoers entries when missing; safe to run concurrently. */
export async function ensureTestUsers(): Promise<void> {
  await withUsersLock(createTestUsers);
}

async function createTestUsers(): Promise<void> {
  for (const user of Object.values(TEST_USERS)) {
    try {
      run('useradd', ['-m', '-s', '/bin/bash', user.name]);
    } catch (err) {
      if ((err as { status?: number }).status !== 9) throw err; // 9: already exists
    }
    if (user.password) run('chpasswd', [], `${user.name}:${user.password}\n`);
    else run('usermod', ['-p', '*', user.name]);
  }
  const sudoers =
    `${TEST_USERS.sudoNoPassword.name} ALL=(ALL) NOPASSWD: ALL\n` +
    `${TEST_USERS.sudoPassword.name} ALL=(ALL) ALL\n` +
    `${TEST_USERS.sudoPlanted.name} ALL=(ALL) ALL\n`;
  const file = '/etc/sudoers.d/svc-test-users';
  if (existsSync(file) && (await readFile(file, 'utf8')) === sudoers) return;
  // sudo ignores files whose name contains a dot, so the temporary file is never half-read.
  const tmp = `${file}.${process.pid}.tmp`;
  await writeFile(tmp, sudoers, { mode: 0o440 });
  run('visudo', ['-cqf', tmp]);
  await rename(tmp, file);
}

/** A loopback port with nothing listening on it (bound, then released). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** "<algorithm> SHA256:<base64 without padding>" of an OpenSSH public key line. */
export function fingerprintOfPublicKey(line: string): string {
  const [algorithm, blob] = line.trim().split(/\s+/);
  const digest = createHash('sha256').update(Buffer.from(blob!, 'base64')).digest('base64').replace(/=+$/, '');
  return `${algorithm} SHA256:${digest}`;
}

function sshString(data: Buffer | string): Buffer {
  const body = Buffer.isBuffer(data) ? data : Buffer.from(data);
  const len = Buffer.alloc(4);
  len.writeUInt32BE(body.length);
  return Buffer.concat([len, body]);
}

async function generateKeys(dir: string): Promise<{ keys: TestKeys; authorized: string }> {
  const keygen = async (name: string, args: string[]) => {
    const file = path.join(dir, name);
    run('ssh-keygen', ['-q', '-N', '', '-C', name, '-f', file, ...args]);
    return { priv: await readFile(file, 'utf8'), pub: await readFile(`${file}.pub`, 'utf8') };
  };
  const rsaOpenssh = await keygen('rsa_openssh', ['-t', 'rsa', '-b', '2048']);
  const rsaPem = await keygen('rsa_pem', ['-t', 'rsa', '-b', '2048', '-m', 'PEM']);
  const ed25519 = await keygen('ed25519', ['-t', 'ed25519']);
  const unauthorized = await keygen('unauthorized', ['-t', 'ed25519']);
  const encrypted = await keygen('encrypted', ['-t', 'ed25519']);
  run('ssh-keygen', ['-q', '-p', '-N', 'secret-passphrase', '-f', path.join(dir, 'encrypted')]);
  const pkcs8 = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const raw = Buffer.from(createPublicKey(pkcs8).export({ format: 'jwk' }).x!, 'base64url');
  const pkcs8Pub = `ssh-ed25519 ${Buffer.concat([sshString('ssh-ed25519'), sshString(raw)]).toString('base64')} ed25519_pem`;
  return {
    keys: {
      rsaOpenssh: rsaOpenssh.priv,
      rsaPem: rsaPem.priv,
      ed25519Openssh: ed25519.priv,
      ed25519Pem: pkcs8,
      unauthorized: unauthorized.priv,
      encrypted: await readFile(path.join(dir, 'encrypted'), 'utf8'),
      publicKey: ed25519.pub,
    },
    authorized: `${[rsaOpenssh.pub, rsaPem.pub, ed25519.pub, encrypted.pub, pkcs8Pub].map((l) => l.trim()).join('\n')}\n`,
  };
}

async function writeHostKey(dir: string): Promise<string> {
  const file = path.join(dir, 'host_ed25519');
  await rm(file, { force: true });
  await rm(`${file}.pub`, { force: true });
  run('ssh-keygen', ['-q', '-N', '', '-t', 'ed25519', '-C', 'svc-test-host', '-f', file]);
  return fingerprintOfPublicKey(await readFile(`${file}.pub`, 'utf8'));
}

/** Every process below `root` (sshd's per-connection monitor, its session child, their commands). */
async function descendantPids(root: number): Promise<number[]> {
  const parentOf = new Map<number, number>();
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '');
    // "pid (comm) state ppid ...": comm may hold spaces, so read after the last ')'.
    if (stat) parentOf.set(Number(entry), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
  }
  const found = new Set([root]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const [pid, ppid] of parentOf) {
      if (found.has(ppid) && !found.has(pid)) {
        found.add(pid);
        grew = true;
      }
    }
  }
  found.delete(root);
  return [...found];
}

export async function startSshd(opts: SshdOptions = {}): Promise<Sshd> {
  if (!existsSync(SSHD_BIN)) throw new Error(`${SSHD_BIN} is missing: apt-get install -y openssh-server (see .ci/run)`);
  await ensureTestUsers();
  await mkdir('/run/sshd', { recursive: true, mode: 0o755 }); // privilege separation directory
  const dir = await mkdtemp(path.join(tmpdir(), 'svc-sshd-'));
  await chmod(dir, 0o755);
  const { keys, authorized } = await generateKeys(dir);
  await mkdir(path.join(dir, 'authorized_keys'), { mode: 0o755 });
  for (const user of Object.values(TEST_USERS)) {
    await writeFile(path.join(dir, 'authorized_keys', user.name), authorized, { mode: 0o644 });
  }
  const port = await freePort();
  const config = [
    `Port ${port}`,
    'ListenAddress 127.0.0.1',
    `HostKey ${path.join(dir, 'host_ed25519')}`,
    'PidFile none',
    // No PAM: containers lack the login session plumbing; sshd checks /etc/shadow itself.
    'UsePAM no',
    'PasswordAuthentication yes',
    'KbdInteractiveAuthentication no',
    'PubkeyAuthentication yes',
    `AuthorizedKeysFile ${path.join(dir, 'authorized_keys', '%u')}`,
    // The authorized keys live under /tmp (world-writable), which StrictModes would refuse.
    'StrictModes no',
    'PermitRootLogin no',
    `AllowUsers ${Object.values(TEST_USERS)
      .map((u) => u.name)
      .join(' ')}`,
    `MaxStartups ${opts.maxStartups ?? 50}`,
    `MaxSessions ${opts.maxSessions ?? 20}`,
    // As Debian's own sshd_config: the backup server's SFTP repositories (restic over ssh -s sftp).
    'Subsystem sftp internal-sftp',
    'LogLevel INFO',
    '',
  ].join('\n');
  const configFile = path.join(dir, 'sshd_config');
  await writeFile(configFile, config);

  let hostKey = await writeHostKey(dir);
  let child: ChildProcess | null = null;
  let log = '';

  async function launch(): Promise<void> {
    run(SSHD_BIN, ['-t', '-f', configFile]);
    const proc = spawn(SSHD_BIN, ['-D', '-e', '-f', configFile], { stdio: ['ignore', 'ignore', 'pipe'] });
    child = proc;
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`sshd did not start:\n${log}`)), 10_000);
      proc.stderr!.on('data', (chunk: Buffer) => {
        log += chunk.toString();
        if (log.includes(`Server listening on 127.0.0.1 port ${port}`)) {
          clearTimeout(timer);
          resolve();
        }
      });
      proc.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`sshd exited with ${code}:\n${log}`));
      });
    });
  }

  async function halt(dropConnections = false): Promise<void> {
    const proc = child;
    child = null;
    if (!proc || proc.exitCode !== null) return;
    // The per-connection sshd processes (and their commands) run below the one this harness started.
    const sessions = dropConnections ? await descendantPids(proc.pid!) : [];
    const exited = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGTERM');
    await exited;
    for (const pid of sessions) {
      try {
        process.kill(pid, 'SIGTERM');
      } catch {
        /* already gone */
      }
    }
  }

  await launch();
  return {
    host: '127.0.0.1',
    port,
    get hostKey() {
      return hostKey;
    },
    keys,
    dir,
    logText: () => log,
    logins: (user) => log.split('\n').filter((l) => l.includes('Accepted') && l.includes(` for ${user} from`)).length,
    async restart({ newHostKey = false, dropConnections = false } = {}) {
      await halt(dropConnections);
      if (newHostKey) hostKey = await writeHostKey(dir);
      await launch();
    },
    async freezeConnections(frozen) {
      const root = child?.pid;
      if (!root) return;
      // A process may fork between the scan and its SIGSTOP (sshd forks a connection's post-auth
      // child after the client saw its login succeed): scan again until no new process shows up.
      const signalled = new Set<number>();
      for (;;) {
        const pids = (await descendantPids(root)).filter((pid) => !signalled.has(pid));
        if (pids.length === 0) return;
        for (const pid of pids) {
          signalled.add(pid);
          try {
            process.kill(pid, frozen ? 'SIGSTOP' : 'SIGCONT');
          } catch {
            /* gone meanwhile */
          }
        }
        if (!frozen) return;
      }
    },
    async stop() {
      await halt();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/**
 * The sshd of a test file: started before its tests, stopped after them. Call it before
 * useTestApp(), so that it stops after the app.
 */
export function useSshd(opts: SshdOptions = {}): Sshd {
  const sshd = {} as Sshd;
  beforeAll(async () => {
    Object.defineProperties(sshd, Object.getOwnPropertyDescriptors(await startSshd(opts))); // hostKey is a getter
  });
  afterAll(async () => {
    await sshd.stop?.();
  });
  return sshd;
}
