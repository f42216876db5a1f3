// Git integration through the HTTP API and the real BullMQ workers. Real: PostgreSQL, Redis, an
// OpenSSH server on loopback (test/helpers/sshd.ts) logging in a real user, tar and python3 on that
// "server", and real git repositories. Stand-in: the git host (test/helpers/git-host.ts), a local
// HTTP server implementing the part of GitHub's REST API the service uses, whose tarball endpoint redirects, as GitHub's
// does, to a second server streaming a real `git archive` .tar.gz for a short-lived URL token.
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createHmac } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, mkdir, readFile, readlink, readdir, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { actionsOf, confirmedRootServer, request, waitForJob } from './helpers/api.js';
import { createGitAccount, useGitFixture } from './helpers/git-fixture.js';
import { keyLogin, startSshd, TEST_USERS, type Sshd } from './helpers/sshd.js';
import { DEPLOY_EXIT, deployScript, KEPT_RELEASES, readDeployOutput, releasesDir } from '../src/git/deploy-script.js';
import type { TestRepo } from './helpers/git-host.js';
import { gitJobs } from '../src/git/git-job-specs.js';

const TOKEN = 'ghp_TestToken0123456789abcdefABCDEF';
/** GIT_DEPLOY_MAX_BYTES of these tests. */
const MAX_TREE = 256 * 1024;

const g = useGitFixture(TOKEN, { GIT_DEPLOY_MAX_BYTES: String(MAX_TREE) });
const t = g.t;
let serverId: number;
let accountId: number;

beforeAll(async () => {
  serverId = (await confirmedRootServer(t.app, t.as.operator, g.sshd, keyLogin(g.sshd))).id;
  accountId = (await createAccount(TOKEN)).id;
});

const createAccount = (token: string) => createGitAccount(t, token, { name: 'acme' });

let repoSeq = 0;
/** A repository at the git host (with one commit on main) and its record here. */
async function newRepository(
  fields: Record<string, unknown> = {},
): Promise<{ id: number; remote: TestRepo; record: Record<string, unknown> }> {
  const name = `acme/addons-${++repoSeq}`;
  const remote = await g.host.repo(name);
  remote.commit({ 'README.md': 'addons\n' }, 'initial');
  const res = await request(t.app, t.as.admin, {
    method: 'POST',
    url: '/api/v1/git-repositories',
    payload: { name, branch_name: 'main', git_account_id: accountId, ...fields },
  });
  expect(res.statusCode, res.body).toBe(201);
  return { id: res.json().id, remote, record: res.json() };
}

const act = actionsOf(t, 'git-repositories', 'admin');
/** Runs push_commit as an administrator and returns the finished job. */
const pushCommit = async (id: number) => waitForJob(t.app, t.as.admin, (await act(id, 'push_commit')).json().job_id, 30_000);
const getRepo = async (id: number) => (await request(t.app, t.as.admin, { method: 'GET', url: `/api/v1/git-repositories/${id}` })).json();
const sign = (secret: string, body: string) => `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
const chatter = async (id: number) =>
  (await t.ctx.db.message.findMany({ where: { model_name: 'svc.saas.git.repository', rec_id: id }, orderBy: { id: 'asc' } })).map(
    (m) => m.body,
  );

/** The git host's side of a push: the event POSTed to the registered URL, signed with the hook's secret. */
function deliverPush(repoName: string, body: object, secret?: string) {
  const hook = [...g.host.hooks.values()].find((h) => h.repo === repoName)!;
  const raw = JSON.stringify(body);
  return t.app.inject({
    method: 'POST',
    url: new URL(hook.config.url).pathname,
    headers: {
      'content-type': 'application/json',
      'x-github-event': 'push',
      'x-hub-signature-256': sign(secret ?? hook.config.secret, raw),
    },
    payload: raw,
  });
}

async function linked(fields: Record<string, unknown> = {}) {
  const repo = await newRepository(fields);
  const res = await act(repo.id, 'link_git_webhook');
  expect(res.statusCode, res.body).toBe(200);
  return { ...repo, record: res.json() };
}

/** The deployment rows of the repository's action log, oldest first. */
const deployments = (id: number) =>
  t.ctx.db.actionLog.findMany({
    where: { model_name: 'svc.saas.git.repository', rec_id: id, action_type: 'deployment' },
    orderBy: { id: 'asc' },
  });

describe('git accounts', () => {
  it('administrators only; access_token required, encrypted and write-only; the owner defaults to the caller', async () => {
    expect((await request(t.app, t.as.operator, { method: 'GET', url: '/api/v1/git-accounts' })).statusCode).toBe(403);
    const missing = await request(t.app, t.as.admin, { method: 'POST', url: '/api/v1/git-accounts', payload: { name: 'no token' } });
    expect(missing.statusCode).toBe(400);
    const empty = await request(t.app, t.as.admin, { method: 'POST', url: '/api/v1/git-accounts', payload: { access_token: '  ' } });
    expect(empty.statusCode).toBe(400);

    const account = await createAccount('ghp_other-token-value');
    expect(account).toMatchObject({ access_token_set: true, git_provider: 'github', user_id: t.as.admin.userId });
    expect(JSON.stringify(account)).not.toContain('ghp_other-token-value');
    const row = await t.ctx.db.gitAccount.findUniqueOrThrow({ where: { id: account.id } });
    expect(row.access_token).not.toContain('ghp_other-token-value');
    expect(await t.ctx.secretBox.decrypt(row.access_token)).toBe('ghp_other-token-value');
    const listed = await request(t.app, t.as.admin, { method: 'GET', url: '/api/v1/git-accounts' });
    expect(listed.body).not.toContain('ghp_other-token-value');
    const badUser = await request(t.app, t.as.admin, {
      method: 'POST',
      url: '/api/v1/git-accounts',
      payload: { access_token: 'x-token', user_id: 999_999 },
    });
    expect(badUser.statusCode).toBe(400);
  });

  it('an account used by a repository cannot be deleted (409)', async () => {
    await newRepository();
    const res = await request(t.app, t.as.admin, { method: 'DELETE', url: `/api/v1/git-accounts/${accountId}` });
    expect(res.statusCode).toBe(409);
    expect(res.json().error.message).toMatch(/used by \d+ repositor(y|ies)/);
  });
});

describe('git repositories', () => {
  it('validates name, branch and deploy path; shows the default deploy path; starts as a draft', async () => {
    const base = { branch_name: 'main', git_account_id: accountId };
    for (const payload of [
      { ...base, name: 'no-slash' },
      { ...base, name: 'acme/../etc' },
      { ...base, name: 'acme/x', branch_name: 'main; rm -rf /' },
      { ...base, name: 'acme/x', deploy_path: 'relative/path' },
      { ...base, name: 'acme/x', deploy_path: '/opt/../etc' },
      { ...base, name: 'acme/x', git_account_id: 999_999 },
      { ...base, name: 'acme/x', root_server_id: 999_999 },
      { ...base, name: 'acme/x', state: 'active' },
    ]) {
      const res = await request(t.app, t.as.admin, { method: 'POST', url: '/api/v1/git-repositories', payload });
      expect(res.statusCode, JSON.stringify(payload)).toBe(400);
    }
    const { record } = await newRepository();
    expect(record).toMatchObject({ state: 'draft', webhook_id: null, webhook_url: null, last_commit_id: null, root_server_id: null });
    expect(record.deploy_path).toBe(`${g.basePath}/custom-addons/${String(record.name).split('/')[1]}`);
    expect((await request(t.app, t.as.operator, { method: 'GET', url: `/api/v1/git-repositories/${record.id}` })).statusCode).toBe(403);
  });
});

describe('link_git_webhook and delete_git_webhook', () => {
  it('refuses without an access token on the account (400 naming it), and registers nothing', async () => {
    const account = await createAccount('to-be-emptied');
    await t.ctx.db.gitAccount.update({ where: { id: account.id }, data: { access_token: '' } });
    const { id } = await newRepository({ git_account_id: account.id });
    const hooksBefore = g.host.hooks.size;
    const res = await act(id, 'link_git_webhook');
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatchObject({ code: 'validation_error', message: expect.stringMatching(/access_token/) });
    expect(g.host.hooks.size).toBe(hooksBefore);
    expect((await getRepo(id)).state).toBe('draft');
  });

  it('git host refusals are readable 400s and change nothing: bad token, unknown repository, rate limit', async () => {
    const wrong = await createAccount('ghp_wrong-token');
    const badToken = await newRepository({ git_account_id: wrong.id });
    const res1 = await act(badToken.id, 'link_git_webhook');
    expect(res1.statusCode).toBe(400);
    expect(res1.json().error.message).toMatch(/refused the access token.*401.*Bad credentials/);

    const created = await request(t.app, t.as.admin, {
      method: 'POST',
      url: '/api/v1/git-repositories',
      payload: { name: 'acme/does-not-exist', branch_name: 'main', git_account_id: accountId },
    });
    const res2 = await act(created.json().id, 'link_git_webhook');
    expect(res2.statusCode).toBe(400);
    expect(res2.json().error.message).toMatch(/acme\/does-not-exist was not found at the git host/);

    const limited = await newRepository();
    g.host.rateLimited = true;
    try {
      const res3 = await act(limited.id, 'link_git_webhook');
      expect(res3.statusCode).toBe(400);
      expect(res3.json().error.message).toMatch(/rate limit is exhausted; it resets at 2033-05-18/);
    } finally {
      g.host.rateLimited = false;
    }
    for (const id of [badToken.id, created.json().id, limited.id]) expect((await getRepo(id)).state).toBe('draft');
    expect(await t.ctx.db.webhook.count({ where: { model_name: 'svc.saas.git.repository' } })).toBe(
      await t.ctx.db.gitRepository.count({ where: { state: 'active' } }),
    );
    // Every call is in the action log, the token never.
    const calls = await t.ctx.db.actionLog.findMany({ where: { action_type: 'api_call', model_name: 'svc.saas.git.repository' } });
    expect(calls.length).toBeGreaterThanOrEqual(3);
    expect(JSON.stringify(calls)).not.toContain('ghp_wrong-token');
  });

  it('registers a signed push webhook at the git host, moves to active, and refuses deletion until unlinked', async () => {
    const { id, record } = await linked();
    const hook = [...g.host.hooks.values()].find((h) => h.repo === record.name)!;
    expect(hook.events).toEqual(['push']);
    expect(hook.config.content_type).toBe('json');
    expect(hook.config.secret).toMatch(/^[0-9a-f]{64}$/);
    expect(record).toMatchObject({ state: 'active', webhook_id: String(hook.id), webhook_url: hook.config.url });
    expect(hook.config.url).toMatch(/^http:\/\/svc\.test\/svc\/webhook\/[0-9a-f]{64}$/);
    const registered = g.host.server.calls.filter((c) => c.method === 'POST' && c.path.endsWith('/hooks')).at(-1)!;
    expect(registered.headers.authorization).toBe(`token ${TOKEN}`);

    const inbound = await t.ctx.db.webhook.findFirstOrThrow({ where: { model_name: 'svc.saas.git.repository', rec_id: id } });
    expect(inbound.trigger_action).toBe('action_receive_push');
    expect(await t.ctx.secretBox.decrypt(inbound.signing_secret!)).toBe(hook.config.secret);

    expect((await act(id, 'link_git_webhook')).statusCode).toBe(409);
    const del = await request(t.app, t.as.admin, { method: 'DELETE', url: `/api/v1/git-repositories/${id}` });
    expect(del.statusCode).toBe(400);
    expect(del.json().error.message).toMatch(/unlink it first/);
    const rename = await request(t.app, t.as.admin, {
      method: 'PATCH',
      url: `/api/v1/git-repositories/${id}`,
      payload: { name: 'acme/renamed' },
    });
    expect(rename.statusCode).toBe(400);

    const logs = JSON.stringify(await t.ctx.db.actionLog.findMany()) + t.ctx.logText();
    expect(logs).not.toContain(TOKEN);
    expect(logs).not.toContain(hook.config.secret);
  });

  it('the inbound URL is the webhook’s secret: the action log a user reads masks its token; the host gets it whole', async () => {
    const { id, record } = await linked();
    const hook = [...g.host.hooks.values()].find((h) => h.repo === record.name)!;
    const hookToken = hook.config.url.split('/').at(-1)!;
    expect(hookToken).toMatch(/^[0-9a-f]{64}$/);
    // Registered whole: the push still reaches this service.
    const registered = g.host.server.calls.filter((c) => c.method === 'POST' && c.path === `/repos/${record.name}/hooks`).at(-1)!;
    expect(JSON.parse(registered.body).config.url).toBe(record.webhook_url);
    expect((await deliverPush(String(record.name), { ref: 'refs/heads/main' })).statusCode).toBe(200);

    // A user (the lowest group) reads the repository's action log: the call is there, its token not.
    const res = await request(t.app, t.as.user, {
      method: 'GET',
      url: `/api/v1/action-logs?model_name=svc.saas.git.repository&rec_id=${id}&limit=100`,
    });
    expect(res.statusCode, res.body).toBe(200);
    const call = res
      .json()
      .items.find((r: { input_text: string }) => r.input_text.startsWith(`POST ${g.host.url}/repos/${record.name}/hooks`));
    expect(call.input_text).toContain('http://svc.test/svc/webhook/********');
    expect(res.body).not.toContain(hookToken);
    expect(JSON.stringify(await t.ctx.db.actionLog.findMany()) + t.ctx.logText()).not.toContain(hookToken);
  });

  it('delete_git_webhook removes it at the host and here (its URL stops working), back to draft; then the repository can be deleted', async () => {
    const { id, record } = await linked();
    const hookId = Number(record.webhook_id);
    const res = await act(id, 'delete_git_webhook');
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ state: 'draft', webhook_id: null, webhook_url: null });
    expect(g.host.hooks.has(hookId)).toBe(false);
    expect(g.host.server.calls.some((c) => c.method === 'DELETE' && c.path.endsWith(`/hooks/${hookId}`))).toBe(true);
    expect(await t.ctx.db.webhook.count({ where: { model_name: 'svc.saas.git.repository', rec_id: id } })).toBe(0);
    const stale = await t.app.inject({ method: 'POST', url: new URL(String(record.webhook_url)).pathname, payload: {} });
    expect(stale.statusCode).toBe(400);
    expect((await act(id, 'delete_git_webhook')).statusCode).toBe(409);
    expect((await request(t.app, t.as.admin, { method: 'DELETE', url: `/api/v1/git-repositories/${id}` })).statusCode).toBe(204);
  });

  it('a hook already gone at the host still unlinks', async () => {
    const { id, record } = await linked();
    g.host.hooks.delete(Number(record.webhook_id));
    const res = await act(id, 'delete_git_webhook');
    expect(res.statusCode, res.body).toBe(200);
    expect((await chatter(id)).at(-1)).toMatch(/already gone/);
  });
});

describe('push events', () => {
  it('a forged push (bad signature) is refused and records nothing; other branches and the ping change nothing', async () => {
    const { id, record, remote } = await linked();
    remote.commit({ 'a.py': 'x = 1\n' }, 'second');
    const forged = await deliverPush(String(record.name), { ref: 'refs/heads/main' }, 'not-the-secret');
    expect(forged.statusCode).toBe(400);
    const other = await deliverPush(String(record.name), { ref: 'refs/heads/feature' });
    expect(other.statusCode).toBe(200);
    const ping = await deliverPush(String(record.name), { zen: 'Keep it simple.', hook_id: 1 });
    expect(ping.statusCode).toBe(200);
    expect(await t.ctx.db.gitCommit.count({ where: { repository_id: id } })).toBe(0);
    expect((await getRepo(id)).last_commit_id).toBeNull();
  });

  it('a push to the tracked branch without a root server records the head as a commit and queues nothing', async () => {
    const { id, record, remote } = await linked();
    const sha = remote.commit({ 'a.py': 'x = 1\n' }, 'Add a.py\n\nlonger body');
    const res = await deliverPush(String(record.name), { ref: 'refs/heads/main', after: sha });
    expect(res.statusCode, res.body).toBe(200);
    const commits = await request(t.app, t.as.admin, { method: 'GET', url: `/api/v1/git-repositories/${id}/commits` });
    expect(commits.json().items).toEqual([
      expect.objectContaining({
        commit_id: sha,
        commit_message: 'Add a.py\n\nlonger body',
        commit_by: 'Test Author',
        branch: 'main',
        repository_id: id,
      }),
    ]);
    expect((await getRepo(id)).last_commit_id).toBe(commits.json().items[0].id);
    expect((await chatter(id)).at(-1)).toMatch(new RegExp(`New head of main: ${sha.slice(0, 12)} by Test Author: Add a.py`));
    // Delivered again (the host retries): the same commit, nothing new.
    expect((await deliverPush(String(record.name), { ref: 'refs/heads/main' })).statusCode).toBe(200);
    expect(await t.ctx.db.gitCommit.count({ where: { repository_id: id } })).toBe(1);
    expect(await deployments(id)).toHaveLength(0);
  });
});

describe('push_commit: validated deploys over SSH', () => {
  it('deploys a good commit; a commit with syntax errors is refused and the live path only ever points at the good release', async () => {
    const { id, record, remote } = await linked({ root_server_id: serverId });
    const live = String(record.deploy_path);
    const good = remote.commit(
      {
        'my_module/__init__.py': 'from . import models\n',
        'my_module/models.py': 'X = 1\n',
        'my_module/views/view.xml': '<odoo><record id="a"/></odoo>\n',
      },
      'good',
    );
    expect((await deliverPush(String(record.name), { ref: 'refs/heads/main' })).statusCode).toBe(200);
    await expect.poll(async () => (await deployments(id)).length, { timeout: 30_000 }).toBe(1);
    const [first] = await deployments(id);
    expect(first).toMatchObject({ status: 'success' });
    expect(first!.output_text).toMatch(new RegExp(`Deployed ${good.slice(0, 12)} .*\\(2 Python and 1 XML files checked\\)`));
    const goodRelease = await readlink(live);
    expect(await readFile(path.join(live, 'my_module', 'models.py'), 'utf8')).toBe('X = 1\n');

    // The broken commit: a Python syntax error and a malformed XML file, beside good files.
    remote.commit({ 'my_module/models.py': 'def broken(:\n    pass\n', 'my_module/views/view.xml': '<odoo><record id="a">\n' }, 'broken');
    const samples = new Set<string>();
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        samples.add(await readlink(live));
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    expect((await deliverPush(String(record.name), { ref: 'refs/heads/main' })).statusCode).toBe(200);
    await expect.poll(async () => (await deployments(id)).length, { timeout: 30_000 }).toBe(2);
    sampling = false;
    await sampler;
    expect([...samples]).toEqual([goodRelease]);
    expect(await readFile(path.join(live, 'my_module', 'models.py'), 'utf8')).toBe('X = 1\n');

    const failed = (await deployments(id))[1]!;
    expect(failed.status).toBe('failure');
    expect(failed.output_text).toMatch(/my_module\/models\.py: SyntaxError at line 1/);
    expect(failed.output_text).toMatch(/my_module\/views\/view\.xml: XML: /);
    const job = await waitForJob(t.app, t.as.admin, failed.job_id!);
    expect(job.state).toBe('failed');
    expect(job.error).toMatch(/my_module\/models\.py/);
    expect(job.error).toMatch(/my_module\/views\/view\.xml/);
    expect((await chatter(id)).at(-1)).toMatch(/refused: 2 file\(s\) failed validation[\s\S]*models\.py/);
    // The refused release was removed; the good one stays.
    const releases = await readdir(path.join(path.dirname(live), '.releases', path.basename(live)));
    expect(releases.filter((r) => r.startsWith('r-'))).toEqual([path.basename(goodRelease)]);

    // The SSH session is audited on the root server; the token is nowhere: action log, service log, server disk.
    const ssh = await t.ctx.db.actionLog.findMany({
      where: { model_name: 'svc.root.server', rec_id: serverId, action_type: 'ssh_command' },
    });
    expect(ssh.some((r) => r.input_text.includes(`push_commit ${good}`))).toBe(true);
    expect(JSON.stringify(await t.ctx.db.actionLog.findMany()) + t.ctx.logText()).not.toContain(TOKEN);
    const onDisk = await grepTree(path.dirname(live), TOKEN);
    expect(onDisk).toEqual([]);
  });

  it('the tree comes from the API tarball through its redirect: the token goes to the API only, the URL token is never stored', async () => {
    const { id, record, remote } = await newRepository({ root_server_id: serverId });
    const sha = remote.commit({ 'm/t.py': 'T = 1\n' }, 'tarball');
    const job = await pushCommit(id);
    expect(job.state, job.error).toBe('completed');
    expect(await readFile(path.join(String(record.deploy_path), 'm', 't.py'), 'utf8')).toBe('T = 1\n');

    const [api] = g.host.server.callsTo(`/repos/${record.name}/tarball/${sha}`);
    expect(api!.headers.authorization).toBe(`token ${TOKEN}`);
    const [archive] = g.host.codeload.callsTo(`/${record.name}/legacy.tar.gz/${sha}`);
    expect(archive!.headers.authorization).toBeUndefined(); // codeload refuses it: the deploy would have failed
    const urlToken = archive!.query.get('token')!;
    expect(g.host.downloadTokens).toContain(urlToken);

    // One api_call row for the download, with the redirect but without either token.
    const rows = await t.ctx.db.actionLog.findMany({
      where: { model_name: 'svc.saas.git.repository', rec_id: id, action_type: 'api_call', job_id: job.id },
    });
    const download = rows.find((r) => r.input_text.includes(`/tarball/${sha}`))!;
    expect(download).toMatchObject({ status: 'success' });
    expect(download.input_text).toMatch(/authorization: \[redacted\]/);
    expect(download.output_text).toMatch(
      new RegExp(`HTTP 302 → ${g.host.codeload.url}/${record.name}/legacy\\.tar\\.gz/${sha}\\?\\[redacted\\]`),
    );
    expect(download.output_text).toMatch(/HTTP 200 application\/x-gzip\n\d+ bytes received/);
    const everything = JSON.stringify(await t.ctx.db.actionLog.findMany()) + t.ctx.logText() + JSON.stringify(job);
    for (const secret of [TOKEN, ...g.host.downloadTokens]) expect(everything).not.toContain(secret);
  });

  it('a tree larger than GIT_DEPLOY_MAX_BYTES, downloaded or unpacked, is refused with a clear error; the live path stays', async () => {
    const { id, record, remote } = await newRepository({ root_server_id: serverId });
    remote.commit({ 'm/ok.py': 'OK = 1\n' }, 'small');
    expect((await pushCommit(id)).state).toBe('completed');
    const live = String(record.deploy_path);
    const before = await readlink(live);

    // Hardly compressible: the download and what it unpacks to grow together; either bound may trip first.
    const big = remote.commit({ 'm/blob.txt': randomBytes(MAX_TREE).toString('base64') }, 'big');
    const tooBig = await pushCommit(id);
    expect(tooBig.state).toBe('failed');
    expect(tooBig.error).toMatch(
      new RegExp(`^The tarball of ${big.slice(0, 12)} (is larger|unpacks to more) than ${MAX_TREE} bytes \\(GIT_DEPLOY_MAX_BYTES\\)$`),
    );

    // A download of a few kilobytes that unpacks past the bound (a gzip bomb, in small).
    const bomb = remote.commit({ 'm/blob.txt': '', 'm/zeros.txt': '0'.repeat(MAX_TREE * 4) }, 'bomb');
    const unpacked = await pushCommit(id);
    expect(unpacked.state).toBe('failed');
    expect(unpacked.error).toBe(`The tarball of ${bomb.slice(0, 12)} unpacks to more than ${MAX_TREE} bytes (GIT_DEPLOY_MAX_BYTES)`);
    // The download itself was small and whole: the bound on what it unpacks to is what refused it.
    const row = await t.ctx.db.actionLog.findFirstOrThrow({
      where: { action_type: 'api_call', job_id: unpacked.id, input_text: { contains: '/tarball/' } },
    });
    expect(row.status).toBe('success');
    expect(Number(/(\d+) bytes received/.exec(row.output_text)![1])).toBeLessThan(MAX_TREE / 20);

    expect(await readlink(live)).toBe(before);
    expect(await readFile(path.join(live, 'm', 'ok.py'), 'utf8')).toBe('OK = 1\n');
    const rows = await deployments(id);
    expect(rows.slice(-2).map((r) => r.status)).toEqual(['failure', 'failure']);
    expect((await chatter(id)).at(-1)).toMatch(/unpacks to more than/);
  });

  it('a download cut off midway fails the deploy; the server never takes the cut tree for a whole one', async () => {
    const { id, record, remote } = await newRepository({ root_server_id: serverId });
    remote.commit({ 'm/ok.py': 'OK = 1\n' }, 'first');
    expect((await pushCommit(id)).state).toBe('completed');
    const live = String(record.deploy_path);
    const before = await readlink(live);
    // Cut midway, and cut at once (the failure may then come before the SSH command starts).
    for (const cut of [20_000, 100]) {
      const files = Object.fromEntries(
        Array.from({ length: 40 }, (_, i) => [`m/f${i}.py`, `F = "${randomBytes(1500).toString('hex')}"\n`]),
      );
      const sha = remote.commit(files, `many files, cut after ${cut} bytes`);
      g.host.cutTarballAfter = cut;
      let job;
      try {
        job = await pushCommit(id);
      } finally {
        g.host.cutTarballAfter = null;
      }
      expect(job.state).toBe('failed');
      expect(job.error).toMatch(new RegExp(`^The tarball of ${sha.slice(0, 12)}: GET .*legacy\\.tar\\.gz/${sha}\\?\\[redacted\\]: `));
      expect(await readlink(live)).toBe(before);
      expect(existsSync(path.join(live, 'm', 'f0.py'))).toBe(false);
    }
  });

  it('a commit the host does not have: the host’s refusal, and nothing runs on the server', async () => {
    const { id, record } = await newRepository({ root_server_id: serverId });
    const unknown = `${'c0ffee'.repeat(6)}c0ff`;
    const commit = await t.ctx.db.gitCommit.create({ data: { repository_id: id, commit_id: unknown, branch: 'main' } });
    const jobId = await t.ctx.queues.enqueue(gitJobs.git_push_commit, { repository_id: id, commit_id: commit.id, user_id: null });
    const job = await waitForJob(t.app, t.as.admin, jobId, 30_000);
    expect(job.state).toBe('failed');
    expect(job.error).toBe(
      `Downloading the tree of ${unknown.slice(0, 12)} failed: ${record.name} was not found at the git host, or the token cannot see it (HTTP 404: Not Found)`,
    );
    expect(await t.ctx.db.actionLog.count({ where: { action_type: 'ssh_command', job_id: jobId } })).toBe(0);
  });

  it('the push_commit action deploys the branch head (202 + job), e.g. after fixing a broken commit', async () => {
    const { id, record, remote } = await newRepository({ root_server_id: serverId });
    const sha = remote.commit({ 'm/x.py': 'Y = 2\n' }, 'fix');
    expect((await act(id, 'push_commit', undefined, t.as.operator)).statusCode).toBe(403);
    const res = await act(id, 'push_commit');
    expect(res.statusCode, res.body).toBe(202);
    const job = await waitForJob(t.app, t.as.admin, res.json().job_id, 30_000);
    expect(job.state, job.error).toBe('completed');
    expect(job.result).toMatchObject({ deployed: true, commit: sha, live_path: record.deploy_path, checked: { py: 1, xml: 0 } });
    expect(await readFile(path.join(String(record.deploy_path), 'm', 'x.py'), 'utf8')).toBe('Y = 2\n');
    expect((await stat(String(record.deploy_path))).isDirectory()).toBe(true);
  });

  it('deploys through sudo -S: the password line goes to sudo, then the tarball to the script', async () => {
    const sudoServer = await confirmedRootServer(t.app, t.as.operator, g.sshd, {
      username: TEST_USERS.sudoPassword.name,
      password: TEST_USERS.sudoPassword.password,
      sudo_user: true,
    });
    const { id, record, remote } = await newRepository({
      root_server_id: sudoServer.id,
      deploy_path: path.join(g.basePath, 'sudo-addons'),
    });
    remote.commit({ 'm/y.py': 'Z = 3\n' }, 'via sudo');
    const job = await pushCommit(id);
    expect(job.state, job.error).toBe('completed');
    const release = await stat(path.join(String(record.deploy_path), 'm', 'y.py'));
    expect(release.uid).toBe(0); // written as root through sudo
    expect(JSON.stringify(await t.ctx.db.actionLog.findMany()) + t.ctx.logText()).not.toContain(TEST_USERS.sudoPassword.password);
  });

  it('a deploy without a root server, or to one that is not confirmed, is refused with a clear error', async () => {
    const { id } = await newRepository();
    const res = await act(id, 'push_commit');
    expect(res.statusCode).toBe(400);
    expect(res.json().error.message).toMatch(/root_server_id/);

    const draft = await request(t.app, t.as.operator, {
      method: 'POST',
      url: '/api/v1/root-servers',
      payload: { ip: g.sshd.host, port: g.sshd.port, username: TEST_USERS.key.name, key: g.sshd.keys.ed25519Openssh },
    });
    const other = await newRepository({ root_server_id: draft.json().id });
    const queued = await act(other.id, 'push_commit');
    expect(queued.statusCode).toBe(202);
    const job = await waitForJob(t.app, t.as.admin, queued.json().job_id);
    expect(job.state).toBe('failed');
    expect(job.error).toMatch(/Confirm the root server first/);
    expect((await deployments(other.id))[0]).toMatchObject({ status: 'failure' });
  });
});

describe('remote values are checked before they reach a command line', () => {
  const hostile = (marker: string) => [`--upload-pack=touch ${marker}`, `$(touch ${marker})`, `${'a'.repeat(40)};touch ${marker}`];

  it('a git host answering something else than a commit id for the head: a clear 400, nothing recorded, queued or run', async () => {
    const { id, record } = await linked({ root_server_id: serverId });
    const marker = path.join(g.scratch, 'pwned-head');
    const tarballsBefore = g.host.server.calls.filter((c) => c.path.includes('/tarball/')).length;
    try {
      for (const sha of hostile(marker)) {
        g.host.headSha = sha;
        const res = await act(id, 'push_commit');
        expect(res.statusCode, res.body).toBe(400);
        expect(res.json().error.message).toBe(
          `The head of main that the git host gave is not a commit id (40 to 64 lower-case hexadecimal digits): ${JSON.stringify(sha)}. Nothing was recorded or run.`,
        );
        // The same through a push event: the method fails (a failing webhook method answers 500 to the host), its call log says why.
        const pushed = await deliverPush(String(record.name), { ref: 'refs/heads/main' });
        expect(pushed.statusCode).toBe(500);
      }
      const hook = await t.ctx.db.webhook.findFirstOrThrow({ where: { model_name: 'svc.saas.git.repository', rec_id: id } });
      const calls = await request(t.app, t.as.admin, { method: 'GET', url: `/api/v1/webhooks/${hook.id}/calls` });
      expect(calls.json().items.map((c: { error: string }) => c.error)).toEqual(
        hostile(marker)
          .map((sha) => expect.stringContaining(`is not a commit id (40 to 64 lower-case hexadecimal digits): ${JSON.stringify(sha)}`))
          .reverse(),
      );
    } finally {
      g.host.headSha = null;
    }
    expect(await t.ctx.db.gitCommit.count({ where: { repository_id: id } })).toBe(0);
    expect((await getRepo(id)).last_commit_id).toBeNull();
    expect(await deployments(id)).toHaveLength(0);
    expect(g.host.server.calls.filter((c) => c.path.includes('/tarball/')).length).toBe(tarballsBefore);
    expect(existsSync(marker)).toBe(false);
  });

  it('a commit recorded with an id that is not one (before ids were checked) is refused by the deploy: nothing is downloaded or run', async () => {
    const { id } = await newRepository({ root_server_id: serverId });
    const marker = path.join(g.scratch, 'pwned-recorded');
    for (const bad of hostile(marker)) {
      const commit = await t.ctx.db.gitCommit.create({ data: { repository_id: id, commit_id: bad, branch: 'main' } });
      const jobId = await t.ctx.queues.enqueue(gitJobs.git_push_commit, { repository_id: id, commit_id: commit.id, user_id: null });
      const job = await waitForJob(t.app, t.as.admin, jobId, 30_000);
      expect(job.state).toBe('failed');
      expect(job.error).toBe(
        `Recorded commit ${commit.id} is not a commit id (40 to 64 lower-case hexadecimal digits): ${JSON.stringify(bad)}. Nothing was recorded or run.`,
      );
      expect(await t.ctx.db.actionLog.count({ where: { job_id: jobId, action_type: { in: ['ssh_command', 'api_call'] } } })).toBe(0);
    }
    expect(g.host.server.calls.some((c) => c.path.includes('/tarball/') && !/\/tarball\/[0-9a-f]{40}$/.test(c.path))).toBe(false);
    expect((await deployments(id)).map((r) => r.status)).toEqual(['failure', 'failure', 'failure']);
    expect(existsSync(marker)).toBe(false);
  });
});

describe('an operator-controlled SSH server (the attacker test)', () => {
  let evil: Sshd;
  let recordings: string;

  beforeAll(async () => {
    // A real OpenSSH server whose key login runs a wrapper instead of the command: the wrapper
    // records the command line and every byte received on stdin, then runs the command with it.
    evil = await startSshd();
    recordings = path.join(g.scratch, 'evil-recordings');
    await mkdir(recordings, { mode: 0o777 });
    await chmod(recordings, 0o777);
    const wrapper = path.join(evil.dir, 'record-and-run');
    await writeFile(
      wrapper,
      `#!/bin/sh\nn=$$-$(date +%s%N)\nprintf '%s' "$SSH_ORIGINAL_COMMAND" > ${recordings}/cmd-$n\ntee ${recordings}/stdin-$n | /bin/bash -c "$SSH_ORIGINAL_COMMAND"\n`,
      { mode: 0o755 },
    );
    const keys = path.join(evil.dir, 'authorized_keys', TEST_USERS.key.name);
    const lines = (await readFile(keys, 'utf8')).trim().split('\n');
    await writeFile(keys, `${lines.map((l) => `command="${wrapper}" ${l}`).join('\n')}\n`);
  });
  afterAll(async () => {
    await evil.stop();
  });

  it('an administrator’s deploy to a server an operator pointed at their own SSH server carries no token, and still deploys', async () => {
    // The operator's root server, first at the real server; the administrator deploys through it.
    const opServer = (await confirmedRootServer(t.app, t.as.operator, g.sshd, keyLogin(g.sshd))).id;
    const livePath = path.join(g.scratch, 'operator-server', 'addons');
    const { id, remote } = await newRepository({ root_server_id: opServer, deploy_path: livePath });

    // The operator moves it to their own server (with credentials for it): it stays confirmed, and
    // the new host's key is recorded at the next connection.
    const moved = await request(t.app, t.as.operator, {
      method: 'PATCH',
      url: `/api/v1/root-servers/${opServer}`,
      payload: { port: evil.port, key: evil.keys.ed25519Openssh },
    });
    expect(moved.statusCode, moved.body).toBe(200);
    expect(moved.json()).toMatchObject({ state: 'confirmed', host_key: null });

    const sha = remote.commit({ 'shop/models.py': 'PRICE = 42\n' }, 'deploy to the operator’s server');
    const job = await pushCommit(id);
    expect(job.state, job.error).toBe('completed');
    expect(job.result).toMatchObject({ deployed: true, commit: sha });
    expect(await readFile(path.join(livePath, 'shop', 'models.py'), 'utf8')).toBe('PRICE = 42\n');

    // What the operator's server received: the deploy script and the tarball, never the token.
    const files = await readdir(recordings);
    const commands = await Promise.all(files.filter((f) => f.startsWith('cmd-')).map((f) => readFile(path.join(recordings, f))));
    const inputs = await Promise.all(files.filter((f) => f.startsWith('stdin-')).map((f) => readFile(path.join(recordings, f))));
    expect(commands.some((c) => c.includes('tar -xzf -'))).toBe(true);
    expect(inputs.some((i) => i[0] === 0x1f && i[1] === 0x8b)).toBe(true); // the gzip stream, recorded
    for (const recorded of [...commands, ...inputs]) {
      expect(recorded.includes(TOKEN)).toBe(false);
      for (const urlToken of g.host.downloadTokens) expect(recorded.includes(urlToken)).toBe(false);
    }
    // Nor anywhere the operator can read: the action log, the job, the service log.
    expect(JSON.stringify(await t.ctx.db.actionLog.findMany()) + JSON.stringify(job) + t.ctx.logText()).not.toContain(TOKEN);
  });
});

describe('the deploy script (run locally with bash, the tarball on stdin)', () => {
  it('a deploy queued earlier never replaces a newer one; old releases are pruned', async () => {
    const { remote, record } = await newRepository();
    const live = path.join(g.scratch, 'script-test', 'addons');
    const shas = [1, 2, 3, 4, 5, 6, 7].map((n) => remote.commit({ 'v.py': `V = ${n}\n` }, `v${n}`));
    for (const [i, sha] of shas.entries()) {
      const out = await bash(deployScript({ sha, livePath: live, seq: 1000 + i }), g.host.archive(String(record.name), sha));
      expect(readDeployOutput(out.stdout).deployedTo, out.stderr).toBeTruthy();
    }
    expect(await readFile(path.join(live, 'v.py'), 'utf8')).toBe('V = 7\n');
    const releases = (await readdir(releasesDir(live))).filter((r) => r.startsWith('r-'));
    expect(releases).toHaveLength(KEPT_RELEASES);
    expect(path.join(releasesDir(live), releases.sort().at(-1)!)).toBe(await readlink(live));

    const late = await bash(deployScript({ sha: shas[0]!, livePath: live, seq: 999 }), g.host.archive(String(record.name), shas[0]!));
    expect(late.code).toBe(0);
    expect(readDeployOutput(late.stdout)).toMatchObject({ superseded: true, deployedTo: null });
    expect(await readFile(path.join(live, 'v.py'), 'utf8')).toBe('V = 7\n');
  });

  it('a tarball that does not unpack removes its release and leaves the live path alone', async () => {
    const { remote, record } = await newRepository();
    const live = path.join(g.scratch, 'script-test', 'broken-tar');
    const good = remote.commit({ 'v.py': 'V = 1\n' }, 'v1');
    expect((await bash(deployScript({ sha: good, livePath: live, seq: 1 }), g.host.archive(String(record.name), good))).code).toBe(0);
    const next = remote.commit({ 'v.py': 'V = 2\n' }, 'v2');
    const whole = g.host.archive(String(record.name), next);
    const cut = await bash(deployScript({ sha: next, livePath: live, seq: 2 }), whole.subarray(0, whole.length - 20));
    expect(cut.code).not.toBe(0);
    expect(await readFile(path.join(live, 'v.py'), 'utf8')).toBe('V = 1\n');
    expect((await readdir(releasesDir(live))).filter((r) => r.startsWith('r-'))).toEqual([path.basename(await readlink(live))]);
  });

  it('a tarball holding a device or FIFO (no git tree does) is refused before anything goes live', async () => {
    const live = path.join(g.scratch, 'script-test', 'special-files');
    // A hostile host's tarball: a FIFO and a character device beside a good file (python3's tarfile writes them unprivileged).
    const make = `import io, sys, tarfile
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w:gz") as t:
    data = b"V = 1\\n"
    f = tarfile.TarInfo("top/v.py"); f.size = len(data); t.addfile(f, io.BytesIO(data))
    for name, kind in (("top/pipe", tarfile.FIFOTYPE), ("top/mem", tarfile.CHRTYPE)):
        m = tarfile.TarInfo(name); m.type = kind; m.devmajor, m.devminor = 1, 1; t.addfile(m)
sys.stdout.buffer.write(buf.getvalue())`;
    const tarball = execFileSync('python3', ['-c', make]);
    const out = await bash(deployScript({ sha: 'b'.repeat(40), livePath: live, seq: 1 }), tarball);
    expect(out.code).toBe(DEPLOY_EXIT.invalid);
    expect(
      readDeployOutput(out.stdout)
        .report?.invalid.map((f) => f.file)
        .sort(),
    ).toEqual(['mem', 'pipe']);
    expect(existsSync(live)).toBe(false);
    expect((await readdir(releasesDir(live))).filter((r) => r.startsWith('r-'))).toEqual([]);
  });

  // The service refuses a tarball holding a link out of the tree before the script sees it
  // (test/git-tarball.test.ts); fed one directly, the script still does not read through it.
  it('the script’s check does not follow a symlink out of the tree (it could point at /dev/zero); one inside is checked as its target', async () => {
    const live = path.join(g.scratch, 'script-test', 'symlinks');
    const outside = path.join(g.scratch, 'outside-not-python.py');
    await writeFile(outside, 'this is not python (\n');
    const make = `import io, sys, tarfile
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w:gz") as t:
    data = b"V = 1\\n"
    f = tarfile.TarInfo("top/v.py"); f.size = len(data); t.addfile(f, io.BytesIO(data))
    for name, target in (("top/out.py", sys.argv[1]), ("top/in.py", "v.py")):
        m = tarfile.TarInfo(name); m.type = tarfile.SYMTYPE; m.linkname = target; t.addfile(m)
sys.stdout.buffer.write(buf.getvalue())`;
    const tarball = execFileSync('python3', ['-c', make, outside]);
    const out = await bash(deployScript({ sha: 'c'.repeat(40), livePath: live, seq: 1 }), tarball);
    expect(out.code, out.stderr).toBe(0);
    expect(readDeployOutput(out.stdout).report).toMatchObject({ checked: { py: 1, xml: 0 }, invalid: [] });
    expect(await readFile(path.join(live, 'in.py'), 'utf8')).toBe('V = 1\n');
  });

  it('refuses to build a script for anything but a commit id', () => {
    for (const sha of ['--upload-pack=touch /tmp/x', '$(id)', 'ABCDEF'.repeat(7), 'a'.repeat(39), `${'a'.repeat(40)}\n`]) {
      expect(() => deployScript({ sha, livePath: '/opt/odoo/custom-addons/x', seq: 1 })).toThrow(/is not a commit id/);
    }
  });
});

/** Runs a script with bash, feeding it stdin. */
function bash(script: string, stdin: Buffer): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn('bash', ['-c', script]);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.on('error', () => {}); // a script that ends without reading it all
    child.stdin.end(stdin);
  });
}

/** Files under `dir` containing `needle`. */
async function grepTree(dir: string, needle: string): Promise<string[]> {
  const hits: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (!entry.isFile()) continue;
    const file = path.join(entry.parentPath, entry.name);
    if ((await readFile(file)).includes(needle)) hits.push(file);
  }
  return hits;
}
