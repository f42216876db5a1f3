// The one SSH client of the service (ssh2). Connects with a password or a private key (OpenSSH or
// PEM; RSA, Ed25519, ECDSA), checks the host key (trust on first use: a changed key is refused),
// and runs commands with a timeout, capped output, exit code and stderr, wrapped in sudo when the
// target asks for it. The sudo password goes to `sudo -S` on stdin, never on the command line, and
// only when sudo prompts for it (sudo-handshake.ts). A command's stdin may be a stream (a deploy's
// tarball): piped with backpressure once the command runs, destroyed when the command ends without
// reading it all, and a stream that fails kills the command.
import { createHash } from 'node:crypto';
import type { Readable, Writable } from 'node:stream';
// ssh2 is CommonJS: Node's ESM loader gives it as a default export only.
import ssh2, { type ClientChannel } from 'ssh2';
import { describeConnectError, hostKeyChanged, SshError } from './ssh-error.js';
import { usablePrivateKey } from './ssh-keys.js';
import { sudoHandshake, type SudoHandshake } from './sudo-handshake.js';

export type SudoMode = 'none' | 'nopasswd' | 'password';

export interface SshTarget {
  host: string;
  port: number;
  username: string;
  password: string | null;
  privateKey: string | null;
  sudo: SudoMode;
  /** The host key recorded earlier ("<algorithm> SHA256:<base64>"), or null to accept the one presented. */
  knownHostKey: string | null;
}

export interface ConnectOptions {
  /** Covers TCP connect, handshake and authentication. */
  connectTimeoutMs?: number;
  /** Keepalive for long-lived connections (monitoring); 0 = off. */
  keepaliveMs?: number;
}

export interface ExecOptions {
  /** Wrap in sudo as the target says (default true); false runs as the login user. */
  sudo?: boolean;
  timeoutMs?: number;
  /** Cap per stream (stdout, stderr); the rest is dropped and `truncated` set. */
  maxOutputBytes?: number;
  /**
   * Written to the command's standard input once it runs (after sudo, if any). A stream is piped
   * at the pace the command reads it; when it fails, the command is killed (it never sees an end
   * of its input) and exec rejects with the stream's error.
   */
  stdin?: string | Readable;
  /** Sees the output as it comes (stdout and stderr interleaved), e.g. to show progress. */
  onOutput?: (chunk: Buffer) => void;
  /**
   * Where stdout goes instead of the result: piped at the pace `stdoutTo` takes it and ended with
   * the command (a byte stream for another command's stdin); the result's stdout is then empty. If
   * `stdoutTo` closes first (its reader is done), the rest of the output is read and dropped.
   */
  stdoutTo?: Writable;
}

/**
 * The channel's stdout into `to`. A destination that closes before the command has ended (a
 * receiving command done with its input, which exec then destroys) unpipes the channel, which Node
 * leaves paused: its output unread, the command blocks on it or its channel never ends, and exec
 * waits until its timeout. So the rest is read and dropped.
 */
function pipeOutput(ch: ClientChannel, to: Writable) {
  ch.pipe(to);
  to.once('close', () => {
    ch.unpipe(to);
    ch.resume();
  });
}

export interface ExecResult {
  /** null when the command was killed or the connection ended before it reported one. */
  exitCode: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  truncated: boolean;
  timedOut: boolean;
}

/**
 * A long-running command whose input and output stay open (monitoring's sample stream): what is
 * written goes to its stdin, its stdout comes to onData, onClose fires once when it ends.
 */
export interface SshStream {
  write(data: string): void;
  onData(listener: (chunk: Buffer) => void): void;
  onClose(listener: (exitCode: number | null) => void): void;
  readonly closed: boolean;
  close(): void;
}

export interface SshConnection {
  /** The host key the server presented. */
  readonly hostKey: string;
  readonly closed: boolean;
  exec(command: string, opts?: ExecOptions): Promise<ExecResult>;
  /** Starts `command` as the login user (never sudo) with its input and output kept open. */
  stream(command: string, opts?: { timeoutMs?: number }): Promise<SshStream>;
  close(): void;
}

const SSH_CONNECT_TIMEOUT_MS = 15_000;
const SSH_COMMAND_TIMEOUT_MS = 10 * 60_000;
const SSH_MAX_OUTPUT_BYTES = 1024 * 1024;

/** Single-quotes a string for a POSIX shell. */
export function shellQuote(value: string): string {
  return `'${value.replaceAll("'", `'\\''`)}'`;
}

/** "<algorithm> SHA256:<base64>" of a host key blob, as `ssh-keygen -l` prints it. */
export function hostKeyFingerprint(blob: Buffer): string {
  const algorithm = blob.subarray(4, 4 + blob.readUInt32BE(0)).toString('latin1');
  const digest = createHash('sha256').update(blob).digest('base64').replace(/=+$/, '');
  return `${algorithm} SHA256:${digest}`;
}

/**
 * sudo by absolute path, started with `exec`: the login shell sshd runs the command line with has
 * read the user's start-up files (bash reads ~/.bashrc for commands sent over SSH), and these may
 * put another `sudo` first on PATH or define a function of that name. Under sudo the command runs
 * in /bin/sh, which reads no start-up files, with sudo's clean environment.
 */
export const SUDO_PATH = '/usr/bin/sudo';

/** The command line that runs `command` with the target's sudo mode. */
function sudoCommand(command: string, mode: SudoMode, handshake: SudoHandshake | null): string {
  if (mode === 'none') return command;
  if (mode === 'nopasswd' || !handshake) return `exec ${SUDO_PATH} -n -- /bin/sh -c ${shellQuote(command)}`;
  // -k: sudo checks the password every time (no cached ticket), so confirm proves it.
  const startThenRun = `printf '%s\\n' ${handshake.started} >&2; exec /bin/sh -c "$1" sh`;
  return `exec ${SUDO_PATH} -S -k -p ${handshake.prompt} -- /bin/sh -c ${shellQuote(startThenRun)} sh ${shellQuote(command)}`;
}

export async function connectSsh(target: SshTarget, opts: ConnectOptions = {}): Promise<SshConnection> {
  const timeoutMs = opts.connectTimeoutMs ?? SSH_CONNECT_TIMEOUT_MS;
  if (!target.password && !target.privateKey) throw new SshError('auth', 'Neither a password nor a private key is set');
  const privateKey = target.privateKey ? usablePrivateKey(target.privateKey) : undefined;
  const client = new ssh2.Client();
  let presented = '';
  let refusedHostKey = false;
  let closed = false;
  const pending = new Set<(err: Error) => void>();

  await new Promise<void>((resolve, reject) => {
    client.once('ready', () => resolve());
    // ssh2 may emit more than one error for one failure; the first one decides, the rest are dropped.
    client.on('error', (err) => {
      client.end();
      reject(refusedHostKey ? hostKeyChanged(target, presented) : describeConnectError(err, target, timeoutMs));
    });
    client.connect({
      host: target.host,
      port: target.port,
      username: target.username,
      password: target.password ?? undefined,
      privateKey,
      tryKeyboard: false,
      readyTimeout: timeoutMs,
      keepaliveInterval: opts.keepaliveMs ?? 0,
      keepaliveCountMax: 3,
      hostVerifier: (key: Buffer) => {
        presented = hostKeyFingerprint(key);
        refusedHostKey = target.knownHostKey !== null && target.knownHostKey !== presented;
        return !refusedHostKey;
      },
    });
  });

  client.on('close', () => {
    closed = true;
    for (const fail of pending) fail(new SshError('closed', `Connection to ${target.host}:${target.port} closed`));
    pending.clear();
  });

  function exec(command: string, o: ExecOptions = {}): Promise<ExecResult> {
    const mode = o.sudo === false ? 'none' : target.sudo;
    if (mode === 'password' && !target.password) {
      return Promise.reject(new SshError('sudo', 'sudo needs the password of the user, but the root server has none'));
    }
    const source = typeof o.stdin === 'object' ? o.stdin : null;
    const cap = o.maxOutputBytes ?? SSH_MAX_OUTPUT_BYTES;
    const timeoutMs = o.timeoutMs ?? SSH_COMMAND_TIMEOUT_MS;
    // A stream that failed (or was dropped) before the command could start: nothing runs.
    if (source?.errored) return Promise.reject(source.errored);
    if (source?.destroyed) return Promise.reject(new SshError('closed', 'The input of the command ended before the command started'));
    if (closed) {
      source?.destroy();
      return Promise.reject(new SshError('closed', `Connection to ${target.host}:${target.port} closed`));
    }

    return new Promise<ExecResult>((resolve, reject) => {
      pending.add(reject);
      let channel: ClientChannel | null = null;
      let timedOut = false;
      let sourceError: Error | null = null;
      let finish = () => {};
      // A failing stream kills the command: it must not take a cut-off input for a whole one.
      const killForSource = (ch: ClientChannel) => {
        source!.unpipe(ch);
        ch.signal('KILL');
        ch.close();
      };
      const stopOnSourceError = (err: Error) => {
        if (sourceError) return;
        sourceError = err;
        if (channel) killForSource(channel); // else the channel, when it opens, sees sourceError
      };
      source?.on('error', stopOnSourceError);
      // Runs from the request on: a connection that stopped answering gets no channel at all.
      const timer = setTimeout(() => {
        timedOut = true;
        if (!channel) {
          pending.delete(reject);
          return reject(new SshError('timeout', `${target.host}:${target.port} did not answer within ${Math.round(timeoutMs / 1000)} s`));
        }
        // KILL the command and stop waiting: a child it left holding the output open would
        // otherwise keep the channel, and us, waiting.
        channel.signal('KILL');
        channel.close();
        finish();
      }, timeoutMs);

      let startInput = () => {};
      let keepErr: (data: Buffer) => void = () => {};
      const handshake =
        mode === 'password'
          ? sudoHandshake({
              // Once: a second prompt means the password was refused, and sudo gets the end of its input.
              onPrompt: (count) => (count === 1 ? channel?.write(`${target.password}\n`) : channel?.end()),
              onStarted: () => startInput(),
              onOutput: (data) => keepErr(data),
            })
          : null;

      client.exec(sudoCommand(command, mode, handshake), (err, ch: ClientChannel) => {
        if (err) {
          clearTimeout(timer);
          pending.delete(reject);
          return reject(new SshError('closed', `Could not run a command on ${target.host}: ${err.message}`));
        }
        if (timedOut) return void ch.close();
        channel = ch;
        const out: Buffer[] = [];
        const errOut: Buffer[] = [];
        const size = { out: 0, err: 0 };
        let truncated = false;
        let exitCode: number | null = null;
        let signal: string | null = null;
        const keep = (chunks: Buffer[], key: 'out' | 'err') => (data: Buffer) => {
          o.onOutput?.(data);
          const room = cap - size[key];
          if (room <= 0) {
            truncated = true;
            return;
          }
          const part = data.length > room ? data.subarray(0, room) : data;
          if (part !== data) truncated = true;
          chunks.push(part);
          size[key] += part.length;
        };
        if (o.stdoutTo) pipeOutput(ch, o.stdoutTo);
        else ch.on('data', keep(out, 'out'));
        keepErr = keep(errOut, 'err');
        ch.stderr.on('data', (data: Buffer) => (handshake ? handshake.feed(data) : keepErr(data)));
        ch.on('exit', (code: number | null, sig?: string) => {
          exitCode = code;
          signal = sig ?? null;
        });
        finish = () => {
          handshake?.end();
          clearTimeout(timer);
          pending.delete(reject);
          if (sourceError) return reject(sourceError);
          resolve({
            exitCode,
            signal,
            stdout: Buffer.concat(out).toString('utf8'),
            stderr: Buffer.concat(errOut).toString('utf8'),
            truncated,
            timedOut,
          });
        };
        ch.on('close', finish);
        // Writes racing the command's end fail here; the outcome is the exit status and 'close'.
        ch.on('error', () => {});
        startInput = () => {
          if (!source) return void ch.end(typeof o.stdin === 'string' ? o.stdin : '');
          if (sourceError) return void killForSource(ch);
          source.pipe(ch);
        };
        // Through sudo -S the input waits until sudo has let the command start.
        if (!handshake) startInput();
      });
    }).finally(() => {
      // The command ended (or failed) before reading everything: stop producing (a download ends).
      if (source && !source.readableEnded) source.destroy();
    });
  }

  function stream(command: string, o: { timeoutMs?: number } = {}): Promise<SshStream> {
    if (closed) return Promise.reject(new SshError('closed', `Connection to ${target.host}:${target.port} closed`));
    const timeoutMs = o.timeoutMs ?? SSH_CONNECT_TIMEOUT_MS;
    return new Promise<SshStream>((resolve, reject) => {
      pending.add(reject);
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        pending.delete(reject);
        reject(new SshError('timeout', `${target.host}:${target.port} did not answer within ${Math.round(timeoutMs / 1000)} s`));
      }, timeoutMs);
      client.exec(command, (err, ch: ClientChannel) => {
        clearTimeout(timer);
        pending.delete(reject);
        if (timedOut) return void ch?.close();
        if (err) return reject(new SshError('closed', `Could not run a command on ${target.host}: ${err.message}`));
        let ended = false;
        let exitCode: number | null = null;
        const closeListeners: ((code: number | null) => void)[] = [];
        ch.on('exit', (code: number | null) => {
          exitCode = code;
        });
        ch.on('error', () => {});
        ch.stderr.resume();
        ch.on('close', () => {
          ended = true;
          for (const l of closeListeners) l(exitCode);
        });
        resolve({
          write: (data) => {
            if (!ended) ch.write(data);
          },
          onData: (l) => void ch.on('data', l),
          onClose: (l) => {
            if (ended) l(exitCode);
            else closeListeners.push(l);
          },
          get closed() {
            return ended;
          },
          close: () => {
            if (ended) return;
            ch.signal('KILL');
            ch.close();
          },
        });
      });
    });
  }

  return {
    hostKey: presented,
    get closed() {
      return closed;
    },
    exec,
    stream,
    close() {
      client.end();
    },
  };
}
