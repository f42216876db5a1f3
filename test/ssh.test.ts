// The SSH client (src/core/ssh.ts) against a real OpenSSH server started by the test on loopback
// (test/helpers/sshd.ts) with real system users and sudoers entries: password and key logins in
// every supported format, readable connection errors (wrong credentials, closed port, silent port,
// unknown host), exit codes, stderr, output cap, command timeout, stdin as text or as a stream
// (backpressure, failure), sudo -n and sudo -S (the password only for sudo's own prompt: never on
// the stdin of a NOPASSWD account's command, never to a fake sudo planted through ~/.bashrc or on
// PATH), and the host key check across a real host key change.
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectSsh, type SshConnection, type SshTarget } from '../src/core/ssh.js';
import { describeConnectError, SshError } from '../src/core/ssh-error.js';
import { usablePrivateKey } from '../src/core/ssh-keys.js';
import { freePort, sshTarget, useSshd, TEST_USERS } from './helpers/sshd.js';
import { withoutHostWarning } from './helpers/sudo-output.js';

const sshd = useSshd();

const target = (over: Partial<SshTarget> = {}) => sshTarget(sshd, over);

async function withConnection<T>(t: SshTarget, fn: (c: SshConnection) => Promise<T>): Promise<T> {
  const conn = await connectSsh(t, { connectTimeoutMs: 10_000 });
  try {
    return await fn(conn);
  } finally {
    conn.close();
  }
}

async function connectError(t: SshTarget, timeoutMs = 10_000): Promise<SshError> {
  const err = await connectSsh(t, { connectTimeoutMs: timeoutMs }).then(
    (c) => {
      c.close();
      throw new Error('connected');
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SshError);
  return err as SshError;
}

describe('login', () => {
  it('with a password', async () => {
    const res = await withConnection(target(), (c) => c.exec('id -un'));
    expect(res).toMatchObject({ exitCode: 0, stdout: `${TEST_USERS.password.name}\n`, stderr: '', truncated: false, timedOut: false });
  });

  it.each(['rsaOpenssh', 'rsaPem', 'ed25519Openssh', 'ed25519Pem'] as const)('with a %s private key', async (format) => {
    const t = target({ username: TEST_USERS.key.name, password: null, privateKey: sshd.keys[format] });
    const res = await withConnection(t, (c) => c.exec('id -un'));
    expect(res.stdout.trim()).toBe(TEST_USERS.key.name);
  });

  it('reports the host key the server presents', async () => {
    const conn = await connectSsh(target());
    conn.close();
    expect(conn.hostKey).toBe(sshd.hostKey);
  });

  it('refuses a wrong password, readably', async () => {
    const err = await connectError(target({ password: 'wrong-password' }));
    expect(err.reason).toBe('auth');
    expect(err.message).toBe(
      `Authentication failed for ${TEST_USERS.password.name}@127.0.0.1:${sshd.port}: the server refused the password`,
    );
  });

  it('refuses a key the server does not authorize', async () => {
    const err = await connectError(target({ username: TEST_USERS.key.name, password: null, privateKey: sshd.keys.unauthorized }));
    expect(err.reason).toBe('auth');
    expect(err.message).toMatch(/refused the private key$/);
  });

  it('a key user cannot log in with a password', async () => {
    const err = await connectError(target({ username: TEST_USERS.key.name, password: 'anything' }));
    expect(err.reason).toBe('auth');
  });
});

describe('connection errors', () => {
  it('closed port', async () => {
    const port = await freePort();
    const err = await connectError(target({ port }));
    expect(err.reason).toBe('refused');
    expect(err.message).toBe(`Connection refused by 127.0.0.1:${port}: no SSH server listens on port ${port}`);
  });

  it('a port that accepts but never answers times out', async () => {
    const silent: Server = createServer(() => {});
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const { port } = silent.address() as { port: number };
    try {
      const err = await connectError(target({ port }), 1000);
      expect(err.reason).toBe('timeout');
      expect(err.message).toBe(`Timed out after 1 s connecting to 127.0.0.1:${port} (no SSH answer)`);
    } finally {
      silent.close();
    }
  });

  it('unknown host name', async () => {
    const err = await connectError(target({ host: 'no-such-host.invalid' }));
    expect(err.reason).toBe('dns');
    expect(err.message).toBe('Host name no-such-host.invalid could not be resolved');
  });

  it('unreachable host (the errno the kernel gives)', () => {
    const errno = Object.assign(new Error('connect EHOSTUNREACH 10.9.9.9:22'), { code: 'EHOSTUNREACH' });
    const err = describeConnectError(errno, target({ host: '10.9.9.9', port: 22 }), 15_000);
    expect(err).toMatchObject({
      reason: 'unreachable',
      message: 'Host 10.9.9.9 is unreachable (EHOSTUNREACH)',
      statusCode: 400,
      code: 'user_error',
    });
  });

  it('neither password nor key', async () => {
    const err = await connectError(target({ password: null }));
    expect(err.message).toBe('Neither a password nor a private key is set');
  });
});

describe('private keys', () => {
  it('a passphrase-protected key is refused with advice', () => {
    expect(() => usablePrivateKey(sshd.keys.encrypted)).toThrow(/protected by a passphrase; store it without one/);
  });

  it('garbage and public keys are refused', () => {
    expect(() => usablePrivateKey('hello')).toThrow('Not a private key in OpenSSH or PEM format');
    expect(() => usablePrivateKey(sshd.keys.publicKey)).toThrow(/public key/);
  });
});

describe('commands', () => {
  let conn: SshConnection;
  beforeAll(async () => {
    conn = await connectSsh(target());
  });
  afterAll(() => conn.close());

  it('captures stdout, stderr and the exit code', async () => {
    const res = await conn.exec('echo out; echo err >&2; exit 3');
    expect(res).toMatchObject({ exitCode: 3, signal: null, stdout: 'out\n', stderr: 'err\n', truncated: false });
  });

  it('caps the output', async () => {
    const res = await conn.exec('head -c 300000 /dev/zero | tr "\\0" a; echo done >&2', { maxOutputBytes: 1000 });
    expect(res.stdout).toBe('a'.repeat(1000));
    expect(res).toMatchObject({ truncated: true, exitCode: 0, stderr: 'done\n' });
  });

  it('kills a command that runs past its timeout', async () => {
    // Long enough for the shell to start and print on a loaded machine, far below the sleep.
    const res = await conn.exec('echo started; sleep 30; echo never', { timeoutMs: 2_000 });
    expect(res).toMatchObject({ timedOut: true, exitCode: null, stdout: 'started\n' });
    // the connection is still usable
    expect((await conn.exec('echo again')).stdout).toBe('again\n');
  });

  it('gives up on a server that stops answering', async () => {
    const frozen = await connectSsh(target());
    try {
      await sshd.freezeConnections(true);
      await expect(frozen.exec('echo hi', { timeoutMs: 500 })).rejects.toMatchObject({
        reason: 'timeout',
        message: `127.0.0.1:${sshd.port} did not answer within 1 s`,
      });
    } finally {
      await sshd.freezeConnections(false);
      frozen.close();
    }
  });

  it('feeds stdin', async () => {
    expect((await conn.exec('cat', { stdin: 'from stdin' })).stdout).toBe('from stdin');
  });

  it('feeds stdin from a stream, whole and in order', async () => {
    const data = randomBytes(4 * 1024 * 1024);
    const chunks = Array.from({ length: 64 }, (_, i) => data.subarray(i * 65536, (i + 1) * 65536));
    const res = await conn.exec('sha256sum', { stdin: Readable.from(chunks) });
    expect(res.stdout.split(' ')[0]).toBe(createHash('sha256').update(data).digest('hex'));
  });

  it('pipes a stream at the pace the command reads it, and stops it when the command ends', async () => {
    let produced = 0;
    const chunk = Buffer.alloc(64 * 1024, 7);
    const endless = new Readable({
      read() {
        produced += chunk.length;
        this.push(chunk);
      },
    });
    // Reads 1 MiB, then stops reading for a second before it ends: without backpressure the
    // stream would be drained into memory meanwhile.
    const res = await conn.exec('head -c 1048576 > /dev/null; sleep 1; echo read', { stdin: endless });
    expect(res).toMatchObject({ exitCode: 0, stdout: 'read\n' });
    expect(produced).toBeGreaterThanOrEqual(1024 * 1024);
    expect(produced).toBeLessThan(16 * 1024 * 1024); // channel window and pipe buffers, not more
    expect(endless.destroyed).toBe(true);
  });

  it('a stream that fails kills the command, which never sees a clean end of its input', async () => {
    const marker = path.join(tmpdir(), `svc-ssh-stdin-${randomBytes(4).toString('hex')}`);
    let sent = false;
    const failing = new Readable({
      read() {
        if (!sent) {
          sent = true;
          this.push(Buffer.alloc(1024, 1));
        } else setTimeout(() => this.destroy(new Error('download cut off')), 100);
      },
    });
    await expect(conn.exec(`cat > /dev/null && touch ${marker}`, { stdin: failing })).rejects.toThrow('download cut off');
    // Had the command seen an end of input, it would have gone on to create the marker.
    expect((await conn.exec(`sleep 0.5; test -e ${marker} && echo exists || echo absent`)).stdout).toBe('absent\n');
    expect(existsSync(marker)).toBe(false);
  });

  it('a stream that failed before the command could start: nothing runs', async () => {
    const marker = path.join(tmpdir(), `svc-ssh-stdin-${randomBytes(4).toString('hex')}`);
    const failed = new Readable({ read() {} }).on('error', () => {});
    failed.destroy(new Error('download failed early'));
    await expect(conn.exec(`touch ${marker}`, { stdin: failed })).rejects.toThrow('download failed early');
    const dropped = new Readable({ read() {} });
    dropped.destroy();
    await expect(conn.exec(`touch ${marker}`, { stdin: dropped })).rejects.toMatchObject({ reason: 'closed' });
    expect((await conn.exec(`test -e ${marker} && echo exists || echo absent`)).stdout).toBe('absent\n');
  });

  it('a stream still unread when the command times out is stopped too', async () => {
    const endless = new Readable({ read() {} });
    const res = await conn.exec('sleep 30', { stdin: endless, timeoutMs: 500 });
    expect(res.timedOut).toBe(true);
    expect(endless.destroyed).toBe(true);
  });

  it('output piped to a stream that closes first (its reader done) is dropped: the command runs to its end', async () => {
    // A move's filestore: the sender's stdout into the receiver's stdin, which exec destroys when the
    // receiving tar has ended. 32 MiB is more than the channel's window and the socket buffers hold.
    const receiver = new PassThrough();
    receiver.once('readable', () => receiver.destroy());
    const res = await conn.exec('head -c 33554432 /dev/zero; echo sent >&2', { stdoutTo: receiver, timeoutMs: 60_000 });
    expect(res).toMatchObject({ exitCode: 0, timedOut: false, stderr: 'sent\n' });
  });

  it('runs commands in parallel on one connection', async () => {
    const results = await Promise.all([1, 2, 3, 4].map((n) => conn.exec(`echo ${n}`)));
    expect(results.map((r) => r.stdout)).toEqual(['1\n', '2\n', '3\n', '4\n']);
  });
});

describe('sudo', () => {
  it('sudo -n for a NOPASSWD user', async () => {
    const t = target({ username: TEST_USERS.sudoNoPassword.name, password: TEST_USERS.sudoNoPassword.password, sudo: 'nopasswd' });
    await withConnection(t, async (c) => {
      expect((await c.exec('id -un')).stdout).toBe('root\n');
      expect((await c.exec('id -un', { sudo: false })).stdout).toBe(`${TEST_USERS.sudoNoPassword.name}\n`);
      expect((await c.exec("printf '%s' \"it's quoted\"")).stdout).toBe("it's quoted");
    });
  });

  it('sudo -S with the password on stdin when sudo prompts, never on the command line', async () => {
    const user = TEST_USERS.sudoPassword;
    const t = target({ username: user.name, password: user.password, sudo: 'password' });
    await withConnection(t, async (c) => {
      // sudo's prompt and the start line are taken out of the output.
      const id = await c.exec('id -un');
      expect({ ...id, stderr: withoutHostWarning(id.stderr) }).toMatchObject({ exitCode: 0, stdout: 'root\n', stderr: '' });
      // The command's own stdin comes once sudo let it start, and the password is not left on it.
      expect((await c.exec('cat', { stdin: 'payload' })).stdout).toBe('payload');
      // Every process's command line while sudo runs: the password is in none of them.
      const ps = await c.exec('ps -eo args');
      expect(ps.stdout).toMatch(/^\/usr\/bin\/sudo -S -k -p svc-sudo-prompt-[0-9a-f]{32}: -- \/bin\/sh -c /m);
      expect(ps.stdout).not.toContain(user.password);
    });
  });

  it('sudo -S with a streamed stdin: the stream once sudo let the command start, byte for byte', async () => {
    const user = TEST_USERS.sudoPassword;
    const t = target({ username: user.name, password: user.password, sudo: 'password' });
    const data = randomBytes(1024 * 1024);
    await withConnection(t, async (c) => {
      const res = await c.exec('id -un; sha256sum', { stdin: Readable.from([data.subarray(0, 1000), data.subarray(1000)]) });
      expect(res.stdout).toBe(`root\n${createHash('sha256').update(data).digest('hex')}  -\n`);
    });
  });

  it('sudo -S with a wrong password fails with sudo’s message', async () => {
    const user = TEST_USERS.sudoPassword;
    // Log in with the key, but give sudo a wrong password.
    const t = target({ username: user.name, password: 'not-the-password', privateKey: sshd.keys.ed25519Openssh, sudo: 'password' });
    const res = await withConnection(t, (c) => c.exec('id -un'));
    expect(res.exitCode).toBe(1);
    expect(res.stdout).toBe('');
    expect(res.stderr).toMatch(/incorrect password|no password was provided/);
    expect(res.stderr).not.toContain('svc-sudo-');
  });

  it('sudo -n for a user that needs a password fails, not hangs', async () => {
    const user = TEST_USERS.sudoPassword;
    const t = target({ username: user.name, password: user.password, sudo: 'nopasswd' });
    const res = await withConnection(t, (c) => c.exec('id -un'));
    expect(res.exitCode).toBe(1);
    expect(res.stderr).toMatch(/a password is required/);
  });

  it('sudo with a password but a key-only record is refused before running', async () => {
    const t = target({ username: TEST_USERS.sudoPassword.name, password: null, privateKey: sshd.keys.ed25519Openssh, sudo: 'password' });
    await withConnection(t, async (c) => {
      await expect(c.exec('id')).rejects.toMatchObject({ reason: 'sudo' });
    });
  });
});

describe('the sudo password goes to sudo only', () => {
  const planted = TEST_USERS.sudoPlanted;
  const home = `/home/${planted.name}`;
  /** Where the fake sudo programs below write what they were given. */
  const stolen = (name: string) => readFile(path.join(home, name), 'utf8').catch(() => '');

  it('an account whose sudo asks no password: nothing is written to the command’s stdin', async () => {
    // The record says sudo needs the password, the server's sudoers says NOPASSWD: sudo never prompts.
    const user = TEST_USERS.sudoNoPassword;
    const t = target({ username: user.name, password: user.password, sudo: 'password' });
    await withConnection(t, async (c) => {
      const res = await c.exec('id -un; cat | rev');
      expect(res).toMatchObject({ exitCode: 0, stdout: 'root\n' });
      expect(res.stdout + res.stderr).not.toContain([...user.password].reverse().join(''));
      // The command's own input still arrives, and only it.
      expect((await c.exec('cat', { stdin: 'payload' })).stdout).toBe('payload');
    });
  });

  it('a fake sudo planted through ~/.bashrc (a function, or first on PATH) never receives it; the real sudo runs', async () => {
    // bash reads ~/.bashrc before running a command sshd hands it (Debian's bash does so when
    // SSH_CLIENT is set). Each fake answers like sudo -S: prints the prompt it was given, reads a line.
    const fake = (file: string) =>
      `p=; while [ $# -gt 0 ]; do [ "$1" = -p ] && p=$2; shift; done; printf '%s' "$p" >&2; IFS= read -r pw; printf '%s\n' "$pw" >> ${home}/${file}`;
    const bashrc = await readFile(path.join(home, '.bashrc'), 'utf8').catch(() => null);
    await mkdir(path.join(home, 'bin'), { recursive: true });
    await writeFile(path.join(home, 'bin', 'sudo'), `#!/bin/sh\n${fake('stolen-path')}\n`, { mode: 0o755 });
    await writeFile(
      path.join(home, '.bashrc'),
      [
        // Reads whatever arrives on stdin before the command starts.
        `IFS= read -r -t 1 early && printf '%s\\n' "$early" >> ${home}/stolen-stdin`,
        'PATH=$HOME/bin:$PATH',
        `sudo() { ${fake('stolen-function')}; }`,
        '',
      ].join('\n'),
    );
    try {
      const t = target({ username: planted.name, password: planted.password, sudo: 'password' });
      await withConnection(t, async (c) => {
        expect(await c.exec('id -un')).toMatchObject({ exitCode: 0, stdout: 'root\n' });
        expect(await c.exec('id -un; cat', { stdin: 'payload' })).toMatchObject({ exitCode: 0, stdout: 'root\npayload' });
      });
      for (const file of ['stolen-function', 'stolen-path', 'stolen-stdin'])
        expect(await stolen(file), file).not.toContain(planted.password);
    } finally {
      if (bashrc === null) await rm(path.join(home, '.bashrc'), { force: true });
      else await writeFile(path.join(home, '.bashrc'), bashrc);
      await rm(path.join(home, 'bin'), { recursive: true, force: true });
      for (const file of ['stolen-function', 'stolen-path', 'stolen-stdin']) await rm(path.join(home, file), { force: true });
    }
  });
});

describe('host key', () => {
  it('accepts the recorded key and refuses another one after the server changes it', async () => {
    const recorded = sshd.hostKey;
    await withConnection(target({ knownHostKey: recorded }), async (c) => expect(c.hostKey).toBe(recorded));

    await sshd.restart({ newHostKey: true });
    expect(sshd.hostKey).not.toBe(recorded);
    const err = await connectError(target({ knownHostKey: recorded }));
    expect(err.reason).toBe('host_key_changed');
    expect(err.message).toContain(`Host key of 127.0.0.1:${sshd.port} has changed: recorded ${recorded}, presented ${sshd.hostKey}`);
    expect(err.message).toContain('PATCH host_key');
  });
});
