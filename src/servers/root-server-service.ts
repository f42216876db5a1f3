// Root servers (spec §2.4, §3.3, §4.4): the REST resource with its rules, the state actions
// (confirm answers when the SSH check is done), and the SSH operations queued as jobs.
import type { AppContext } from '../context.js';
import type { DbTx, InTransaction } from '../core/db.js';
import { ConflictError, UserError, ValidationError } from '../core/errors.js';
import { createRecordService } from '../core/records.js';
import { SshError } from '../core/ssh-error.js';
import { usablePrivateKey } from '../core/ssh-keys.js';
import type { Author } from '../core/chatter.js';
import type { RootServer } from '../generated/prisma/client.js';
import { MASK, maskSecrets, writeActionLog } from '../core/action-log.js';
import { createMonitorService } from '../monitoring/monitor-service.js';
import { latestMetrics } from '../monitoring/monitor-log-service.js';
import { loadRootServer, requireConfirmed, updateRootServer } from './root-server-store.js';
import type { RootServerOut } from './root-server-schemas.js';
import { rootServerJobs } from './root-server-job-specs.js';
import { rootServerModel } from './root-server-models.js';
import { formatResult, openRemoteSession } from './remote-session.js';
import { secretsOfServer } from './root-server-ssh.js';

type Data = Record<string, unknown>;
type Row = Data & { id: number };

/** The SSH operations that run as jobs (202 + job id). */
const ROOT_SERVER_JOBS = {
  setup_dir_structure: rootServerJobs.root_server_setup_dir_structure,
  install_code_server: rootServerJobs.root_server_install_code_server,
  remove_code_server: rootServerJobs.root_server_remove_code_server,
  setup_proxy: rootServerJobs.root_server_setup_proxy,
} as const;
export type RootServerJobAction = keyof typeof ROOT_SERVER_JOBS;

const CONFIRM_COMMAND_TIMEOUT_MS = 30_000;

/** The URL of the web code editor: code_server_domain (https:// unless it names a scheme) or http://<ip>:<port>. */
function codeServerUrl(server: { ip: string; code_server_port: number; code_server_domain: string | null }): string {
  const domain = server.code_server_domain?.trim();
  if (domain) return /^https?:\/\//i.test(domain) ? domain : `https://${domain}`;
  const host = server.ip.includes(':') ? `[${server.ip}]` : server.ip;
  return `http://${host}:${server.code_server_port}`;
}

function checkKey(data: Data) {
  if (typeof data.key !== 'string' || data.key === '') return;
  try {
    usablePrivateKey(data.key);
  } catch (err) {
    if (err instanceof SshError) throw new ValidationError(err.message, 'key');
    throw err;
  }
}

export function createRootServerService(ctx: Pick<AppContext, 'db' | 'box' | 'queues' | 'redis'>) {
  const records = createRecordService(ctx, rootServerModel);
  const monitor = createMonitorService(ctx);

  /**
   * `cmd` as it is stored: the server's secrets typed into it (those stored, and those `sent` in the
   * same request) are masked, for the field is shown to every reader and tracked in the chatter.
   */
  async function cmdAsStored(cmd: string, server: RootServer | null, sent: Data = {}): Promise<string> {
    const typed = [sent.password, sent.key, sent.code_server_password].filter((v): v is string => typeof v === 'string');
    const stored = server ? await secretsOfServer(ctx.box, server) : [];
    return maskSecrets(cmd, [...typed, ...stored]);
  }

  async function withCmdMasked(data: Data, server: RootServer | null): Promise<Data> {
    return typeof data.cmd === 'string' ? { ...data, cmd: await cmdAsStored(data.cmd, server, data) } : data;
  }

  async function withMetrics(rows: Data[]): Promise<RootServerOut[]> {
    const latest = await latestMetrics(
      ctx.db,
      rows.map((r) => r.id as number),
    );
    return rows.map((r) => ({ ...r, latest_metrics: latest.get(r.id as number) ?? null }) as unknown as RootServerOut);
  }

  async function output(row: Row): Promise<RootServerOut> {
    return (await withMetrics([records.toOutput(row)]))[0]!;
  }

  async function changeState(id: number, data: { state: 'draft' | 'confirmed' | 'cancel' }, action: string, author: Author | null) {
    return ctx.db.$transaction(async (tx) => {
      const after = await updateRootServer(tx, id, data, author);
      await writeActionLog(tx, {
        model_name: 'svc.root.server',
        rec_id: id,
        action_type: 'server_action',
        input_text: action,
        output_text: `state: ${after.state}`,
        user_id: author?.id ?? null,
      });
      return after;
    });
  }

  /** The server an SSH job is about to be queued for: it must be confirmed. */
  async function confirmedServer(id: number, tx?: DbTx) {
    const server = await loadRootServer(tx ?? ctx.db, id);
    requireConfirmed(server);
    return server;
  }

  /**
   * action_run_cmd: stores `cmd` when given, and answers the queueing of the stored command, to
   * run now (the API) or after the caller's transaction commits (webhooks).
   */
  async function prepareRunCmd(id: number, cmd: string | undefined, author: Author | null, tx?: DbTx): Promise<() => Promise<string>> {
    const server = await confirmedServer(id, tx);
    const command = cmd ?? server.cmd?.trim();
    if (!command) throw new UserError('No command: send {"cmd": "..."} or set cmd on the root server');
    // The job runs the command as typed; the field keeps it with the secrets masked, so that text is no command.
    if (cmd === undefined && command.includes(MASK)) {
      throw new UserError(`The stored cmd holds a masked secret (${MASK}), not the command as typed: send it again with {"cmd": "..."}`);
    }
    const stored = cmd === undefined ? undefined : await cmdAsStored(cmd, server);
    if (stored !== undefined && stored !== server.cmd) {
      if (tx) await updateRootServer(tx, id, { cmd: stored }, author);
      else await ctx.db.$transaction((t) => updateRootServer(t, id, { cmd: stored }, author));
    }
    return () => ctx.queues.enqueue(rootServerJobs.root_server_run_cmd, { root_server_id: id, cmd: command, user_id: author?.id ?? null });
  }

  /** setup_dir_structure, install_code_server, remove_code_server: checked here, run by a job (queued by the answer). */
  async function prepareJob(action: RootServerJobAction, id: number, author: Author | null, tx?: DbTx): Promise<() => Promise<string>> {
    const server = await confirmedServer(id, tx);
    if (action === 'install_code_server' && !server.code_server_password) {
      throw new UserError('Set code_server_password first: the code editor is protected by it');
    }
    return () => ctx.queues.enqueue(ROOT_SERVER_JOBS[action], { root_server_id: id, user_id: author?.id ?? null });
  }

  return {
    async list(query: { limit: number; offset: number } & Data) {
      const page = await records.list(query);
      return { ...page, items: await withMetrics(page.items) };
    },

    async get(id: number) {
      return output(await records.getRow(id));
    },

    async create(data: Data, author: Author | null) {
      checkKey(data);
      return (await withMetrics([await records.create(await withCmdMasked(data, null), author)]))[0]!;
    },

    async update(id: number, data: Data, author: Author | null) {
      checkKey(data);
      const before = await loadRootServer(ctx.db, id);
      const after = await records.update(id, await withCmdMasked(data, before), author);
      if (after.monitoring_enabled && after.monitor_update_interval !== before.monitor_update_interval) {
        await monitor.schedule({ id, monitor_update_interval: after.monitor_update_interval as string });
      }
      return (await withMetrics([after]))[0]!;
    },

    async remove(id: number) {
      await loadRootServer(ctx.db, id);
      await monitor.unschedule(id);
      await records.remove(id);
    },

    /** action_confirm: connects with the stored credentials (and sudo), then draft → confirmed. */
    async confirm(id: number, author: Author | null) {
      const server = await loadRootServer(ctx.db, id);
      if (server.state === 'cancel') throw new ConflictError('The root server is cancelled; reset it to draft first');
      if (server.state === 'confirmed') throw new ConflictError('The root server is already confirmed');
      if (!server.password && !server.key) throw new UserError('Set a password or a private key before confirming');
      const session = await openRemoteSession(ctx, server, { user_id: author?.id ?? null });
      try {
        const res = await session.run('id -un', { timeoutMs: CONFIRM_COMMAND_TIMEOUT_MS });
        if (res.exitCode !== 0) {
          const how = server.sudo_user ? ' with sudo' : '';
          throw new UserError(session.mask(`Connected, but running a command${how} failed: ${formatResult(res)}`));
        }
      } finally {
        session.close();
      }
      return output(await changeState(id, { state: 'confirmed' }, 'confirm', author));
    },

    /** action_reset_draft: confirmed (or cancelled) → draft; monitoring stops. */
    async resetDraft(id: number, author: Author | null) {
      const server = await loadRootServer(ctx.db, id);
      if (server.state === 'draft') throw new ConflictError('The root server is already a draft');
      if (server.monitoring_enabled) await monitor.stop(id, author);
      return output(await changeState(id, { state: 'draft' }, 'reset_draft', author));
    },

    /** action_cancel: disables the server; monitoring stops and SSH actions are refused. */
    async cancel(id: number, author: Author | null) {
      const server = await loadRootServer(ctx.db, id);
      if (server.state === 'cancel') throw new ConflictError('The root server is already cancelled');
      if (server.monitoring_enabled) await monitor.stop(id, author);
      return output(await changeState(id, { state: 'cancel' }, 'cancel', author));
    },

    /** action_start_monitor: schedules polls at monitor_update_interval. */
    async startMonitor(id: number, author: Author | null, call?: InTransaction) {
      return output(await monitor.start(id, author, call));
    },

    /** action_stop_monitor: removes the schedule; server_state → no_monitor. */
    async stopMonitor(id: number, author: Author | null, call?: InTransaction) {
      return output(await monitor.stop(id, author, call));
    },

    prepareRunCmd,
    prepareJob,

    /** action_run_cmd from the API: answers the job id. */
    async runCmd(id: number, cmd: string | undefined, author: Author | null) {
      return (await prepareRunCmd(id, cmd, author))();
    },

    /** setup_dir_structure, install_code_server, remove_code_server from the API: answers the job id. */
    async enqueue(action: RootServerJobAction, id: number, author: Author | null) {
      return (await prepareJob(action, id, author))();
    },

    /** action_open_code_server: the editor's URL. */
    async openCodeServer(id: number) {
      const server = await loadRootServer(ctx.db, id);
      requireConfirmed(server);
      if (server.code_server_state === 'not_installed')
        throw new ConflictError('The code editor is not installed (actions/install_code_server)');
      return { url: codeServerUrl(server), code_server_state: server.code_server_state as 'installed' | 'running' };
    },
  };
}
