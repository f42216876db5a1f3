// Root servers: the resource with its rules, the state actions (confirm answers when the SSH check
// is done), and the SSH operations queued as jobs (root-server-commands.ts). The features that follow a server (monitoring)
// are told of its changes (RootServerChange) through the observers they registered.
import type { AppContext } from '../context.js';
import { ConflictError, UserError, ValidationError } from '../core/errors.js';
import { createRecordService } from '../core/records.js';
import type { Precondition } from '../core/conditional-write.js';
import { SshError } from '../core/ssh-error.js';
import { usablePrivateKey } from '../core/ssh-keys.js';
import type { Author } from '../core/chatter.js';
import type { RootServerChange, RootServerObserver } from '../feature.js';
import type { RootServer } from '../generated/prisma/client.js';
import { writeActionLog } from '../core/action-log.js';
import { loadRootServer, requireConfirmed, updateRootServer } from './root-server-store.js';
import type { RootServerOut } from './root-server-schemas.js';
import { rootServerModel } from './root-server-models.js';
import { openRemoteSession } from './remote-session.js';
import { latestMetrics } from './root-server-metrics.js';
import { cmdAsStored, createRootServerCommands, type RootServerJobAction } from './root-server-commands.js';

type Data = Record<string, unknown>;
type Row = Data & { id: number };

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

export function createRootServerService(ctx: Pick<AppContext, 'db' | 'secretBox' | 'queues'>, observers: readonly RootServerObserver[]) {
  const records = createRecordService(ctx, rootServerModel);
  const { prepareRunCmd, prepareJob } = createRootServerCommands(ctx);

  async function tell(change: RootServerChange) {
    for (const observe of observers) await observe(change);
  }

  async function withCmdMasked(data: Data, server: RootServer | null): Promise<Data> {
    return typeof data.cmd === 'string' ? { ...data, cmd: await cmdAsStored(ctx.secretBox, data.cmd, server, data) } : data;
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

    async update(id: number, data: Data, author: Author | null, precondition?: Precondition) {
      checkKey(data);
      const before = await loadRootServer(ctx.db, id);
      const after = await records.update(id, await withCmdMasked(data, before), author, precondition);
      await tell({ kind: 'updated', root_server_id: id, fields: Object.keys(data) });
      return (await withMetrics([after]))[0]!;
    },

    async remove(id: number, precondition?: Precondition) {
      await loadRootServer(ctx.db, id);
      await precondition?.();
      await tell({ kind: 'deleting', root_server_id: id });
      await records.remove(id, precondition);
    },

    /** action_confirm: connects with the stored credentials (and sudo), then draft → confirmed. */
    async confirm(id: number, author: Author | null) {
      const server = await loadRootServer(ctx.db, id);
      if (server.state === 'cancel') throw new ConflictError('The root server is cancelled; reset it to draft first');
      if (server.state === 'confirmed') throw new ConflictError('The root server is already confirmed');
      if (!server.password && !server.key) throw new UserError('Set a password or a private key before confirming');
      const session = await openRemoteSession(ctx, server, { user_id: author?.id ?? null });
      try {
        const how = server.sudo_user ? ' with sudo' : '';
        await session.check('id -un', `Connected, but running a command${how} failed`, { timeoutMs: CONFIRM_COMMAND_TIMEOUT_MS });
      } finally {
        session.close();
      }
      return output(await changeState(id, { state: 'confirmed' }, 'confirm', author));
    },

    /** action_reset_draft: confirmed (or cancelled) → draft; monitoring stops. */
    async resetDraft(id: number, author: Author | null) {
      const server = await loadRootServer(ctx.db, id);
      if (server.state === 'draft') throw new ConflictError('The root server is already a draft');
      await tell({ kind: 'unconfirming', root_server_id: id, to: 'draft', author });
      return output(await changeState(id, { state: 'draft' }, 'reset_draft', author));
    },

    /** action_cancel: disables the server; monitoring stops and SSH actions are refused. */
    async cancel(id: number, author: Author | null) {
      const server = await loadRootServer(ctx.db, id);
      if (server.state === 'cancel') throw new ConflictError('The root server is already cancelled');
      await tell({ kind: 'unconfirming', root_server_id: id, to: 'cancel', author });
      return output(await changeState(id, { state: 'cancel' }, 'cancel', author));
    },

    /** A row as the API answers it (the features acting on root servers answer with it too). */
    output,

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
