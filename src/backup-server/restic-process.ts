// Running restic for the backup server: one child process per command, in an environment of its
// own (PATH, a private HOME and TMPDIR, the repository's variables; never svc's environment), the
// password and cloud credentials only in that environment or in 0600 files of a private 0700
// directory removed afterwards, never on the command line. A command that outlives its bound is
// interrupted (restic then removes its lock) and killed with its ssh child.
import { type ChildProcess, spawn } from 'node:child_process';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';

export type ResticProvider = 'local' | 's3' | 'sftp';

export interface ResticRepository {
  provider: ResticProvider;
  /** restic's repository string: a local path, `s3:http(s)://host[:port]/bucket[/prefix]`, or `sftp:user@host:/path` */
  location: string;
  /** plaintext repository password: given to restic through its environment or a 0600 file, never argv */
  password: string;
  /** s3: { access_key_id, secret_access_key, region? }; sftp: { private_key (OpenSSH PEM), known_hosts (line(s) for the host), port? } */
  credentials?: Record<string, string>;
}

/** Why restic failed, where the backup server decides differently on it. */
export type ResticErrorCode = 'wrong_password' | 'no_repository' | 'access_denied' | 'locked' | 'timeout' | 'failed';

/** What failed and restic's own words (secrets redacted); no stack noise. */
export class ResticError extends Error {
  override name = 'ResticError';
  constructor(
    message: string,
    readonly code: ResticErrorCode = 'failed',
  ) {
    super(message);
    this.stack = `${this.name}: ${message}`;
  }
}

export interface ResticOptions {
  cacheDir: string;
  PATH: string;
  /** Bound of one restic command (default 6 h): a hung repository fails the command instead of hanging it. */
  timeoutMs?: number;
  /** How long a command waits for another process's lock on the repository (default 15 min). */
  lockWaitMs?: number;
  /** Called with each restic child's pid and argv once it runs (tests read its /proc entry). */
  onSpawn?: (pid: number, argv: string[]) => void;
}

export interface Invocation {
  argv: string[];
  env: Record<string, string>;
  /** The private directory (HOME, TMPDIR, key files); removed by cleanup(). */
  dir: string;
  secrets: string[];
  cleanup(): Promise<void>;
}

/** The host alias ssh checks the repository's known_hosts lines under, whatever host and port they name. */
const HOST_ALIAS = 'svc-backup-repository';
const KEY_TYPE = /^(ssh-|ecdsa-|sk-)/;

/** Secrets of a repository as they could show up in restic's output (each line of a key too). */
export function secretsOf(repo: ResticRepository): string[] {
  const values = [repo.password, repo.credentials?.access_key_id, repo.credentials?.secret_access_key, repo.credentials?.private_key];
  const out = new Set<string>();
  for (const v of values) {
    if (!v) continue;
    out.add(v);
    for (const line of v.split(/\r?\n/)) if (line.trim().length >= 8) out.add(line.trim());
  }
  // Longest first: a secret that contains another is replaced whole.
  return [...out].filter((s) => s.length >= 3).sort((a, b) => b.length - a.length);
}

export function redact(text: string, secrets: string[]): string {
  let out = text;
  for (const s of secrets) out = out.split(s).join('[redacted]');
  return out;
}

/** known_hosts lines re-written for HOST_ALIAS (the operator's lines may name the host, host:port or nothing). */
export function knownHostsFor(lines: string): string {
  const out: string[] = [];
  for (const raw of lines.split(/\r?\n/)) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const fields = line.split(/\s+/);
    if (fields[0]!.startsWith('@')) {
      // @cert-authority / @revoked: the marker, then host patterns, then the key.
      out.push([fields[0], HOST_ALIAS, ...fields.slice(2)].join(' '));
    } else if (KEY_TYPE.test(fields[0]!)) {
      out.push([HOST_ALIAS, ...fields].join(' '));
    } else {
      out.push([HOST_ALIAS, ...fields.slice(1)].join(' '));
    }
  }
  if (out.length === 0) throw new ResticError('the SFTP repository has no known_hosts line: its host key cannot be checked');
  return `${out.join('\n')}\n`;
}

/** user and host of `sftp:user@host:/path` (or `sftp://user@host[:port]/path`), checked: they become ssh arguments. */
export function sftpTarget(location: string): { user: string; host: string; port?: string } {
  const m = /^sftp:(?:\/\/)?([A-Za-z0-9._][A-Za-z0-9._-]*)@(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9][A-Za-z0-9.-]*)(?::(\d+))?(?::|\/)/.exec(
    location,
  );
  if (!m) throw new ResticError(`the SFTP repository location is not sftp:user@host:/path: ${location}`);
  return { user: m[1]!, host: m[2]!.replace(/^\[|\]$/g, ''), port: location.startsWith('sftp://') ? m[3] : undefined };
}

/** restic's argv and environment for `args` on `repo`, with its private directory made. */
export async function invocation(opts: ResticOptions, repo: ResticRepository, args: string[]): Promise<Invocation> {
  if (!repo.password) throw new ResticError(`no password for the restic repository at ${repo.location}`);
  if (!repo.location) throw new ResticError('no restic repository location given', 'no_repository');
  const dir = await mkdtemp(path.join(tmpdir(), 'svc-restic-'));
  const cleanup = () => rm(dir, { recursive: true, force: true });
  try {
    await chmod(dir, 0o700);
    await mkdir(opts.cacheDir, { recursive: true, mode: 0o700 });
    const env: Record<string, string> = {
      PATH: opts.PATH,
      HOME: dir,
      TMPDIR: dir,
      // Snapshot times given to --time and the days of --keep-daily are UTC days, whatever the machine's zone.
      TZ: 'UTC',
      RESTIC_PASSWORD: repo.password,
    };
    const global = ['--cache-dir', opts.cacheDir, '--repo', repo.location];
    const creds = repo.credentials ?? {};
    if (repo.provider === 's3') {
      if (!creds.access_key_id || !creds.secret_access_key) {
        throw new ResticError(`the S3 repository at ${repo.location} has no access_key_id or secret_access_key`);
      }
      env.AWS_ACCESS_KEY_ID = creds.access_key_id;
      env.AWS_SECRET_ACCESS_KEY = creds.secret_access_key;
      if (creds.region) env.AWS_DEFAULT_REGION = creds.region;
    } else if (repo.provider === 'sftp') {
      const target = sftpTarget(repo.location);
      if (!creds.private_key) throw new ResticError(`the SFTP repository at ${repo.location} has no private_key`);
      const keyFile = path.join(dir, 'id');
      const knownHosts = path.join(dir, 'known_hosts');
      // ssh refuses a key without its final newline (and one others may read).
      await writeFile(keyFile, `${creds.private_key.replace(/\r\n/g, '\n').trimEnd()}\n`, { mode: 0o600 });
      await writeFile(knownHosts, knownHostsFor(creds.known_hosts ?? ''), { mode: 0o600 });
      const port = String(creds.port ?? target.port ?? 22);
      if (!/^\d{1,5}$/.test(port)) throw new ResticError(`the SFTP repository's port is not a number: ${port}`);
      // restic splits this on spaces and runs it without a shell: no quoting, and every part is checked above.
      const ssh = [
        'ssh',
        '-F /dev/null',
        `-i ${keyFile}`,
        `-p ${port}`,
        `-o UserKnownHostsFile=${knownHosts}`,
        '-o GlobalKnownHostsFile=/dev/null',
        `-o HostKeyAlias=${HOST_ALIAS}`,
        '-o StrictHostKeyChecking=yes',
        '-o BatchMode=yes',
        '-o IdentitiesOnly=yes',
        '-o ConnectTimeout=30',
        // A repository host that stops answering ends the connection (and the command) within a minute or two.
        '-o ServerAliveInterval=15',
        '-o ServerAliveCountMax=6',
        `${target.user}@${target.host}`,
        '-s sftp',
      ].join(' ');
      global.push('-o', `sftp.command=${ssh}`);
    }
    return { argv: [...global, ...args], env, dir, secrets: secretsOf(repo), cleanup };
  } catch (err) {
    await cleanup();
    throw err;
  }
}

export interface Spawned {
  child: ChildProcess;
  /** Resolves with the exit code once restic ended (stderr collected); never rejects. */
  exit: Promise<{ code: number | null; stderr: string; timedOut: boolean }>;
}

/** Starts restic in its own process group (so its ssh child is killed with it), with the bound armed. */
export function spawnRestic(opts: ResticOptions, inv: Invocation, cwd?: string, stdout: 'pipe' | 'ignore' = 'pipe'): Spawned {
  const child = spawn('restic', inv.argv, { cwd, env: inv.env, stdio: ['ignore', stdout, 'pipe'], detached: true });
  if (child.pid !== undefined) opts.onSpawn?.(child.pid, ['restic', ...inv.argv]);
  let stderr = '';
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (chunk: string) => {
    stderr = (stderr + chunk).slice(-16_384); // the end says why
  });
  let timedOut = false;
  const signalGroup = (signal: NodeJS.Signals) => {
    try {
      process.kill(-child.pid!, signal);
    } catch {
      /* already gone */
    }
  };
  let killTimer: NodeJS.Timeout | undefined;
  const timer = setTimeout(
    () => {
      timedOut = true;
      // restic alone first: on SIGINT it removes its lock (through its ssh connection, still open).
      try {
        child.kill('SIGINT');
      } catch {
        /* already gone */
      }
      killTimer = setTimeout(() => signalGroup('SIGKILL'), 15_000);
    },
    opts.timeoutMs ?? 6 * 3600_000,
  );
  // An ssh child left behind would hold restic's pipes open: the group goes with restic.
  child.once('exit', () => signalGroup('SIGKILL'));
  const exit = new Promise<{ code: number | null; stderr: string; timedOut: boolean }>((resolve) => {
    child.once('error', (err) => {
      clearTimeout(timer);
      resolve({ code: null, stderr: `${stderr}\n${err.message}`, timedOut });
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      clearTimeout(killTimer);
      resolve({ code, stderr, timedOut });
    });
  });
  return { child, exit };
}

/** The ResticError for a failed command: its kind from restic's words, its message without secrets. */
export function resticFailure(what: string, repo: ResticRepository, inv: Invocation, stderr: string, timedOut: boolean): ResticError {
  const said = redact(stderr.trim(), inv.secrets);
  const where = `the restic repository at ${repo.location}`;
  if (timedOut) return new ResticError(`${what} on ${where} took too long and was stopped${said ? `: ${said}` : ''}`, 'timeout');
  if (/wrong password or no key found/.test(stderr))
    return new ResticError(`${what}: wrong password for ${where}: ${said}`, 'wrong_password');
  // Before "no repository": restic says "Is there a repository…?" after any failure to read its config.
  if (
    /AccessDenied|Access Denied|Access Key Id you provided does not exist|signature we calculated does not match|Permission denied|Host key verification failed/.test(
      stderr,
    )
  ) {
    return new ResticError(`${what}: ${where} refused access: ${said}`, 'access_denied');
  }
  if (/Is there a repository at the following location\?|unable to open config file|The specified bucket does not exist/.test(stderr)) {
    return new ResticError(`${what}: there is no restic repository at ${repo.location}: ${said}`, 'no_repository');
  }
  if (/repository is already locked/.test(stderr))
    return new ResticError(`${what}: ${where} is locked by another process: ${said}`, 'locked');
  return new ResticError(`${what} on ${where} failed${said ? `: ${said}` : ' (restic said nothing)'}`);
}
