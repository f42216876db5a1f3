// The root server SSH operations as BullMQ jobs. Each connects with the stored credentials, writes
// every command and its output to the action log (secrets masked), and updates the record from the
// outcome. A failure fails the job with a readable message and leaves the record's states true.
import type { Job } from 'bullmq';
import type { AppContext } from '../context.js';
import { UserError } from '../core/errors.js';
import type { Interruptions, JobHandlers } from '../core/jobs.js';
import { publicJobId } from '../core/queue.js';
import { authorOfUser, postMessage, type RecordRef } from '../core/chatter.js';
import { featureJobs } from '../feature.js';
import { rootServerJobs } from './root-server-job-specs.js';
import { MASK } from '../core/action-log.js';
import type { RootServer } from '../generated/prisma/client.js';
import { loadRootServer, requireConfirmed, updateRootServer } from './root-server-store.js';
import { withOutputTail } from './output-tail.js';
import { formatResult, openRemoteSession, stepFailed, type RemoteSession } from './remote-session.js';
import type { ExecResult } from '../core/ssh.js';
import {
  codeServerConfig,
  FIND_CODE_SERVER,
  REMOVE_CODE_SERVER,
  setupDirStructureScript,
  START_CODE_SERVER,
  WRITE_CODE_SERVER_CONFIG,
  WRITE_CODE_SERVER_CONFIG_LABEL,
} from './remote-scripts.js';
import { setupProxy } from './proxy-setup.js';

const RUN_CMD_TIMEOUT_MS = 10 * 60_000;
const SETUP_TIMEOUT_MS = 60_000;
const INSTALL_TIMEOUT_MS = 15 * 60_000;
const SERVICE_TIMEOUT_MS = 2 * 60_000;

type Payload = { root_server_id: number; user_id: number | null };

const onServer = (p: { root_server_id: number }): RecordRef => ({ model_name: 'svc.root.server', rec_id: p.root_server_id });

/** After a crash none of these runs again (they change the server); run_cmd says so in cmd_output. */
const interruptions: Interruptions<typeof rootServerJobs> = {
  root_server_run_cmd: {
    record: onServer,
    action_type: 'ssh_command',
    async onInterrupted(tx, payload, jobId) {
      const cmd_output =
        `[interrupted] The worker stopped while the command ran (job ${jobId}); the command was not run again ` +
        'because it changes the server. Its output is lost: check the server before running it again.';
      await tx.rootServer.updateMany({ where: { id: payload.root_server_id }, data: { cmd_output } });
    },
  },
  root_server_setup_dir_structure: { record: onServer, action_type: 'ssh_command' },
  root_server_install_code_server: { record: onServer, action_type: 'ssh_command' },
  root_server_remove_code_server: { record: onServer, action_type: 'ssh_command' },
  root_server_setup_proxy: { record: onServer, action_type: 'ssh_command' },
};

function createRootServerJobHandlers(ctx: AppContext): JobHandlers<typeof rootServerJobs> {
  /** Changes tracked fields; the chatter names the user who asked for the job. */
  async function setFields(id: number, data: Parameters<typeof updateRootServer>[2], userId: number | null) {
    const author = await authorOfUser(ctx.db, userId);
    return ctx.db.$transaction((tx) => updateRootServer(tx, id, data, author));
  }

  /** Loads the confirmed server and opens an audited session; `fn` runs with it, then it closes. */
  async function withSession<T>(payload: Payload, job: Job, fn: (s: RemoteSession, server: RootServer) => Promise<T>): Promise<T> {
    const server = await loadRootServer(ctx.db, payload.root_server_id);
    requireConfirmed(server);
    const session = await openRemoteSession(ctx, server, { user_id: payload.user_id, job_id: publicJobId(job.queueName, job.id!) });
    try {
      return await fn(session, server);
    } finally {
      session.close();
    }
  }

  /** `withSession` for a setup action: a failure is also told in the server's chatter, as an alert. */
  async function setupStep<T>(action: string, payload: Payload, job: Job, fn: (s: RemoteSession, server: RootServer) => Promise<T>) {
    try {
      return await withSession(payload, job, fn);
    } catch (err) {
      await postMessage(ctx.db, {
        model_name: 'svc.root.server',
        rec_id: payload.root_server_id,
        body: `${action} failed: ${(err as Error).message}`,
        message_type: 'notification',
        subtype_xmlid: 'mail.mt_alert',
      });
      throw err;
    }
  }

  return {
    async root_server_run_cmd(payload, job) {
      const id = payload.root_server_id;
      const outcome: { ran?: ExecResult } = {};
      try {
        return await withSession(payload, job, async (session) => {
          const jobId = publicJobId(job.queueName, job.id!);
          await ctx.db.rootServer.update({ where: { id }, data: { cmd_output: `[running as job ${jobId}]`, cmd_exit_code: null } });
          // While it runs, the job's progress shows the output so far.
          const res = await withOutputTail(
            (progress) => job.updateProgress(progress),
            session.mask,
            (onOutput) => session.run(payload.cmd, { timeoutMs: RUN_CMD_TIMEOUT_MS, onOutput }),
          );
          outcome.ran = res;
          await ctx.db.rootServer.update({
            where: { id },
            data: { cmd_output: session.mask(formatResult(res, RUN_CMD_TIMEOUT_MS, { exitCode: false })), cmd_exit_code: res.exitCode },
          });
          return { exit_code: res.exitCode, timed_out: res.timedOut, truncated: res.truncated };
        });
      } catch (err) {
        const { ran } = outcome;
        if (ran && !(err instanceof UserError)) {
          // It ran, so "[not run]" would be false; the database's own error means nothing to the operator.
          ctx.log.error({ err, root_server_id: id }, 'run_cmd: storing the output failed');
          const message = `The command ran${ran.exitCode === null ? '' : ` (exit code ${ran.exitCode})`}, but its output could not be stored`;
          await ctx.db.rootServer
            .update({ where: { id }, data: { cmd_output: `[output not stored] ${message}`, cmd_exit_code: ran.exitCode } })
            .catch((note: Error) => ctx.log.warn({ err: note, root_server_id: id }, 'run_cmd: saying so in cmd_output failed too'));
          throw new UserError(message);
        }
        // No output to show: say why on the record.
        await ctx.db.rootServer
          .update({ where: { id }, data: { cmd_output: `[not run] ${(err as Error).message}`, cmd_exit_code: null } })
          .catch((note: Error) => ctx.log.warn({ err: note, root_server_id: id }, 'run_cmd: writing "[not run]" in cmd_output failed'));
        throw err;
      }
    },

    async root_server_setup_dir_structure(payload, job) {
      return setupStep('setup_dir_structure', payload, job, async (session) => {
        const base = ctx.config.ODOO_BASE_PATH;
        const res = await session.check(setupDirStructureScript(base), `Creating the directories under ${base} failed`, {
          timeoutMs: SETUP_TIMEOUT_MS,
        });
        await setFields(payload.root_server_id, { dir_init_done: true }, payload.user_id);
        return { base_path: base, directories: session.mask(res.stdout).trim().split('\n') };
      });
    },

    async root_server_install_code_server(payload, job) {
      return setupStep('install_code_server', payload, job, async (session, server) => {
        await job.updateProgress({ step: 'install', percent: 5 });
        const install = await session.run(ctx.config.CODE_SERVER_INSTALL_CMD, { timeoutMs: INSTALL_TIMEOUT_MS });
        // `curl ... | sh` exits 0 even when curl fails (no internet): what counts is the binary.
        const found = await session.run(FIND_CODE_SERVER, { timeoutMs: SERVICE_TIMEOUT_MS });
        if (found.exitCode !== 0) {
          // The install command's exit status says nothing here (`curl | sh` is 0): only its output.
          stepFailed(
            session,
            'code-server is not installed after the install command (does the server reach the internet?)',
            install,
            formatResult(install, undefined, { exitCode: false }),
          );
        }
        await setFields(server.id, { code_server_state: 'installed' }, payload.user_id);

        await job.updateProgress({ step: 'configure', percent: 70 });
        const password = (await ctx.secretBox.reveal(server.code_server_password)) ?? '';
        const config = codeServerConfig(server.code_server_port, password);
        await session.check(WRITE_CODE_SERVER_CONFIG, 'Writing the code-server config failed', {
          stdin: config,
          timeoutMs: SERVICE_TIMEOUT_MS,
          // The audit shows the file as written, built with the mask in place of the password.
          label: `${WRITE_CODE_SERVER_CONFIG_LABEL} <<EOF\n${codeServerConfig(server.code_server_port, MASK)}EOF`,
        });

        await job.updateProgress({ step: 'start', percent: 85 });
        await session.check(START_CODE_SERVER, 'code-server is installed but did not start', { timeoutMs: SERVICE_TIMEOUT_MS });
        await setFields(server.id, { code_server_state: 'running' }, payload.user_id);
        await job.updateProgress({ step: 'done', percent: 100 });
        return { code_server_state: 'running', binary: session.mask(found.stdout).trim() };
      });
    },

    async root_server_remove_code_server(payload, job) {
      return setupStep('remove_code_server', payload, job, async (session, server) => {
        await session.check(REMOVE_CODE_SERVER, 'Removing code-server failed', { timeoutMs: INSTALL_TIMEOUT_MS });
        await setFields(server.id, { code_server_state: 'not_installed' }, payload.user_id);
        return { code_server_state: 'not_installed' };
      });
    },

    async root_server_setup_proxy(payload, job) {
      return setupStep('setup_proxy', payload, job, (session, server) => setupProxy(ctx.config, server, session, job));
    },
  };
}

export const rootServerJobHandlers = featureJobs(rootServerJobs, createRootServerJobHandlers, interruptions);
