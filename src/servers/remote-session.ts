// An SSH session on a root server whose every command and output goes to the action log, with the
// server's secrets masked (the audit log of SSH commands). A command's row is written
// `running` before it starts and completed when it ends.
import type { AppContext } from '../context.js';
import type { RootServer } from '../generated/prisma/client.js';
import type { ExecOptions, ExecResult } from '../core/ssh.js';
import { connectRootServer, secretsOfServer, sshTargetOf } from './root-server-ssh.js';
import { maskSecrets, startActionLog, writeActionLog } from '../core/action-log.js';
import { UserError } from '../core/errors.js';

export interface Audit {
  user_id: number | null;
  job_id?: string | null;
  /** Other values to mask besides the server's own (e.g. a git token fed on stdin). */
  secrets?: readonly string[];
  /** The operation the commands belong to (`deploy`, `drop_database`): each row's text starts with it. */
  operation?: string;
}

export interface RemoteSession {
  /** Runs a command and writes it to the action log; `label` replaces the command text there. */
  run(command: string, opts?: ExecOptions & { label?: string }): Promise<ExecResult>;
  /**
   * Runs a command that must succeed: any other end (exit code, signal, timeout) fails the step with
   * a UserError naming `what` and the end of the command's output, masked. Exit code 3 is a refusal
   * the host program worded itself on stderr: that text alone is the reason.
   */
  check(command: string, what: string, opts?: ExecOptions & { label?: string }): Promise<ExecResult>;
  /** Masks the server's secrets in a text meant for storage or display, and makes it storable (no NUL). */
  mask(text: string): string;
  close(): void;
}

/**
 * Output as stored in the action log: stdout, then stderr, then how it ended. Without the exit
 * code line (`exitCode: false`) for cmd_output, which has its own field for it.
 */
export function formatResult(res: ExecResult, timeoutMs?: number, opts: { exitCode?: boolean } = {}): string {
  const parts = [res.stdout.replace(/\n$/, '')];
  if (res.stderr) parts.push(`[stderr]\n${res.stderr.replace(/\n$/, '')}`);
  if (res.truncated) parts.push('[output truncated]');
  if (res.timedOut) parts.push(`[timed out${timeoutMs ? ` after ${Math.round(timeoutMs / 1000)} s` : ''}; command killed]`);
  else if (res.exitCode === null) parts.push(`[ended by signal ${res.signal ?? 'unknown'}]`);
  else if (opts.exitCode !== false) parts.push(`[exit code ${res.exitCode}]`);
  return parts.filter(Boolean).join('\n');
}

/**
 * A remote step that failed, as the UserError the job fails with: what it was, then the end of what
 * the command said (`said`, default its whole result), with the server's secrets masked.
 */
export function stepFailed(session: Pick<RemoteSession, 'mask'>, what: string, res: ExecResult, said = formatResult(res)): never {
  throw new UserError(session.mask(`${what}: ${said.slice(-2000)}`));
}

/** What `check` fails with: the program's own refusal (exit code 3), else its whole result. */
export function checkedResult(session: Pick<RemoteSession, 'mask'>, what: string, res: ExecResult, timeoutMs?: number): ExecResult {
  if (res.exitCode === 0 && !res.timedOut) return res;
  const refusal = res.exitCode === 3 && res.stderr.trim();
  return stepFailed(session, what, res, refusal || formatResult(res, timeoutMs));
}

export async function openRemoteSession(
  ctx: Pick<AppContext, 'db' | 'secretBox'>,
  server: RootServer,
  audit: Audit,
): Promise<RemoteSession> {
  const target = await sshTargetOf(ctx.secretBox, server);
  const secrets = [...(await secretsOfServer(ctx.secretBox, server)), ...(audit.secrets ?? [])];
  const mask = (text: string) => maskSecrets(text, secrets);
  const row = {
    model_name: 'svc.root.server',
    rec_id: server.id,
    action_type: 'ssh_command',
    user_id: audit.user_id,
    job_id: audit.job_id ?? null,
    operation: audit.operation,
    secrets,
  } as const;

  const where = `${server.username}@${server.ip}:${server.port}`;
  let conn;
  try {
    conn = await connectRootServer(ctx, server, {}, target);
  } catch (err) {
    await writeActionLog(ctx.db, { ...row, status: 'failure', input_text: `ssh ${where}`, output_text: (err as Error).message });
    throw err;
  }
  const connection = conn;

  async function run(command: string, opts: ExecOptions & { label?: string } = {}): Promise<ExecResult> {
    // Written before the command starts: if the worker dies meanwhile, the row is still there.
    const step = await startActionLog(ctx.db, { ...row, input_text: opts.label ?? command });
    let res: ExecResult;
    try {
      res = await connection.exec(command, opts);
    } catch (err) {
      await step.finish('failure', (err as Error).message);
      throw err;
    }
    await step.finish(res.exitCode === 0 && !res.timedOut ? 'success' : 'failure', formatResult(res, opts.timeoutMs));
    return res;
  }

  return {
    run,
    check: async (command, what, opts = {}) => checkedResult({ mask }, what, await run(command, opts), opts.timeoutMs),
    mask,
    close: () => connection.close(),
  };
}
