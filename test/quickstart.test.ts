// `npm run cli -- quickstart` as an operator runs it (a child process, the service's own entry),
// with the tests' sshd as "this machine" (its sudo NOPASSWD user: root through sudo; its
// authorized_keys file named with --authorized-keys). Refusals: every missing prerequisite in one
// line, nothing changed (svc's database not even made, authorized_keys as it was); without
// --trust-this-machine the key is not added and the output says what to do. Convergence: a second
// run finds every record it made and changes none of them (the real Odoo's part, setup_odoo and on,
// is test-odoo/odoo-quickstart.test.ts: this source holds no odoo-bin, so setup_odoo fails there).
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { environment, loadConfig } from '../src/core/config.js';
import { applyDomain } from '../src/quickstart/domain-env.js';
import { clusterSnapshot, dropWhatWasMade, type ClusterSnapshot } from './helpers/cluster-cleanup.js';
import { adminQuery, databaseUrl, REDIS_URL } from './helpers/pg.js';
import { childEnv } from './helpers/spawn.js';
import { freePort, TEST_USERS, useSshd } from './helpers/sshd.js';
import { tarball } from './helpers/tar.js';

const sshd = useSshd();
const user = TEST_USERS.sudoNoPassword.name;
const name = `${inject('dbRun')}_qs_${randomBytes(3).toString('hex')}`;
let dir: string;
let source: string;
let sha256: string;
let before: ClusterSnapshot;

beforeAll(async () => {
  before = await clusterSnapshot();
  dir = await mkdtemp(path.join(tmpdir(), 'svc-quickstart-'));
  await chmod(dir, 0o755);
  // A tarball that is no Odoo source (no odoo-bin): setup_odoo refuses it on the host.
  const archive = tarball([{ name: 'not-odoo/README', data: 'not an Odoo source\n' }], { gzip: true });
  source = path.join(dir, 'odoo.tar.gz');
  await writeFile(source, archive);
  sha256 = createHash('sha256').update(archive).digest('hex');
});

afterAll(async () => {
  // svc's database, and what it records as made on the cluster (the host's role setup_odoo made).
  const problems = await dropWhatWasMade([name], before);
  if (problems.length > 0) throw new Error(`Not dropped on PostgreSQL:\n  ${problems.join('\n  ')}`);
  if (dir) await rm(dir, { recursive: true, force: true });
});

const env = () => ({
  DATABASE_URL: databaseUrl(name),
  REDIS_URL,
  QUEUE_PREFIX: name,
  SVC_MASTER_KEY_FILE: path.join(dir, 'data', 'master.key'),
  MAIL_DIR: path.join(dir, 'mail'),
  ODOO_BASE_PATH: path.join(dir, 'odoo'),
  LOG_LEVEL: 'warn',
});

/** quickstart as a child process (asynchronous: the tests' sshd writes its log to this process meanwhile). */
function quickstart(args: string[], extraEnv: Record<string, string> = {}): Promise<{ status: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'quickstart', ...args], {
      env: childEnv({ ...env(), ...extraEnv }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    child.once('exit', (status) => resolve({ status, out, err }));
  });
}

const keysFile = () => path.join(sshd.dir, 'authorized_keys', user);
const thisMachine = () => ['--ssh-port', String(sshd.port), '--ssh-user', user, '--authorized-keys', keysFile()];

async function databaseExists() {
  return (await adminQuery('SELECT 1 FROM pg_database WHERE datname = $1', [name])).length > 0;
}

describe('quickstart refuses a machine without its prerequisites', { timeout: 120_000 }, () => {
  it('says each missing one in one line and changes nothing', async () => {
    const closed = await freePort();
    const keysBefore = await readFile(keysFile(), 'utf8');
    const run = await quickstart(
      [
        '--odoo-source',
        path.join(dir, 'missing.tar.gz'),
        '--sha256',
        sha256,
        '--ssh-port',
        String(closed),
        '--ssh-user',
        user,
        '--authorized-keys',
        keysFile(),
      ],
      { REDIS_URL: `redis://127.0.0.1:${await freePort()}` },
    );
    expect(run.status, run.out + run.err).toBe(1);
    const lines = run.err.trim().split('\n');
    expect(lines[0]).toMatch(/nothing was changed/);
    const missing = lines.slice(1);
    expect(missing).toHaveLength(4);
    expect(missing.filter((l) => l.startsWith(`- an SSH server on 127.0.0.1:${closed}`))).toHaveLength(1);
    expect(missing.filter((l) => l.startsWith('- Redis: '))).toHaveLength(1);
    expect(missing.filter((l) => l.includes('missing.tar.gz (--odoo-source): no such file'))).toHaveLength(1);
    expect(missing.filter((l) => l.startsWith(`- svc's SSH key in ${keysFile()}: run again with --trust-this-machine`))).toHaveLength(1);
    expect(await databaseExists()).toBe(false);
    expect(await readFile(keysFile(), 'utf8')).toBe(keysBefore);
  });

  it('a checksum that differs is one line too', async () => {
    const run = await quickstart(['--odoo-source', source, '--sha256', 'a'.repeat(64), '--trust-this-machine', ...thisMachine()]);
    expect(run.status).toBe(1);
    expect(run.err.trim().split('\n').slice(1)).toEqual([
      `- the Odoo source with SHA-256 ${'a'.repeat(64)} (--sha256): ${source} has ${sha256}`,
    ]);
    expect(await databaseExists()).toBe(false);
  });

  it('without --trust-this-machine: authorized_keys untouched, and it says what to do', async () => {
    const keysBefore = await readFile(keysFile(), 'utf8');
    const run = await quickstart(['--odoo-source', source, '--sha256', sha256, ...thisMachine()]);
    expect(run.status).toBe(1);
    const pub = (await readFile(path.join(dir, 'data', 'ssh', 'svc_ed25519.pub'), 'utf8')).trim();
    expect(run.err.trim().split('\n').slice(1)).toEqual([
      `- svc's SSH key in ${keysFile()}: run again with --trust-this-machine to add it there, or add this line to it yourself: ${pub}`,
    ]);
    expect(await readFile(keysFile(), 'utf8')).toBe(keysBefore);
    expect(await databaseExists()).toBe(false);
  });
});

/** The records quickstart makes before Odoo, as the database holds them. */
async function records() {
  const client = new pg.Client({ connectionString: databaseUrl(name) });
  await client.connect();
  try {
    const rows = async (sql: string) => (await client.query(sql)).rows;
    return {
      root_servers: await rows('SELECT * FROM root_servers ORDER BY id'),
      postgresql_servers: await rows('SELECT * FROM postgresql_servers ORDER BY id'),
      odoo_versions: await rows('SELECT * FROM odoo_versions ORDER BY id'),
      users: await rows('SELECT * FROM users ORDER BY id'),
      tokens: await rows('SELECT id, user_id, name FROM api_tokens ORDER BY id'),
    };
  } finally {
    await client.end();
  }
}

describe('quickstart with --trust-this-machine', { timeout: 10 * 60_000 }, () => {
  it('adds the key once, makes the root server (host key recorded), the PostgreSQL server and the version; a second run changes none of them', async () => {
    const first = await quickstart(['--odoo-source', source, '--sha256', sha256, '--trust-this-machine', ...thisMachine()]);
    // No odoo-bin in this source: setup_odoo refuses it, after the records before it were made.
    expect(first.status, first.out + first.err).toBe(1);
    expect(first.out).toContain(`added to ${keysFile()} (--trust-this-machine)`);
    expect(first.out).toMatch(/root server \d+ \(.*\): created with svc's key/);
    expect(first.err).toMatch(/setup_odoo on root server \d+ failed \(job .*\): .*odoo-bin/);
    const made = await records();
    expect(made.root_servers).toHaveLength(1);
    expect(made.root_servers[0]).toMatchObject({ state: 'confirmed', host_key: sshd.hostKey, username: user, port: sshd.port });
    expect(made.postgresql_servers).toHaveLength(1);
    expect(made.odoo_versions).toMatchObject([{ name: '18.0', source_url: `file://${source}`, source_sha256: sha256 }]);
    // quickstart's own session token is revoked at its end.
    expect(made.tokens).toEqual([]);

    const second = await quickstart(['--odoo-source', source, '--sha256', sha256, '--trust-this-machine', ...thisMachine()]);
    expect(second.status).toBe(1);
    expect(second.out).toContain(`svc's SSH key is in ${keysFile()}`);
    expect(second.out).toMatch(/root server \d+: already confirmed/);
    expect(second.out).toMatch(/PostgreSQL server \d+ .*: already there/);
    expect(second.out).toMatch(/Odoo version \d+ \(18\.0\): already there/);
    // setup_odoo, failed the first time, is run again (the one thing not right): its job id and
    // the row's updated_at are that attempt's; nothing else of any record changes.
    const retried = (r: Awaited<ReturnType<typeof records>>) => ({
      ...r,
      root_servers: r.root_servers.map(({ odoo_job_id: _, updated_at: __, ...rest }) => rest),
    });
    expect(second.out).not.toMatch(/created|put right/);
    expect(retried(await records())).toEqual(retried(made));
    const pub = (await readFile(path.join(dir, 'data', 'ssh', 'svc_ed25519.pub'), 'utf8')).trim();
    expect((await readFile(keysFile(), 'utf8')).split('\n').filter((l) => l === pub)).toHaveLength(1);
  });
});

describe('quickstart --domain', () => {
  it("writes SUBSCRIPTION_URL for the tenants' domain in .env (its other lines kept), and the configuration read again has it", async () => {
    const envDir = await mkdtemp(path.join(tmpdir(), 'svc-quickstart-env-'));
    try {
      await writeFile(path.join(envDir, '.env'), 'PORT=3001\nSUBSCRIPTION_URL=http://{database_name}.localhost\n');
      const printed: string[] = [];
      const config = loadConfig(environment(envDir, {}));
      const after = await applyDomain(config, 'odoo.example.com', (l) => printed.push(l), envDir, {});
      expect(after.SUBSCRIPTION_URL).toBe('https://{database_name}.odoo.example.com');
      expect(await readFile(path.join(envDir, '.env'), 'utf8')).toBe(
        'PORT=3001\nSUBSCRIPTION_URL=https://{database_name}.odoo.example.com\n',
      );
      expect(printed).toEqual([
        `SUBSCRIPTION_URL=https://{database_name}.odoo.example.com written in ${path.join(envDir, '.env')} (--domain)`,
      ]);
      // Right already: nothing written.
      expect(await applyDomain(after, 'odoo.example.com', (l) => printed.push(l), envDir, {})).toBe(after);
      expect(printed).toHaveLength(1);
    } finally {
      await rm(envDir, { recursive: true, force: true });
    }
  });
});
