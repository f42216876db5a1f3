// A hostile git host's tarball must not write outside the new release directory. The deploy runs
// `tar --strip-components=1` on the root server, often as root: an entry `top//tmp/x` becomes
// `/tmp/x` once its top directory is stripped, and GNU tar wrote it there. Real parts: PostgreSQL,
// Redis, the BullMQ worker, an OpenSSH server on loopback with tar and python3 behind it; the git
// host (test/helpers/git-host.ts) serves hand-made tarballs (test/helpers/tar.ts) for a commit.
import { randomBytes } from 'node:crypto';
import { chmod, mkdir, readdir, readFile, readlink, realpath, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { confirmedRootServer, request, waitForJob } from './helpers/api.js';
import { createGitAccount, useGitFixture } from './helpers/git-fixture.js';
import { keyLogin, TEST_USERS } from './helpers/sshd.js';
import { paxRecord, tarball, type TarEntry } from './helpers/tar.js';
import { releasesDir } from '../src/git/deploy-script.js';

const TOKEN = 'ghp_TarballTest0123456789abcdefABCDEF';

const g = useGitFixture(TOKEN);
const t = g.t;
/** Where a hostile entry aims: writable by everyone, so only the check can keep it empty. */
let outside: string;
beforeAll(async () => {
  outside = path.join(g.scratch, 'outside');
  await mkdir(outside);
  await chmod(outside, 0o777);
});

let keyServer: number;
let sudoServer: number;
let accountId: number;
beforeAll(async () => {
  keyServer = (await confirmedRootServer(t.app, t.as.operator, g.sshd, keyLogin(g.sshd))).id;
  const sudo = TEST_USERS.sudoPassword;
  sudoServer = (await confirmedRootServer(t.app, t.as.operator, g.sshd, { username: sudo.name, password: sudo.password, sudo_user: true }))
    .id;
  accountId = (await createGitAccount(t, TOKEN)).id;
});

let seq = 0;
let crafted = 0;
/** A repository deployed once from a real commit; `deploy(entries)` then deploys a tarball made of them. */
async function deployedRepository(rootServerId: number) {
  const name = `acme/hostile-${++seq}`;
  const remote = await g.host.repo(name);
  remote.commit({ 'm/ok.py': 'OK = 1\n' }, 'good');
  const created = await request(t.app, t.as.admin, {
    method: 'POST',
    url: '/api/v1/git-repositories',
    // Its own directory: one made as root through sudo would be closed to the login user.
    payload: {
      name,
      branch_name: 'main',
      git_account_id: accountId,
      root_server_id: rootServerId,
      deploy_path: path.join(g.scratch, `deploy-${seq}`, 'addons'),
    },
  });
  expect(created.statusCode, created.body).toBe(201);
  const id = created.json().id as number;
  const live = String(created.json().deploy_path);
  const pushCommit = async () => {
    const res = await request(t.app, t.as.admin, { method: 'POST', url: `/api/v1/git-repositories/${id}/actions/push_commit` });
    expect(res.statusCode, res.body).toBe(202);
    return waitForJob(t.app, t.as.admin, res.json().job_id, 30_000);
  };
  const first = await pushCommit();
  expect(first.state, first.error).toBe('completed');
  /** The top directory of the host's tarball of a commit. */
  const top = (sha: string) => `${name.replace('/', '-')}-${sha.slice(0, 7)}`;
  return {
    id,
    live,
    top,
    async deploy(entries: (top: string) => TarEntry[]) {
      const sha = remote.commit({ 'crafted.txt': `${++crafted}\n` }, 'crafted');
      g.host.craftedTarballs.set(sha, tarball(entries(top(sha))));
      return { sha, job: await pushCommit() };
    },
  };
}

const deployments = (id: number) =>
  t.ctx.db.actionLog.findMany({
    where: { model_name: 'svc.saas.git.repository', rec_id: id, action_type: 'deployment' },
    orderBy: { id: 'asc' },
  });

describe('push_commit refuses a tarball entry that would land outside the release directory', () => {
  // Each turns into a write outside the release under GNU tar's --strip-components=1 (tar 1.34
  // wrote the first four and made the hard link): the entry as written, and what the error names.
  const hostile: {
    what: string;
    entries: (top: string) => TarEntry[];
    named: (top: string) => string;
    reason: RegExp;
    /** Refused while the server already unpacks the tree (else before the command even starts, or at once). */
    streamed?: true;
  }[] = [
    {
      what: 'top//abs: absolute once the top directory is stripped',
      entries: (top) => [{ name: `${top}/${outside}/abs.py`, data: 'X = 1\n' }],
      named: (top) => `${top}/${outside}/abs.py`,
      reason: /is the absolute path/,
    },
    {
      what: 'a leading slash too (/top//abs)',
      entries: (top) => [{ name: `/${top}/${outside}/lead.py`, data: 'X = 1\n' }],
      named: (top) => `/${top}/${outside}/lead.py`,
      reason: /is the absolute path/,
    },
    {
      what: 'an innocent name that a pax path overrides',
      entries: (top) => [{ name: `${top}/innocent.py`, data: 'X = 1\n', pax: { path: `${top}/${outside}/pax.py` } }],
      named: (top) => `${top}/${outside}/pax.py`,
      reason: /is the absolute path/,
    },
    {
      what: 'a ustar prefix joined to a name starting with /',
      entries: (top) => [{ prefix: top, name: `${outside}/prefixed.py`, data: 'X = 1\n' }],
      named: (top) => `${top}//${outside.slice(1)}/prefixed.py`,
      reason: /is the absolute path/,
    },
    {
      what: 'a hard link whose target is absolute once stripped',
      entries: (top) => [{ name: `${top}/m/linked.py`, type: '1', linkname: `${top}/${outside}/target.py` }],
      named: (top) => `${top}/m/linked.py`,
      reason: /is a hard link/,
    },
    {
      what: 'a .. after a dot (top/./../x)',
      entries: (top) => [{ name: `${top}/./../${path.relative(g.scratch, outside)}/dotdot.py`, data: 'X = 1\n' }],
      named: (top) => `${top}/./../${path.relative(g.scratch, outside)}/dotdot.py`,
      reason: /has a "\.\." component/,
    },
    {
      what: 'a symlink to an absolute path, and a file written through it',
      entries: (top) => [
        { name: `${top}/escape`, type: '2', linkname: outside },
        { name: `${top}/escape/through.py`, data: 'X = 1\n' },
      ],
      named: (top) => `${top}/escape`,
      reason: /is a symlink to "\/[^"]*\/outside", which is an absolute path/,
    },
    {
      what: 'a symlink whose .. climbs above the release directory',
      entries: (top) => [{ name: `${top}/m/linked.py`, type: '2', linkname: `${'../'.repeat(10)}${outside.slice(1)}/target.py` }],
      named: (top) => `${top}/m/linked.py`,
      reason: /is a symlink to "(\.\.\/){10}.*target\.py", which leaves the release directory/,
    },
    {
      // Read as text, loop/../.. stays in the tree; but loop is a link to m, so each .. climbs from m.
      what: 'a symlink whose .. follows a name that is itself a symlink',
      entries: (top) => [
        { name: `${top}/m/loop`, type: '2', linkname: '.' },
        {
          name: `${top}/m/linked.py`,
          type: '2',
          pax: { linkpath: `${'loop/'.repeat(25)}${'../'.repeat(26)}${outside.slice(1)}/target.py` },
        },
      ],
      named: (top) => `${top}/m/linked.py`,
      reason: /is a symlink to "loop\/.*target\.py", which has a "\.\." after a name/,
    },
    {
      // x is a link to the release directory itself: x/x/…/linked.py lands there, 25 levels higher than its name says.
      what: 'a symlink placed through another symlink',
      entries: (top) => [
        { name: `${top}/x`, type: '2', linkname: '.' },
        {
          name: `${top}/linked.py`,
          type: '2',
          pax: { path: `${top}/${'x/'.repeat(25)}linked.py`, linkpath: `${'../'.repeat(25)}${outside.slice(1)}/target.py` },
        },
      ],
      named: (top) => `${top}/${'x/'.repeat(25)}linked.py`,
      reason: /is a symlink to "(\.\.\/){25}.*target\.py" inside the symlink "x"/,
    },
    {
      what: 'top//abs after megabytes of good files (refused while the tree streams)',
      entries: (top) => [
        ...Array.from({ length: 8 }, (_, i) => ({ name: `${top}/m/blob${i}.txt`, data: randomBytes(512 * 1024) })),
        { name: `${top}/${outside}/late.py`, data: 'X = 1\n' },
      ],
      named: (top) => `${top}/${outside}/late.py`,
      reason: /is the absolute path/,
      streamed: true,
    },
  ];

  // Through sudo, as root: where the write would land anywhere. One vector as the login user too.
  const cases = [
    ...hostile.map((h) => ({ ...h, server: 'sudo' as const })),
    { ...hostile[0]!, server: 'key' as const },
    { ...hostile.at(-1)!, server: 'key' as const },
  ];
  for (const h of cases) {
    it(`${h.what} (${h.server === 'sudo' ? 'as root through sudo' : 'as the login user'}): refused before anything is written, the job names the entry, the live path stays`, async () => {
      const repo = await deployedRepository(h.server === 'sudo' ? sudoServer : keyServer);
      const before = await readlink(repo.live);
      await rm(outside, { recursive: true, force: true });
      await mkdir(outside, { mode: 0o777 });
      await chmod(outside, 0o777);
      const target = path.join(outside, 'target.py');
      await writeFile(target, 'TARGET = 1\n');
      // The hostile entry comes after good ones, as it would inside a real tree.
      const { sha, job } = await repo.deploy((top) => [
        { name: `${top}/`, type: '5' },
        { name: `${top}/m/`, type: '5' },
        { name: `${top}/m/good.py`, data: 'GOOD = 1\n' },
        ...h.entries(top),
        { name: `${top}/m/after.py`, data: 'AFTER = 1\n' },
      ]);
      // Nothing outside: not a file, not a link to one.
      expect((await readdir(outside)).sort()).toEqual(['target.py']);
      expect((await stat(target)).nlink).toBe(1);
      const entry = JSON.stringify(h.named(repo.top(sha)));
      expect(job.state).toBe('failed');
      expect(job.error).toContain(`The tarball of ${sha.slice(0, 12)} is refused: the entry ${entry}`);
      expect(job.error).toMatch(h.reason);
      // The live path never moved. The refused entry and those after it never reached the server
      // (GNU tar skips a ".." entry and goes on: after.py would be there); those before it may
      // have been unpacked into the new release, which never goes live.
      expect(await readlink(repo.live)).toBe(before);
      expect(await readFile(path.join(repo.live, 'm', 'ok.py'), 'utf8')).toBe('OK = 1\n');
      const unpacked = await readdir(releasesDir(repo.live), { recursive: true });
      expect(unpacked.filter((f) => /(^|\/)(after|linked)\.py$/.test(f))).toEqual([]);
      if (h.streamed) {
        expect(await t.ctx.db.actionLog.count({ where: { job_id: job.id, action_type: 'ssh_command' } })).toBe(1);
      }
      // The refusal is in the repository's action log and chatter.
      const row = (await deployments(repo.id)).at(-1)!;
      expect(row).toMatchObject({ status: 'failure', job_id: job.id });
      expect(row.output_text).toContain(entry);
      const said = await t.ctx.db.message.findFirst({
        where: { model_name: 'svc.saas.git.repository', rec_id: repo.id },
        orderBy: { id: 'desc' },
      });
      expect(said?.body).toContain(
        `Deploy of ${sha.slice(0, 12)} failed: The tarball of ${sha.slice(0, 12)} is refused: the entry ${entry}`,
      );
    });
  }

  it('names that stay inside deploy: ./ entries, ./ and // inside a path, pax paths, symlinks into the tree, git’s own pax headers', async () => {
    const repo = await deployedRepository(keyServer);
    const long = `m/${'deep/'.repeat(25)}long.py`; // over 100 bytes: git archive writes a pax path
    const { job } = await repo.deploy((top) => [
      { name: 'pax_global_header', type: 'g', data: paxRecord('comment', 'a'.repeat(40)) },
      { name: './', type: '5' },
      { name: `${top}/`, type: '5' },
      { name: `${top}/./m/dot.py`, data: 'DOT = 1\n' },
      { name: `${top}/m//slashes.py`, data: 'SLASHES = 1\n' },
      { name: `${top}/long`, data: 'LONG = 1\n', pax: { path: `${top}/${long}` } },
      { name: `${top}/m/link.py`, type: '2', linkname: 'dot.py' },
      { name: `${top}/m/sub/up.py`, type: '2', linkname: './../../m/.//dot.py' },
      { name: `${top}/m/sub/root`, type: '2', linkname: '../..' },
    ]);
    expect(job.state, job.error).toBe('completed');
    expect(await readFile(path.join(repo.live, 'm', 'dot.py'), 'utf8')).toBe('DOT = 1\n');
    expect(await readFile(path.join(repo.live, 'm', 'slashes.py'), 'utf8')).toBe('SLASHES = 1\n');
    expect(await readFile(path.join(repo.live, long), 'utf8')).toBe('LONG = 1\n');
    expect(await readlink(path.join(repo.live, 'm', 'link.py'))).toBe('dot.py');
    // Symlinks whose target stays in the release, .. included, resolve there.
    expect(await readFile(path.join(repo.live, 'm', 'sub', 'up.py'), 'utf8')).toBe('DOT = 1\n');
    expect(await realpath(path.join(repo.live, 'm', 'sub', 'root'))).toBe(await realpath(repo.live));
  });
});
