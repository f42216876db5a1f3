// The README's walk-through as a new user runs it: the service started on a fresh database (as
// `npm start` does), then every shell block of "First administrator token" run with bash, as
// written (create-admin twice included), only the port changed. No answer may be an error, and
// the user ends with an operator's token and a job read and followed to its end (npm run cli -- wait).
// "The first trial by hand" needs an Odoo host: its commands are checked for bash's syntax and for
// the steps a deployment needs (the real run of the same steps is quickstart's, test-odoo).
import { randomBytes } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { databaseUrl, dropDatabase, REDIS_URL } from './helpers/pg.js';
import { childEnv, type ServiceProcess, startService } from './helpers/spawn.js';
import { freePort } from './helpers/sshd.js';

const name = `${inject('dbRun')}_readme_${randomBytes(3).toString('hex')}`;
let dir: string;
let port: number;
let env: Record<string, string>;
let service: ServiceProcess;

/** The ```sh blocks of a README section, in order. */
function shellBlocks(readme: string, heading: string): string[] {
  const start = readme.indexOf(`\n## ${heading}\n`);
  expect(start, heading).toBeGreaterThan(-1);
  const end = readme.indexOf('\n## ', start + 1);
  const section = readme.slice(start, end === -1 ? undefined : end);
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'svc-readme-'));
  port = await freePort();
  env = {
    DATABASE_URL: databaseUrl(name),
    REDIS_URL,
    QUEUE_PREFIX: name,
    SVC_MASTER_KEY_FILE: path.join(dir, 'master.key'),
    LOG_LEVEL: 'warn',
  };
  service = await startService({ ...env, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'info' });
});

afterAll(async () => {
  await service?.kill9();
  await dropDatabase(name);
  await rm(dir, { recursive: true, force: true });
});

describe('README: First administrator token', () => {
  it('runs as written on a fresh database, create-admin twice: every answer is a success', { timeout: 180_000 }, async () => {
    const blocks = shellBlocks(await readFile('README.md', 'utf8'), 'First administrator token');
    expect(blocks.length).toBeGreaterThanOrEqual(2);
    const script = blocks.join('\n').replaceAll('localhost:3000', `localhost:${port}`);
    expect(script.match(/create-admin/g)?.length).toBeGreaterThanOrEqual(2);

    const run = spawnSync('bash', ['-e', '-o', 'pipefail', '-c', script], { env: childEnv(env), encoding: 'utf8', timeout: 170_000 });
    expect(run.status, run.stderr).toBe(0);
    const out = run.stdout;
    expect(out).not.toMatch(/\{"error":\{/);
    // The operator's token, made for the user the walk-through created (its id taken from the answer).
    expect(out).toMatch(/"token":"svc_[A-Za-z0-9_-]{40,}"/);
    // The job of rotate_encryption_key, read back (the worker runs in the service).
    expect(out).toMatch(/"id":"maintenance-[^"]+",.*"name":"rotate_encryption_key"/);
    // The same job followed by the CLI to its end.
    expect(out).toMatch(/job maintenance-\S+ \(rotate_encryption_key\) completed: /);
  });
});

describe('README: The first trial by hand', () => {
  it('is bash, and builds the template on its Odoo host before the package deploys from it', async () => {
    const script = shellBlocks(await readFile('README.md', 'utf8'), 'The first trial by hand').join('\n');
    const syntax = spawnSync('bash', ['-n', '-c', script], { encoding: 'utf8' });
    expect(syntax.status, syntax.stderr).toBe(0);
    expect(script).not.toContain('localhost:3000');
    const order = [
      '/odoo-versions',
      '/actions/setup_odoo',
      '/database-templates',
      '\\"root_server_id\\":$HOST',
      '/actions/build',
      '/trial-packages',
    ];
    const at = order.map((step) => script.indexOf(step));
    expect(
      at.every((i) => i >= 0),
      JSON.stringify(at),
    ).toBe(true);
    expect([...at].sort((a, b) => a - b)).toEqual(at);
    expect(script.match(/npm run cli -- wait/g)).toHaveLength(3);
  });
});
