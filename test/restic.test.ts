// The backup server's restic engine (src/backup-server/restic.ts) with Debian's restic on the
// three kinds of repository it stores tenants in: a local one, an SFTP one through a real sshd
// (the key user), and an S3 one on the loopback stand-in (which checks each request's signature).
// Each backs up a folder laid out as Odoo's backup zip, lists, dumps, forgets, applies retention
// and checks; then the refusals: wrong password, wrong S3 key, unknown host key, no repository,
// a repository that never answers; and no secret on a command line or in an error.
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, existsSync, readdirSync, readFileSync } from 'node:fs';
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRestic, ResticError, type ResticRepository } from '../src/backup-server/restic.js';
import { invocation, resticFailure } from '../src/backup-server/restic-process.js';
import { startS3Server, type S3Server } from './helpers/s3-server.js';
import { TEST_USERS, useSshd } from './helpers/sshd.js';

const run = promisify(execFile);
const PATH = process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin';
const S3_KEY = { access_key_id: 'AKIASVCTESTBACKUP01', secret_access_key: 'wJalrXUtnFEMI-svc-test-s3-secret-0042' };
const SENTINEL = 'svc-restic-test-environment-sentinel';

const sshd = useSshd();
let s3: S3Server;
let root: string;
let work: string;
let sftpHome: string;
/** Every restic child's pid and command line as /proc showed it while it ran. */
const spawned: { pid: number; cmdline: string; environ: string }[] = [];

function onSpawn(pid: number): void {
  const read = (f: string) => {
    try {
      return readFileSync(`/proc/${pid}/${f}`, 'utf8').replaceAll('\0', ' ');
    } catch {
      return ''; // already ended
    }
  };
  spawned.push({ pid, cmdline: read('cmdline'), environ: read('environ') });
}
let engine: ReturnType<typeof createRestic>;

beforeAll(async () => {
  process.env.SVC_RESTIC_SENTINEL = SENTINEL; // must never reach restic's environment
  root = await mkdtemp(path.join(tmpdir(), 'svc-restic-test-'));
  engine = createRestic({ cacheDir: path.join(root, 'cache'), PATH, onSpawn });
  s3 = await startS3Server({ accounts: { [S3_KEY.access_key_id]: S3_KEY.secret_access_key, OTHERKEY: 'another-secret-key' } });
  work = path.join(root, 'work');
  await mkdir(path.join(work, 'filestore', 'ab'), { recursive: true });
  await mkdir(path.join(work, 'filestore', 'cd'), { recursive: true });
  const rows = Array.from({ length: 4000 }, (_, i) => `${i}\tpartner ${i}\t${randomBytes(12).toString('hex')}`).join('\n');
  await writeFile(path.join(work, 'dump.sql'), `COPY public.res_partner (id, name, ref) FROM stdin;\n${rows}\n\\.\n`);
  await writeFile(path.join(work, 'manifest.json'), JSON.stringify({ odoo_dump: '1', db_name: 'tenant_a', version: '18.0' }));
  await writeFile(path.join(work, 'filestore', 'ab', 'ab12cd34'), randomBytes(300_000));
  await writeFile(path.join(work, 'filestore', 'cd', 'cd56ef78'), randomBytes(120_000));
  sftpHome = `/home/${TEST_USERS.key.name}/svc-restic-${randomBytes(4).toString('hex')}`;
});

afterAll(async () => {
  delete process.env.SVC_RESTIC_SENTINEL;
  await s3?.stop();
  if (root) await rm(root, { recursive: true, force: true });
  if (sftpHome) await rm(sftpHome, { recursive: true, force: true });
});

function repositoryOf(provider: 'local' | 'sftp' | 's3', name: string, password = `pw-${name}-${'x'.repeat(24)}`): ResticRepository {
  if (provider === 'local') return { provider, location: path.join(root, 'repos', name), password };
  if (provider === 's3') return { provider, location: `s3:${s3.endpoint}/backups/${name}`, password, credentials: { ...S3_KEY } };
  return {
    provider,
    location: `sftp:${TEST_USERS.key.name}@${sshd.host}:${sftpHome}/${name}`,
    password,
    credentials: {
      private_key: sshd.keys.ed25519Openssh,
      known_hosts: readFileSync(path.join(sshd.dir, 'host_ed25519.pub'), 'utf8'),
      port: String(sshd.port),
    },
  };
}

async function caught(p: Promise<unknown>): Promise<ResticError> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ResticError);
  return err as ResticError;
}

/** Names and contents of a zip (python3's zipfile: a prerequisite of the tests). */
async function zipEntries(file: string): Promise<Record<string, string>> {
  const script =
    'import sys,zipfile,json,hashlib\nz=zipfile.ZipFile(sys.argv[1])\nprint(json.dumps({n:hashlib.sha256(z.read(n)).hexdigest() for n in z.namelist()}))';
  return JSON.parse((await run('python3', ['-c', script, file])).stdout);
}

const sha = async (file: string) =>
  (await import('node:crypto'))
    .createHash('sha256')
    .update(await readFile(file))
    .digest('hex');

describe.each(['local', 'sftp', 's3'] as const)('a %s repository', (provider) => {
  let repo: ResticRepository;
  let first: Awaited<ReturnType<typeof engine.backup>>;

  beforeAll(() => {
    repo = repositoryOf(provider, `main-${provider}`);
  });

  it('is made once, then opened again with its password; a wrong password is refused without showing it', async () => {
    await engine.init(repo);
    await engine.init(repo);
    const err = await caught(engine.init({ ...repo, password: 'a-wrong-password-9f8e7d' }));
    expect(err.code).toBe('wrong_password');
    expect(err.message).toContain('wrong password');
    expect(err.message).not.toContain('a-wrong-password-9f8e7d');
    expect(err.message).not.toContain(repo.password);
    const listing = await caught(engine.snapshots({ ...repo, password: 'a-wrong-password-9f8e7d' }));
    expect(listing.code).toBe('wrong_password');
  }, 90_000);

  it("backs up a folder's contents at the snapshot's root; the same folder again adds almost nothing", async () => {
    first = await engine.backup(repo, work, { tags: ['db:tenant_a', 'backup:1'], host: 'svc-backup' });
    expect(first.snapshotId).toMatch(/^[0-9a-f]{64}$/);
    expect(first.files).toBe(4);
    expect(first.bytesProcessed).toBeGreaterThan(420_000);
    expect(first.bytesAdded).toBeGreaterThan(420_000 * 0.5); // compressed text, random files
    const rawBefore = (await engine.stats(repo)).rawBytes;
    const second = await engine.backup(repo, work, { tags: ['db:tenant_a', 'backup:2'], host: 'svc-backup' });
    expect(second.snapshotId).not.toBe(first.snapshotId);
    expect(second.bytesProcessed).toBe(first.bytesProcessed);
    expect(second.bytesAdded).toBeLessThanOrEqual(first.bytesProcessed * 0.02);
    expect((await engine.stats(repo)).rawBytes - rawBefore).toBeLessThanOrEqual(first.bytesProcessed * 0.02);
  }, 90_000);

  it('lists snapshots by tags (all of them must match)', async () => {
    await engine.backup(repo, work, { tags: ['db:tenant_b', 'backup:3'], host: 'svc-backup' });
    const a = await engine.snapshots(repo, { tags: ['db:tenant_a'] });
    expect(a.map((s) => s.tags.sort())).toEqual([
      ['backup:1', 'db:tenant_a'],
      ['backup:2', 'db:tenant_a'],
    ]);
    expect(a[0]!.id).toBe(first.snapshotId);
    expect(a[0]!.time).toBeInstanceOf(Date);
    expect(Number.isNaN(a[0]!.time.getTime())).toBe(false);
    expect(await engine.snapshots(repo, { tags: ['db:tenant_a', 'backup:2'] })).toHaveLength(1);
    expect(await engine.snapshots(repo, { tags: ['db:nobody'] })).toEqual([]);
    expect(await engine.snapshots(repo)).toHaveLength(3);
  }, 60_000);

  it("dumps the snapshot as a zip with the folder's contents at its root, and one file as its bytes", async () => {
    const zip = path.join(root, `${provider}.zip`);
    const { stream, done } = engine.dump(repo, first.snapshotId, '/', { archive: 'zip' });
    await pipeline(stream, createWriteStream(zip));
    await done;
    const entries = await zipEntries(zip);
    expect(
      Object.keys(entries)
        .filter((n) => !n.endsWith('/'))
        .sort(),
    ).toEqual(['dump.sql', 'filestore/ab/ab12cd34', 'filestore/cd/cd56ef78', 'manifest.json']);
    expect(entries['filestore/ab/ab12cd34']).toBe(await sha(path.join(work, 'filestore', 'ab', 'ab12cd34')));
    expect(entries['dump.sql']).toBe(await sha(path.join(work, 'dump.sql')));

    const one = engine.dump(repo, first.snapshotId, '/dump.sql');
    const chunks: Buffer[] = [];
    for await (const c of one.stream) chunks.push(c as Buffer);
    await one.done;
    expect(Buffer.concat(chunks).equals(await readFile(path.join(work, 'dump.sql')))).toBe(true);

    const missing = engine.dump(repo, first.snapshotId, '/no-such-file');
    const closed = new Promise<boolean>((resolve) => {
      missing.stream.on('end', () => resolve(true));
      missing.stream.on('close', () => resolve(false));
    });
    missing.stream.resume();
    const err = await caught(missing.done);
    expect(err.message).toContain('path "/no-such-file" not found');
    expect(await closed).toBe(false); // closed without its end: a reader never takes it for a whole file
  }, 60_000);

  it('ends restic when the reader of a dump goes away', async () => {
    const pids: number[] = [];
    const watched = createRestic({ cacheDir: path.join(root, 'cache'), PATH, onSpawn: (pid) => pids.push(pid) });
    const { stream, done } = watched.dump(repo, first.snapshotId, '/', { archive: 'tar' });
    const readable = stream as Readable;
    await new Promise<void>((resolve) => readable.once('data', () => resolve()));
    readable.destroy(); // the downloader hung up; restic is blocked writing to the pipe
    const err = await caught(done);
    expect(err.message).toContain('the reader went away');
    for (const pid of pids) expect(existsSync(`/proc/${pid}`)).toBe(false);
  }, 60_000);

  it('forgets snapshots by id, and applies daily/weekly/monthly retention to one tenant only', async () => {
    const second = (await engine.snapshots(repo, { tags: ['db:tenant_a', 'backup:2'] }))[0]!;
    await engine.forget(repo, [second.id], { prune: true });
    expect((await engine.snapshots(repo, { tags: ['db:tenant_a'] })).map((s) => s.id)).toEqual([first.snapshotId]);

    // Snapshots of tenant r on given (UTC) days; tenant b's snapshot is outside the tags.
    const days = [
      '2024-01-01',
      '2024-01-15',
      '2024-02-01',
      '2024-02-20',
      '2024-03-01',
      '2024-03-02T08:00',
      '2024-03-02T20:00',
      '2024-03-03',
    ];
    const made = new Map<string, string>();
    for (const [i, day] of days.entries()) {
      const time = new Date(day.includes('T') ? `${day}:00Z` : `${day}T12:00:00Z`);
      const b = await engine.backup(repo, work, { tags: ['db:tenant_r', `backup:r${i}`], host: 'svc-backup', time });
      made.set(day, b.snapshotId);
    }
    const listed = await engine.snapshots(repo, { tags: ['db:tenant_r', 'backup:r0'] });
    expect(listed[0]!.time.toISOString()).toBe('2024-01-01T12:00:00.000Z');

    const result = await engine.applyRetention(repo, { tags: ['db:tenant_r'], keepDaily: 2, keepWeekly: 2, keepMonthly: 2 });
    // Daily: 03-03 and the later one of 03-02; weekly (ISO weeks): 03-03, 02-20; monthly: 03-03, 02-20.
    const kept = ['2024-03-03', '2024-03-02T20:00', '2024-02-20'].map((d) => made.get(d)!);
    expect(result.kept.sort()).toEqual([...kept].sort());
    expect(result.removed.sort()).toEqual(
      days
        .filter((d) => !['2024-03-03', '2024-03-02T20:00', '2024-02-20'].includes(d))
        .map((d) => made.get(d)!)
        .sort(),
    );
    expect((await engine.snapshots(repo, { tags: ['db:tenant_r'] })).map((s) => s.id).sort()).toEqual([...kept].sort());
    expect(await engine.snapshots(repo, { tags: ['db:tenant_b'] })).toHaveLength(1);
    expect(await engine.snapshots(repo, { tags: ['db:tenant_a'] })).toHaveLength(1);
  }, 180_000);

  it("passes restic's check, reading a part of the data back", async () => {
    const result = await engine.check(repo, { readDataSubset: '50%' });
    expect(result.ok).toBe(true);
    expect(result.output).toContain('no errors were found');
  }, 60_000);
});

describe('a folder made anew with the same files', () => {
  it("is taken as unchanged by the files' modification times and sizes, not read again (the backup server's work dir)", async () => {
    const repo = repositoryOf('local', 'reread');
    await engine.init(repo);
    const dir = path.join(root, 'reread-work');
    await cp(work, dir, { recursive: true, preserveTimestamps: true });
    const first = await engine.backup(repo, dir, { tags: ['db:tenant_r', 'backup:1'], host: 'svc-backup' });
    expect(first.filesUnmodified).toBe(0);
    // Made anew, as the work dir is for each backup: new inodes and change times, tar's kept mtimes.
    await rm(dir, { recursive: true });
    await cp(work, dir, { recursive: true, preserveTimestamps: true });
    const second = await engine.backup(repo, dir, { tags: ['db:tenant_r', 'backup:2'], host: 'svc-backup' });
    expect(second.filesUnmodified).toBe(4);
    expect(second.bytesAdded).toBeLessThanOrEqual(first.bytesProcessed * 0.02);
  }, 90_000);
});

describe('refusals', () => {
  it('an S3 account with a wrong secret, an unknown key, or whose access was withdrawn is refused', async () => {
    const repo = repositoryOf('s3', 'refusing');
    await engine.init(repo);
    const wrongSecret = await caught(engine.snapshots({ ...repo, credentials: { ...S3_KEY, secret_access_key: 'not-the-secret-0f1e2d' } }));
    expect(wrongSecret.code).toBe('access_denied');
    expect(wrongSecret.message).not.toContain('not-the-secret-0f1e2d');
    const unknown = await caught(
      engine.snapshots({ ...repo, credentials: { access_key_id: 'AKIANOBODY', secret_access_key: 'whatever-secret' } }),
    );
    expect(unknown.code).toBe('access_denied');
    s3.refuse(true);
    try {
      const withdrawn = await caught(engine.backup(repo, work, { tags: ['db:x'], host: 'svc-backup' }));
      expect(withdrawn.code).toBe('access_denied');
      expect(withdrawn.message).toContain('Access Denied');
    } finally {
      s3.refuse(false);
    }
    expect(await engine.snapshots(repo)).toEqual([]);
  }, 120_000);

  it('an SFTP host whose key is not the known one is refused (and the private dir is gone)', async () => {
    const repo = repositoryOf('sftp', 'hostkey');
    const other = readFileSync(path.join(sshd.dir, 'rsa_openssh.pub'), 'utf8'); // a key, not the host's
    const err = await caught(engine.init({ ...repo, credentials: { ...repo.credentials!, known_hosts: other } }));
    expect(err.code).toBe('access_denied');
    expect(err.message).toContain('Host key verification failed');
    expect(err.message).not.toContain(repo.password);
  }, 60_000);

  it('a repository that is not there is refused clearly', async () => {
    const local = await caught(engine.snapshots(repositoryOf('local', 'never-made')));
    expect(local.code).toBe('no_repository');
    expect(local.message).toContain(`there is no restic repository at ${path.join(root, 'repos', 'never-made')}`);
    const bucket = await caught(engine.snapshots({ ...repositoryOf('s3', 'x'), location: `s3:${s3.endpoint}/no-such-bucket` }));
    expect(bucket.code).toBe('no_repository');
    const sftp = await caught(engine.snapshots(repositoryOf('sftp', 'never-made')));
    expect(sftp.code).toBe('no_repository');
    const empty = await caught(engine.snapshots({ provider: 'local', location: '', password: 'pw-0123456789abcdef' }));
    expect(empty.message).toContain('no restic repository location');
  }, 60_000);

  it('a repository that never answers fails the command at its bound, restic and its children ended', async () => {
    const silent: Server = createServer(() => {}); // accepts, never answers
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const pids: number[] = [];
    const bounded = createRestic({ cacheDir: path.join(root, 'cache'), PATH, timeoutMs: 2000, onSpawn: (pid) => pids.push(pid) });
    try {
      const repo = { ...repositoryOf('s3', 'x'), location: `s3:http://127.0.0.1:${(silent.address() as { port: number }).port}/bucket` };
      const err = await caught(bounded.snapshots(repo));
      expect(err.code).toBe('timeout');
      expect(err.message).toContain('took too long');
      for (const pid of pids) expect(existsSync(`/proc/${pid}`)).toBe(false);
    } finally {
      silent.close();
    }
  }, 60_000);
});

describe('locks', () => {
  let repo: ResticRepository;
  let snapshotId: string;
  const locks = () => readdirSync(path.join(repo.location, 'locks'));
  const until = async (cond: () => boolean) => {
    while (!cond()) await new Promise((r) => setTimeout(r, 50));
  };

  beforeAll(async () => {
    repo = repositoryOf('local', 'locks');
    await engine.init(repo);
    snapshotId = (await engine.backup(repo, work, { tags: ['db:lock'], host: 'svc-backup' })).snapshotId;
  }, 60_000);

  it('a prune waits for a dump that holds the repository, then runs', async () => {
    let tries = 0;
    const waiting = createRestic({ cacheDir: path.join(root, 'cache'), PATH, lockWaitMs: 120_000, onSpawn: () => tries++ });
    const dump = engine.dump(repo, snapshotId, '/', { archive: 'tar' }); // not read yet: restic blocks, holding its lock
    await until(() => locks().length > 0);
    const retention = waiting.applyRetention(repo, { tags: ['db:lock'], keepDaily: 1, keepWeekly: 0, keepMonthly: 0 });
    await until(() => tries >= 2); // its forget was refused (then `unlock`, which keeps a live process's lock)
    let bytes = 0;
    for await (const c of dump.stream) bytes += (c as Buffer).length;
    await dump.done;
    expect(bytes).toBeGreaterThan(420_000);
    expect((await retention).kept).toEqual([snapshotId]);
  }, 120_000);

  it('a lock left by a killed restic is cleared (restic 0.14 does not ignore it)', async () => {
    const child = spawn(
      'restic',
      ['--cache-dir', path.join(root, 'cache'), '--repo', repo.location, 'dump', '--archive=tar', snapshotId, '/'],
      {
        env: { PATH, HOME: root, RESTIC_PASSWORD: repo.password },
        stdio: ['ignore', 'pipe', 'ignore'], // stdout never read: it blocks with its lock held
      },
    );
    await until(() => locks().length > 0);
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
    expect(locks()).toHaveLength(1); // left behind
    const impatient = createRestic({ cacheDir: path.join(root, 'cache'), PATH, lockWaitMs: 5_000 });
    const result = await impatient.applyRetention(repo, { tags: ['db:lock'], keepDaily: 1, keepWeekly: 0, keepMonthly: 0 });
    expect(result.kept).toEqual([snapshotId]);
    expect(locks()).toHaveLength(0);
  }, 60_000);
});

describe('secrets', () => {
  it("never appear on restic's or ssh's command line; restic's environment is its own", async () => {
    spawned.length = 0;
    const seen = new Map<number, string>();
    const watch = setInterval(() => {
      for (const entry of readdirSync('/proc')) {
        if (!/^\d+$/.test(entry)) continue;
        try {
          const cmd = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' ');
          if (cmd.includes('svc-backup-repository') || cmd.startsWith('restic ')) seen.set(Number(entry), cmd);
        } catch {
          /* ended */
        }
      }
    }, 10);
    const s = repositoryOf('sftp', 'secrets');
    const b = repositoryOf('s3', 'secrets');
    try {
      await engine.init(s);
      await engine.backup(s, work, { tags: ['db:secret'], host: 'svc-backup' });
      await engine.init(b);
      await engine.backup(b, work, { tags: ['db:secret'], host: 'svc-backup' });
    } finally {
      clearInterval(watch);
    }
    const keyLines = s.credentials!.private_key!.split('\n').filter((l) => l.length > 20);
    const secrets = [s.password, b.password, S3_KEY.secret_access_key, S3_KEY.access_key_id, ...keyLines];
    const lines = [...seen.values(), ...spawned.map((p) => p.cmdline)];
    expect(lines.some((l) => l.startsWith('ssh '))).toBe(true); // the sftp connection was seen
    expect(spawned.length).toBeGreaterThanOrEqual(4);
    for (const line of lines) for (const secret of secrets) expect(line).not.toContain(secret);
    for (const p of spawned.filter((x) => x.environ)) {
      expect(p.environ).not.toContain(SENTINEL);
      expect(p.environ).toMatch(/(^| )RESTIC_PASSWORD=/);
    }
    // The private directory holding the key and known_hosts is gone after each command.
    const dirs = lines.flatMap((l) => [...l.matchAll(/-i (\S+)\/id /g)].map((m) => m[1]!));
    expect(dirs.length).toBeGreaterThan(0);
    for (const dir of dirs) expect(existsSync(dir)).toBe(false);
  }, 120_000);

  it('stay in the environment and 0600 files: the argv restic is given holds none', async () => {
    const repo = repositoryOf('sftp', 'argv');
    const inv = await invocation({ cacheDir: path.join(root, 'cache'), PATH }, repo, ['snapshots']);
    try {
      const argv = inv.argv.join(' ');
      expect(argv).not.toContain(repo.password);
      expect(argv).not.toContain('OPENSSH PRIVATE KEY');
      expect(argv).toContain('StrictHostKeyChecking=yes');
      expect(argv).toContain('BatchMode=yes');
      expect(argv).toContain('IdentitiesOnly=yes');
      expect(Object.keys(inv.env).sort()).toEqual(['HOME', 'PATH', 'RESTIC_PASSWORD', 'TMPDIR', 'TZ']);
      expect(inv.env.HOME).toBe(inv.dir);
      // Whatever restic would echo back (a password, a line of the key) is redacted from the error.
      const keyLine = repo.credentials!.private_key!.split('\n')[1]!;
      const failure = resticFailure('listing', repo, inv, `Fatal: ${repo.password} / ${keyLine}`, false);
      expect(failure.message).toContain('[redacted]');
      expect(failure.message).not.toContain(repo.password);
      expect(failure.message).not.toContain(keyLine);
    } finally {
      await inv.cleanup();
    }
    expect(existsSync(inv.dir)).toBe(false);
  });
});
