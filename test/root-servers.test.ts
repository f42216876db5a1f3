// Root servers through the HTTP API and the real BullMQ workers, against a real OpenSSH server on
// loopback (test/helpers/sshd.ts) with real users and sudoers entries, real PostgreSQL and Redis.
// The code editor install command is a local script (the machine has no internet) that installs a
// small HTTP server as "code-server"; the test fetches the editor URL from it. The no-internet case
// runs the real curl against an unresolvable host.
import { chmod, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { composeFeatures } from '../src/features.js';
import { runWebhookMethod } from '../src/core/webhook-methods.js';
import { monitorSchedule } from '../src/monitoring/monitor-service.js';
import { connectRootServer } from '../src/servers/root-server-ssh.js';
import { actionsOf, confirmedRootServer, request, waitForJob } from './helpers/api.js';
import { useTestApp, withConfig } from './helpers/app.js';
import { freePort, keyLogin, passwordLogin, startSshd, TEST_USERS, type Sshd } from './helpers/sshd.js';
import { withoutHostWarning } from './helpers/sudo-output.js';

let sshd: Sshd;
let scratch: string;
let basePath: string;
let installScript: string;

const CODE_SERVER_PASSWORD = 'Editor-pw-71c2e9';

/** A stand-in for the official install script: installs ~/.local/bin/code-server, an HTTP server on the configured port. */
function fakeInstallScript(): string {
  const binary = [
    '#!/bin/sh',
    '# fake code-server: serves HTTP on the port of bind-addr in --config <file>',
    'PORT=$(sed -n "s/^bind-addr: .*:\\([0-9]*\\)$/\\1/p" "$2")',
    `exec ${process.execPath} -e "require('http').createServer((q, s) => s.end('fake code-server')).listen($PORT)"`,
  ].join('\n');
  return [
    'set -e',
    'mkdir -p "$HOME/.local/bin"',
    `cat > "$HOME/.local/bin/code-server" <<'EOF'\n${binary}\nEOF`,
    'chmod 755 "$HOME/.local/bin/code-server"',
    'echo "installed code-server (test script)"',
  ].join('\n');
}

beforeAll(async () => {
  sshd = await startSshd();
  scratch = await mkdtemp(path.join(tmpdir(), 'svc-root-servers-'));
  await chmod(scratch, 0o777);
  basePath = path.join(scratch, 'opt', 'odoo');
  installScript = path.join(scratch, 'install-code-server.sh');
  await writeFile(installScript, fakeInstallScript(), { mode: 0o755 });
});

afterAll(async () => {
  await sshd?.stop();
  // A fake editor left running by a failed test: stop it by its pid.
  const pidFile = `/home/${TEST_USERS.password.name}/.local/state/svc-code-server/pid`;
  const pid = Number(await readFile(pidFile, 'utf8').catch(() => ''));
  if (pid > 0) {
    try {
      process.kill(pid);
    } catch {
      /* already gone */
    }
  }
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

const t = useTestApp({ workers: true, env: () => ({ ODOO_BASE_PATH: basePath, CODE_SERVER_INSTALL_CMD: `sh ${installScript}` }) });
const act = actionsOf(t, 'root-servers');

const credentials = {
  password: passwordLogin,
  key: () => keyLogin(sshd),
  sudoNoPassword: () => ({
    username: TEST_USERS.sudoNoPassword.name,
    password: TEST_USERS.sudoNoPassword.password,
    sudo_user: true,
    sudo_user_no_password: true,
  }),
  sudoPassword: () => ({ username: TEST_USERS.sudoPassword.name, password: TEST_USERS.sudoPassword.password, sudo_user: true }),
};

async function createServer(body: Record<string, unknown>) {
  const res = await request(t.app, t.as.operator, {
    method: 'POST',
    url: '/api/v1/root-servers',
    payload: { ip: sshd.host, port: sshd.port, ...body },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json();
}

async function runJob(id: number, name: string, payload?: object) {
  const res = await act(id, name, payload);
  expect(res.statusCode, res.body).toBe(202);
  return waitForJob(t.app, t.as.operator, res.json().job_id, 60_000);
}

const getServer = async (id: number) => (await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/root-servers/${id}` })).json();
const actionLogs = (id: number) =>
  t.ctx.db.actionLog.findMany({ where: { model_name: 'svc.root.server', rec_id: id }, orderBy: { id: 'asc' } });

describe('root server resource', () => {
  it('creates with the spec defaults; secrets are encrypted and write-only; uuid generated', async () => {
    const res = await request(t.app, t.as.operator, {
      method: 'POST',
      url: '/api/v1/root-servers',
      payload: { ip: '10.0.0.5', password: 'ssh-secret-1', code_server_password: 'cs-secret-1' },
    });
    expect(res.statusCode).toBe(201);
    const out = res.json();
    expect(out).toMatchObject({
      ip: '10.0.0.5',
      username: 'root',
      port: 22,
      state: 'draft',
      sudo_user: false,
      sudo_user_no_password: false,
      monitoring_enabled: false,
      monitor_update_interval: '1m',
      server_state: 'no_monitor',
      code_server_port: 8080,
      code_server_state: 'not_installed',
      dir_init_done: false,
      host_key: null,
      password_set: true,
      key_set: false,
      code_server_password_set: true,
      latest_metrics: null,
    });
    expect(out.uuid).toMatch(/^[0-9a-f-]{36}$/);
    expect(res.body).not.toContain('ssh-secret-1');
    expect(res.body).not.toContain('cs-secret-1');
    const [raw] = await t.ctx.db.$queryRaw<{ password: string; code_server_password: string }[]>`
      SELECT password, code_server_password FROM root_servers WHERE id = ${out.id}`;
    expect(raw!.password).toMatch(/^v\d+:/);
    expect(await t.ctx.secretBox.decrypt(raw!.password)).toBe('ssh-secret-1');
    expect(await t.ctx.secretBox.decrypt(raw!.code_server_password)).toBe('cs-secret-1');

    const other = await createServer({ ip: '10.0.0.6' });
    expect(other.uuid).not.toBe(out.uuid);
  });

  it('a duplicate uuid is a 409 conflict', async () => {
    const uuid = '0d6a3c57-5c43-4d2e-9d7f-4a8f7f1c2b11';
    await createServer({ ip: '10.0.0.7', uuid });
    const dup = await request(t.app, t.as.operator, { method: 'POST', url: '/api/v1/root-servers', payload: { ip: '10.0.0.8', uuid } });
    expect(dup.statusCode).toBe(409);
  });

  it('refuses bad input with a clear error and stores nothing', async () => {
    const before = await t.ctx.db.rootServer.count();
    const cases = [
      { ip: '' },
      { ip: 'a b' },
      { ip: '10.0.0.9', port: 70000 },
      { ip: '10.0.0.9', monitor_update_interval: '2m' },
      { ip: '10.0.0.9', state: 'confirmed' },
      { ip: '10.0.0.9', password: 'two\nlines' },
    ];
    for (const payload of cases) {
      const res = await request(t.app, t.as.operator, { method: 'POST', url: '/api/v1/root-servers', payload });
      expect(res.statusCode, JSON.stringify(payload)).toBe(400);
      expect(res.json().error.code).toBe('validation_error');
    }
    const encrypted = await request(t.app, t.as.operator, {
      method: 'POST',
      url: '/api/v1/root-servers',
      payload: { ip: '10.0.0.9', key: sshd.keys.encrypted },
    });
    expect(encrypted.statusCode).toBe(400);
    expect(encrypted.json().error).toMatchObject({ code: 'validation_error', details: { fields: [{ field: 'key' }] } });
    expect(encrypted.json().error.message).toMatch(/protected by a passphrase/);
    const garbage = await request(t.app, t.as.operator, {
      method: 'POST',
      url: '/api/v1/root-servers',
      payload: { ip: '10.0.0.9', key: 'not a key' },
    });
    expect(garbage.json().error.message).toBe('Not a private key in OpenSSH or PEM format');
    expect(await t.ctx.db.rootServer.count()).toBe(before);
  });

  it('users read; only operators write and run actions', async () => {
    const server = await createServer({ ip: '10.0.0.10' });
    expect((await request(t.app, t.as.user, { method: 'GET', url: `/api/v1/root-servers/${server.id}` })).statusCode).toBe(200);
    const list = (await request(t.app, t.as.user, { method: 'GET', url: '/api/v1/root-servers?state=draft&limit=200' })).json().items;
    expect(list.map((s: { id: number }) => s.id)).toContain(server.id);
    expect(list.every((s: { state: string }) => s.state === 'draft')).toBe(true);
    expect(
      (await request(t.app, t.as.user, { method: 'POST', url: '/api/v1/root-servers', payload: { ip: '10.0.0.11' } })).statusCode,
    ).toBe(403);
    expect(
      (await request(t.app, t.as.user, { method: 'PATCH', url: `/api/v1/root-servers/${server.id}`, payload: { port: 23 } })).statusCode,
    ).toBe(403);
    expect((await act(server.id, 'confirm', undefined, t.as.user)).statusCode).toBe(403);
    expect((await act(server.id, 'run_cmd', { cmd: 'id' }, t.as.user)).statusCode).toBe(403);
    expect((await request(t.app, null, { method: 'GET', url: `/api/v1/root-servers/${server.id}` })).statusCode).toBe(401);
  });
});

describe('confirm', () => {
  it('neither password nor key: 400 user_error, still draft', async () => {
    const server = await createServer({ username: 'root' });
    const res = await act(server.id, 'confirm');
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatchObject({ code: 'user_error', message: 'Set a password or a private key before confirming' });
    expect((await getServer(server.id)).state).toBe('draft');
  });

  it('wrong password: 400 user_error carrying the SSH error; the attempt is in the action log', async () => {
    const server = await createServer({ username: TEST_USERS.password.name, password: 'wrong-password-x' });
    const res = await act(server.id, 'confirm');
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toMatchObject({
      code: 'user_error',
      message: `Authentication failed for ${TEST_USERS.password.name}@127.0.0.1:${sshd.port}: the server refused the password`,
    });
    expect((await getServer(server.id)).state).toBe('draft');
    const [log] = await actionLogs(server.id);
    expect(log).toMatchObject({
      action_type: 'ssh_command',
      status: 'failure',
      input_text: `ssh ${TEST_USERS.password.name}@127.0.0.1:${sshd.port}`,
    });
    expect(log!.output_text).toMatch(/Authentication failed/);
  });

  it('closed port: 400 user_error "connection refused"', async () => {
    const port = await freePort();
    const server = await createServer({ ...credentials.password(), port });
    const res = await act(server.id, 'confirm');
    expect(res.statusCode).toBe(400);
    expect(res.json().error.message).toBe(`Connection refused by 127.0.0.1:${port}: no SSH server listens on port ${port}`);
  });

  it.each(['password', 'key', 'sudoNoPassword', 'sudoPassword'] as const)(
    'succeeds with %s credentials and records the host key',
    async (kind) => {
      const server = await createServer(credentials[kind]());
      const res = await act(server.id, 'confirm');
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json()).toMatchObject({ state: 'confirmed', host_key: sshd.hostKey });
      const logs = await actionLogs(server.id);
      const expectedUser = kind.startsWith('sudo') ? 'root' : credentials[kind]().username;
      const id = logs.find((l) => l.input_text === 'id -un');
      expect(id).toMatchObject({ status: 'success' });
      expect(withoutHostWarning(id!.output_text ?? '')).toBe(`${expectedUser}\n[exit code 0]`);
      expect(logs.at(-1)).toMatchObject({
        action_type: 'server_action',
        input_text: 'confirm',
        output_text: 'state: confirmed',
        user_id: t.as.operator.userId,
      });
      const messages = await t.ctx.db.message.findMany({
        where: { model_name: 'svc.root.server', rec_id: server.id },
        include: { tracking_values: true },
      });
      expect(messages.flatMap((m) => m.tracking_values)).toEqual(
        expect.arrayContaining([expect.objectContaining({ field: 'state', old_value: 'draft', new_value: 'confirmed' })]),
      );
    },
  );

  it('sudo configured without password for a user that needs one: 400 saying sudo failed', async () => {
    const server = await createServer({ ...credentials.sudoPassword(), sudo_user_no_password: true });
    const res = await act(server.id, 'confirm');
    expect(res.statusCode).toBe(400);
    expect(res.json().error.message).toMatch(/^Connected, but running a command with sudo failed: .*a password is required/s);
  });

  it('confirm twice is a conflict', async () => {
    const server = await confirmedRootServer(t.app, t.as.operator, sshd, credentials.password());
    expect((await act(server.id, 'confirm')).statusCode).toBe(409);
  });
});

describe('state transitions', () => {
  it('reset_draft and cancel; a cancelled server refuses every SSH action', async () => {
    const server = await confirmedRootServer(t.app, t.as.operator, sshd, credentials.password());
    const draft = await act(server.id, 'reset_draft');
    expect(draft.json().state).toBe('draft');
    expect((await act(server.id, 'run_cmd', { cmd: 'id' })).json().error.message).toMatch(/^Confirm the root server first/);
    await act(server.id, 'confirm');
    const cancelled = await act(server.id, 'cancel');
    expect(cancelled.json().state).toBe('cancel');

    const jobsBefore = await t.ctx.queues.queue('ssh').getJobCounts();
    for (const name of [
      'run_cmd',
      'setup_dir_structure',
      'install_code_server',
      'remove_code_server',
      'start_monitor',
      'open_code_server',
      'confirm',
    ]) {
      const res = await act(server.id, name, name === 'run_cmd' ? { cmd: 'id' } : undefined);
      expect(res.statusCode, name).toBe(409);
      expect(res.json().error.message, name).toMatch(/cancelled/);
    }
    expect(await t.ctx.queues.queue('ssh').getJobCounts()).toEqual(jobsBefore);
    // Back to draft, then confirmed again.
    expect((await act(server.id, 'reset_draft')).json().state).toBe('draft');
    expect((await act(server.id, 'confirm')).json().state).toBe('confirmed');
  });
});

describe('run_cmd', () => {
  it('runs the command in a job: output, exit code, cmd stored, action log', async () => {
    const server = await confirmedRootServer(t.app, t.as.operator, sshd, credentials.password());
    const job = await runJob(server.id, 'run_cmd', { cmd: 'echo hello; echo oops >&2; exit 3' });
    expect(job).toMatchObject({
      state: 'completed',
      name: 'root_server_run_cmd',
      result: { exit_code: 3, timed_out: false, truncated: false },
    });
    const after = await getServer(server.id);
    expect(after.cmd).toBe('echo hello; echo oops >&2; exit 3');
    expect(after).toMatchObject({ cmd_output: 'hello\n[stderr]\noops', cmd_exit_code: 3 });
    const log = (await actionLogs(server.id)).find((l) => l.job_id === job.id);
    expect(log).toMatchObject({
      action_type: 'ssh_command',
      status: 'failure',
      input_text: 'echo hello; echo oops >&2; exit 3',
      output_text: 'hello\n[stderr]\noops\n[exit code 3]',
      user_id: t.as.operator.userId,
    });

    // Without a body the stored command runs.
    const again = await runJob(server.id, 'run_cmd');
    expect(again.result.exit_code).toBe(3);
  });

  it('shows the output so far in the job progress while the command runs, secrets masked', async () => {
    const server = await confirmedRootServer(t.app, t.as.operator, sshd, credentials.password());
    const pw = TEST_USERS.password.password;
    const cmd = `echo step-1; echo 'pw ${pw}'; sleep 2; echo step-2; sleep 2; echo done`;
    const res = await act(server.id, 'run_cmd', { cmd });
    const jobId = res.json().job_id;
    // Mid-run: the first lines are there, the last not yet; the stored output says it is running.
    await expect
      .poll(
        async () =>
          (await request(t.app, t.as.operator, { method: 'GET', url: `/api/v1/jobs/${jobId}` })).json().progress?.output_tail ?? '',
        {
          timeout: 20_000,
        },
      )
      .toContain('step-1');
    const mid = (await request(t.app, t.as.operator, { method: 'GET', url: `/api/v1/jobs/${jobId}` })).json();
    expect(mid.state).toBe('active');
    expect(mid.progress).toMatchObject({
      output_tail: expect.not.stringContaining('done'),
      output_bytes: expect.any(Number),
      updated_at: expect.any(String),
    });
    expect(mid.progress.output_tail).toContain('pw ********');
    expect(JSON.stringify(mid)).not.toContain(pw);
    expect((await getServer(server.id)).cmd_output).toBe(`[running as job ${jobId}]`);
    const done = await waitForJob(t.app, t.as.operator, jobId, 30_000);
    expect(done.progress.output_tail).toBe('step-1\npw ********\nstep-2\ndone\n');
    expect(await getServer(server.id)).toMatchObject({ cmd_output: 'step-1\npw ********\nstep-2\ndone', cmd_exit_code: 0 });
  });

  it('without any command: 400', async () => {
    const server = await confirmedRootServer(t.app, t.as.operator, sshd, credentials.password());
    const res = await act(server.id, 'run_cmd');
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe('user_error');
  });

  it.each(['sudoNoPassword', 'sudoPassword'] as const)('with sudo (%s) runs as root; the password is in no log', async (kind) => {
    const server = await confirmedRootServer(t.app, t.as.operator, sshd, credentials[kind]());
    const job = await runJob(server.id, 'run_cmd', { cmd: 'id -un; ps -eo args | grep -c "[s]udo"' });
    expect(job.result.exit_code).toBe(0);
    expect((await getServer(server.id)).cmd_output).toMatch(/^root\n/);
    const password = credentials[kind]().password;
    for (const log of await actionLogs(server.id)) expect(`${log.input_text}${log.output_text}`).not.toContain(password);
    expect(t.ctx.logText()).not.toContain(password);
  });

  it.each([true, false])(
    'an account whose sudo asks no password (sudo_user_no_password %s): `cat | rev` shows nothing of the password',
    async (noPassword) => {
      const user = TEST_USERS.sudoNoPassword;
      const server = await confirmedRootServer(t.app, t.as.operator, sshd, {
        username: user.name,
        password: user.password,
        sudo_user: true,
        sudo_user_no_password: noPassword,
      });
      const job = await runJob(server.id, 'run_cmd', { cmd: 'id -un; cat | rev' });
      expect(job.result).toMatchObject({ exit_code: 0 });
      expect(withoutHostWarning((await getServer(server.id)).cmd_output)).toBe('root');
    },
  );

  it('output holding NUL bytes is stored with U+FFFD in their place: job, cmd_output and action log complete', async () => {
    const server = await confirmedRootServer(t.app, t.as.operator, sshd, credentials.password());
    const job = await runJob(server.id, 'run_cmd', { cmd: 'printf "a\\0b\\n"; printf "c\\0" >&2' });
    expect(job).toMatchObject({ state: 'completed', result: { exit_code: 0 } });
    expect(job.progress.output_tail).toContain('a\uFFFDb\n');
    expect(await getServer(server.id)).toMatchObject({ cmd_output: 'a\uFFFDb\n[stderr]\nc\uFFFD', cmd_exit_code: 0 });
    const log = (await actionLogs(server.id)).find((l) => l.job_id === job.id);
    expect(log).toMatchObject({ status: 'success', output_text: 'a\uFFFDb\n[stderr]\nc\uFFFD\n[exit code 0]' });
  });

  it('a command that ran but whose output could not be stored says so, not "[not run]"', async () => {
    const server = await confirmedRootServer(t.app, t.as.operator, sshd, credentials.password());
    // A real refusal by PostgreSQL, for this test's database only.
    await t.ctx.db.$executeRawUnsafe(
      "ALTER TABLE root_servers ADD CONSTRAINT test_refuses_output CHECK (cmd_output NOT LIKE '%refused-by-the-test%')",
    );
    try {
      const job = await runJob(server.id, 'run_cmd', { cmd: 'echo refused-by-the-test' });
      expect(job.state).toBe('failed');
      expect(job.error).toBe('The command ran (exit code 0), but its output could not be stored');
      expect(await getServer(server.id)).toMatchObject({
        cmd_output: '[output not stored] The command ran (exit code 0), but its output could not be stored',
        cmd_exit_code: 0,
      });
      const log = (await actionLogs(server.id)).find((l) => l.job_id === job.id);
      expect(log).toMatchObject({ status: 'success', output_text: 'refused-by-the-test\n[exit code 0]' });
    } finally {
      await t.ctx.db.$executeRawUnsafe('ALTER TABLE root_servers DROP CONSTRAINT test_refuses_output');
    }
  });

  it('a stored secret typed into cmd is masked in cmd and its tracking, runs as typed, and the masked text is never run', async () => {
    const pw = TEST_USERS.password.password;
    const server = await confirmedRootServer(t.app, t.as.operator, sshd, credentials.password());
    const job = await runJob(server.id, 'run_cmd', { cmd: `printf %s '${pw}' | wc -c` });
    expect(job.result.exit_code).toBe(0);
    // The command ran with the secret itself (its length is printed); the stored text has the mask.
    expect(await getServer(server.id)).toMatchObject({ cmd: "printf %s '********' | wc -c", cmd_output: String(pw.length) });

    const url = `/api/v1/root-servers/${server.id}`;
    const patched = await request(t.app, t.as.operator, { method: 'PATCH', url, payload: { cmd: `echo ${pw}; echo ${pw}x` } });
    expect(patched.json().cmd).toBe(`echo ********; echo ${pw}x`);
    const chatter = (await request(t.app, t.as.user, { method: 'GET', url: `${url}/messages` })).json();
    const cmdValues = chatter.items.flatMap((m: { tracking_values: { field: string }[] }) =>
      m.tracking_values.filter((t) => t.field === 'cmd'),
    );
    expect(cmdValues).toHaveLength(2);
    expect(JSON.stringify(cmdValues)).not.toMatch(new RegExp(`${pw}(?!x)`));

    // The stored text is no longer the command: running it would run the mask.
    const jobsBefore = await t.ctx.queues.queue('ssh').getJobCounts();
    const stored = await act(server.id, 'run_cmd');
    expect(stored.statusCode).toBe(400);
    expect(stored.json().error).toMatchObject({
      code: 'user_error',
      message: expect.stringMatching(/^The stored cmd holds a masked secret/),
    });
    expect(await t.ctx.queues.queue('ssh').getJobCounts()).toEqual(jobsBefore);
  });

  it('secrets shorter than 4 characters mask nothing; longer ones only as whole values', async () => {
    const server = await confirmedRootServer(t.app, t.as.operator, sshd, { ...credentials.password(), code_server_password: 'k' });
    await runJob(server.id, 'run_cmd', { cmd: 'echo loopback k' });
    expect(await getServer(server.id)).toMatchObject({ cmd: 'echo loopback k', cmd_output: 'loopback k' });
    await request(t.app, t.as.operator, {
      method: 'PATCH',
      url: `/api/v1/root-servers/${server.id}`,
      payload: { code_server_password: 'Tok3n' },
    });
    await runJob(server.id, 'run_cmd', { cmd: 'echo xTok3n Tok3n_1 "Tok3n"' });
    expect(await getServer(server.id)).toMatchObject({ cmd: 'echo xTok3n Tok3n_1 "********"', cmd_output: 'xTok3n Tok3n_1 ********' });
  });

  it('output containing the server password is masked in cmd_output and the action log', async () => {
    const server = await confirmedRootServer(t.app, t.as.operator, sshd, credentials.password());
    const job = await runJob(server.id, 'run_cmd', { cmd: `echo "pw is ${TEST_USERS.password.password}"` });
    expect(job.state).toBe('completed');
    expect((await getServer(server.id)).cmd_output).toBe('pw is ********');
    const log = (await actionLogs(server.id)).find((l) => l.job_id === job.id)!;
    expect(log.input_text).toBe('echo "pw is ********"');
    expect(log.output_text).not.toContain(TEST_USERS.password.password);
  });
});

describe('setup_dir_structure', () => {
  it('creates the layout under ODOO_BASE_PATH with sudo -S, then dir_init_done', async () => {
    const server = await confirmedRootServer(t.app, t.as.operator, sshd, credentials.sudoPassword());
    const job = await runJob(server.id, 'setup_dir_structure');
    expect(job.state, job.error).toBe('completed');
    const dirs = ['addons', 'custom-addons', 'config', 'data', 'logs', 'backups'].map((d) => `${basePath}/${d}`);
    expect(job.result).toEqual({ base_path: basePath, directories: dirs });
    for (const dir of dirs) {
      const info = await stat(dir);
      expect(info.isDirectory()).toBe(true);
      expect(info.uid).toBe(0); // created through sudo
    }
    expect((await getServer(server.id)).dir_init_done).toBe(true);
    expect((await actionLogs(server.id)).some((l) => l.job_id === job.id && l.input_text.includes("'svc-make-dirs' '/"))).toBe(true);
  });

  it('a failure leaves dir_init_done false and says why', async () => {
    // Without sudo, the password user may not create directories in root's home.
    const server = await confirmedRootServer(t.app, t.as.operator, sshd, credentials.password());
    const job = await withConfig(t, { ODOO_BASE_PATH: '/root/svc-test/odoo' }, () => runJob(server.id, 'setup_dir_structure'));
    expect(job.state).toBe('failed');
    expect(job.error).toMatch(/^Creating the directories under \/root\/svc-test\/odoo failed: .*Permission denied/s);
    // Said once, not once per directory.
    expect(job.error.match(/Permission denied/g)).toHaveLength(1);
    expect((await getServer(server.id)).dir_init_done).toBe(false);
    const notes = await t.ctx.db.message.findMany({
      where: { model_name: 'svc.root.server', rec_id: server.id, subtype_xmlid: 'mail.mt_alert' },
    });
    expect(notes.map((n) => n.body)).toEqual([expect.stringMatching(/^setup_dir_structure failed: Creating the directories/)]);
  });
});

describe('code editor', () => {
  it('install_code_server needs a code_server_password', async () => {
    const server = await confirmedRootServer(t.app, t.as.operator, sshd, credentials.password());
    const res = await act(server.id, 'install_code_server');
    expect(res.statusCode).toBe(400);
    expect(res.json().error.message).toMatch(/code_server_password/);
  });

  it('installs, runs with the stored password, opens, and is removed', async () => {
    const port = await freePort();
    const server = await confirmedRootServer(t.app, t.as.operator, sshd, {
      ...credentials.password(),
      code_server_port: port,
      code_server_password: CODE_SERVER_PASSWORD,
    });
    expect((await act(server.id, 'open_code_server')).statusCode).toBe(409);

    const job = await runJob(server.id, 'install_code_server');
    expect(job.state, job.error).toBe('completed');
    expect(job.progress).toEqual({ step: 'done', percent: 100 });
    expect(job.result.code_server_state).toBe('running');
    expect((await getServer(server.id)).code_server_state).toBe('running');

    const home = `/home/${TEST_USERS.password.name}`;
    const configFile = `${home}/.config/code-server/config.yaml`;
    expect(await readFile(configFile, 'utf8')).toBe(
      `bind-addr: 0.0.0.0:${port}\nauth: password\npassword: "${CODE_SERVER_PASSWORD}"\ncert: false\n`,
    );
    expect((await stat(configFile)).mode & 0o777).toBe(0o600);

    const open = await act(server.id, 'open_code_server');
    expect(open.json()).toEqual({ url: `http://127.0.0.1:${port}`, code_server_state: 'running' });
    expect(await (await fetch(open.json().url, { signal: AbortSignal.timeout(5000) })).text()).toBe('fake code-server');

    // The password went over stdin: masked in the action log, absent from every log.
    const logs = await actionLogs(server.id);
    const configLog = logs.find((l) => l.input_text.includes('config.yaml <<EOF'));
    expect(configLog!.input_text).toContain('password: "********"');
    for (const log of logs) expect(`${log.input_text}${log.output_text}`).not.toContain(CODE_SERVER_PASSWORD);
    expect(t.ctx.logText()).not.toContain(CODE_SERVER_PASSWORD);

    const removed = await runJob(server.id, 'remove_code_server');
    expect(removed.state, removed.error).toBe('completed');
    expect((await getServer(server.id)).code_server_state).toBe('not_installed');
    await expect(fetch(`http://127.0.0.1:${port}`, { signal: AbortSignal.timeout(2000) })).rejects.toThrow();
    await expect(stat(configFile)).rejects.toThrow();
    await expect(stat(`${home}/.local/bin/code-server`)).rejects.toThrow();
  });

  it('a password with quotes, backslashes or only two characters never reaches the action log, raw or JSON-escaped', async () => {
    const port = await freePort();
    const server = await confirmedRootServer(t.app, t.as.operator, sshd, { ...credentials.password(), code_server_port: port });
    for (const password of ['pa"ss\\word', '§7']) {
      await request(t.app, t.as.operator, {
        method: 'PATCH',
        url: `/api/v1/root-servers/${server.id}`,
        payload: { code_server_password: password },
      });
      const job = await runJob(server.id, 'install_code_server');
      expect(job.state, job.error).toBe('completed');
      const configFile = `/home/${TEST_USERS.password.name}/.config/code-server/config.yaml`;
      expect(await readFile(configFile, 'utf8')).toContain(`password: ${JSON.stringify(password)}`);
      const audit = (await actionLogs(server.id)).map((l) => `${l.input_text}\n${l.output_text}`).join('\n');
      expect(audit).toContain('password: "********"');
      expect(audit).not.toContain(`password: ${JSON.stringify(password)}`);
      expect(audit).not.toContain(JSON.stringify(password).slice(1, -1));
    }
    expect((await runJob(server.id, 'remove_code_server')).state).toBe('completed');
  });

  it('a failed install whose output holds NUL bytes fails with that output (U+FFFD in their place) and alerts the chatter', async () => {
    const server = await confirmedRootServer(t.app, t.as.operator, sshd, {
      ...credentials.key(),
      code_server_password: CODE_SERVER_PASSWORD,
    });
    const job = await withConfig(t, { CODE_SERVER_INSTALL_CMD: 'printf "download\\0failed\\n"' }, () =>
      runJob(server.id, 'install_code_server'),
    );
    expect(job.state).toBe('failed');
    expect(job.error).toMatch(/^code-server is not installed after the install command .*: download\uFFFDfailed$/);
    const alert = await t.ctx.db.message.findFirst({
      where: { model_name: 'svc.root.server', rec_id: server.id, subtype_xmlid: 'mail.mt_alert' },
    });
    expect(alert!.body).toBe(`install_code_server failed: ${job.error}`);
  });

  it('with no internet the install fails visibly and the state stays not_installed', async () => {
    // The official command's shape, on a host name that never resolves (as offline).
    const offline = 'curl -fsSL https://code-server.invalid/install.sh | sh';
    const server = await confirmedRootServer(t.app, t.as.operator, sshd, {
      ...credentials.key(),
      code_server_password: CODE_SERVER_PASSWORD,
    });
    const job = await withConfig(t, { CODE_SERVER_INSTALL_CMD: offline }, () => runJob(server.id, 'install_code_server'));
    expect(job.state).toBe('failed');
    expect(job.error).toMatch(
      /^code-server is not installed after the install command \(does the server reach the internet\?\): .*Could not resolve host/s,
    );
    expect(job.error).not.toContain('[exit code 0]');
    expect((await getServer(server.id)).code_server_state).toBe('not_installed');
    const logs = await actionLogs(server.id);
    expect(logs.find((l) => l.input_text === offline)!.output_text).toMatch(/Could not resolve host: code-server.invalid/);
    const alert = await t.ctx.db.message.findFirst({
      where: { model_name: 'svc.root.server', rec_id: server.id, subtype_xmlid: 'mail.mt_alert' },
    });
    expect(alert!.body).toMatch(/^install_code_server failed: code-server is not installed/);
  });
});

describe('webhook methods', () => {
  it('run the stored command, set up directories, start and stop monitoring, inside the caller’s transaction', async () => {
    const methods = composeFeatures(t.ctx).webhookMethods['svc.root.server']!;
    expect(Object.keys(methods).sort()).toEqual([
      'action_run_cmd',
      'action_setup_dir_structure',
      'action_start_monitor',
      'action_stop_monitor',
    ]);
    const server = await confirmedRootServer(t.app, t.as.operator, sshd, { ...credentials.key(), cmd: 'echo from-webhook' });

    const queued = await t.ctx.queues.queue('ssh').getJobCountByTypes('waiting', 'active', 'completed');
    await runWebhookMethod(t.ctx.db, { method: methods.action_run_cmd!, recId: server.id, payload: undefined });
    await expect.poll(async () => (await getServer(server.id)).cmd_output, { timeout: 20_000 }).toBe('from-webhook');
    expect(await t.ctx.queues.queue('ssh').getJobCountByTypes('waiting', 'active', 'completed')).toBeGreaterThan(queued);

    await runWebhookMethod(t.ctx.db, { method: methods.action_start_monitor!, recId: server.id, payload: undefined });
    expect((await t.ctx.db.rootServer.findUniqueOrThrow({ where: { id: server.id } })).monitoring_enabled).toBe(true);
    expect(await monitorSchedule(t.ctx, server.id)).toMatchObject({ every: 60_000 });
    await runWebhookMethod(t.ctx.db, { method: methods.action_stop_monitor!, recId: server.id, payload: undefined });
    expect(await monitorSchedule(t.ctx, server.id)).toBeUndefined();
    expect((await t.ctx.db.rootServer.findUniqueOrThrow({ where: { id: server.id } })).server_state).toBe('no_monitor');

    // Rolled back with the caller's transaction (e.g. its message failed): nothing is scheduled.
    const failing = { after: async () => Promise.reject(new Error('posting the message failed')) };
    await expect(
      runWebhookMethod(t.ctx.db, { method: methods.action_start_monitor!, recId: server.id, payload: undefined }, failing),
    ).rejects.toThrow('posting the message failed');
    expect((await t.ctx.db.rootServer.findUniqueOrThrow({ where: { id: server.id } })).monitoring_enabled).toBe(false);
    expect(await monitorSchedule(t.ctx, server.id)).toBeUndefined();

    // A draft server refuses, and the caller's transaction fails with it.
    const draft = await createServer(credentials.key());
    await expect(
      runWebhookMethod(t.ctx.db, { method: methods.action_setup_dir_structure!, recId: draft.id, payload: undefined }),
    ).rejects.toThrow(/Confirm the root server first/);
  });
});

describe('host key', () => {
  it('a changed host key is refused until the operator accepts the new one', async () => {
    const server = await confirmedRootServer(t.app, t.as.operator, sshd, credentials.password());
    const recorded = server.host_key;
    await sshd.restart({ newHostKey: true });

    const job = await runJob(server.id, 'run_cmd', { cmd: 'echo should-not-run' });
    expect(job.state).toBe('failed');
    expect(job.error).toContain(`Host key of 127.0.0.1:${sshd.port} has changed: recorded ${recorded}, presented ${sshd.hostKey}`);
    expect((await getServer(server.id)).cmd_output).toMatch(/^\[not run\] Host key of .* has changed/);
    const failure = (await actionLogs(server.id)).find((l) => l.job_id === job.id);
    expect(failure).toMatchObject({ status: 'failure', input_text: `ssh ${TEST_USERS.password.name}@127.0.0.1:${sshd.port}` });

    // Accepting: PATCH the new fingerprint (checked out of band), then it runs.
    const bad = await request(t.app, t.as.operator, {
      method: 'PATCH',
      url: `/api/v1/root-servers/${server.id}`,
      payload: { host_key: 'nonsense' },
    });
    expect(bad.statusCode).toBe(400);
    const patched = await request(t.app, t.as.operator, {
      method: 'PATCH',
      url: `/api/v1/root-servers/${server.id}`,
      payload: { host_key: sshd.hostKey },
    });
    expect(patched.json().host_key).toBe(sshd.hostKey);
    const ok = await runJob(server.id, 'run_cmd', { cmd: 'echo accepted' });
    expect(ok.result.exit_code).toBe(0);

    // Or null: the key presented at the next connection is trusted and recorded.
    await request(t.app, t.as.operator, { method: 'PATCH', url: `/api/v1/root-servers/${server.id}`, payload: { host_key: null } });
    await runJob(server.id, 'run_cmd', { cmd: 'true' });
    expect((await getServer(server.id)).host_key).toBe(sshd.hostKey);
  });
});

describe('secrets', () => {
  it('no stored secret appears in the service log or the action log', async () => {
    const text = t.ctx.logText();
    const rows = await t.ctx.db.actionLog.findMany();
    const audit = rows.map((r) => `${r.input_text}\n${r.output_text}`).join('\n');
    const secrets = [
      TEST_USERS.password.password,
      TEST_USERS.sudoNoPassword.password,
      TEST_USERS.sudoPassword.password,
      CODE_SERVER_PASSWORD,
      sshd.keys.ed25519Openssh.split('\n')[2]!,
    ];
    expect(rows.length).toBeGreaterThan(10);
    for (const secret of secrets) {
      expect(text).not.toContain(secret);
      expect(audit).not.toContain(secret);
    }
  });
});

describe('trust on first use and a move', () => {
  it('a connection opened from a snapshot taken before the server moved does not record its host key on the moved record', async () => {
    const created = await createServer(credentials.password());
    const snapshot = await t.ctx.db.rootServer.findUniqueOrThrow({ where: { id: created.id } });
    expect(snapshot.host_key).toBeNull();
    // The operator points the record elsewhere while a job still holds the old row.
    const moved = await request(t.app, t.as.operator, {
      method: 'PATCH',
      url: `/api/v1/root-servers/${created.id}`,
      payload: { port: await freePort(), ...credentials.password() },
    });
    expect(moved.statusCode).toBe(200);
    const conn = await connectRootServer(t.ctx, snapshot);
    conn.close();
    expect((await t.ctx.db.rootServer.findUniqueOrThrow({ where: { id: created.id } })).host_key).toBeNull();
  });
});
