// The SSH work queued for a root server (run_cmd and the SSH jobs): checked and prepared at once,
// queued by the function answered, at once from the API or once the caller's transaction commits
// (an inbound webhook).
import type { AppContext } from '../context.js';
import { MASK, maskSecrets } from '../core/action-log.js';
import type { Author } from '../core/chatter.js';
import type { SecretBox } from '../core/crypto.js';
import type { DbTx } from '../core/db.js';
import { UserError } from '../core/errors.js';
import type { RootServer } from '../generated/prisma/client.js';
import { rootServerJobs } from './root-server-job-specs.js';
import { secretsOfServer } from './root-server-ssh.js';
import { loadRootServer, requireConfirmed, updateRootServer } from './root-server-store.js';

type Data = Record<string, unknown>;

/** The SSH operations that run as jobs (202 + job id). */
const ROOT_SERVER_JOBS = {
  setup_dir_structure: rootServerJobs.root_server_setup_dir_structure,
  install_code_server: rootServerJobs.root_server_install_code_server,
  remove_code_server: rootServerJobs.root_server_remove_code_server,
  setup_proxy: rootServerJobs.root_server_setup_proxy,
} as const;
export type RootServerJobAction = keyof typeof ROOT_SERVER_JOBS;

/**
 * `cmd` as it is stored: the server's secrets typed into it (those stored, and those `sent` in the
 * same request) are masked, for the field is shown to every reader and tracked in the chatter.
 */
export async function cmdAsStored(secretBox: SecretBox, cmd: string, server: RootServer | null, sent: Data = {}): Promise<string> {
  const typed = [sent.password, sent.key, sent.code_server_password].filter((v): v is string => typeof v === 'string');
  const stored = server ? await secretsOfServer(secretBox, server) : [];
  return maskSecrets(cmd, [...typed, ...stored]);
}

export function createRootServerCommands(ctx: Pick<AppContext, 'db' | 'secretBox' | 'queues'>) {
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
    const stored = cmd === undefined ? undefined : await cmdAsStored(ctx.secretBox, cmd, server);
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

  return { prepareRunCmd, prepareJob };
}
