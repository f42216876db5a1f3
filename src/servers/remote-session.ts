// An SSH session on a root server whose every command and output goes to the action log, with the
// server's secrets masked (spec §2.12: the audit log of SSH commands).
import type { AppContext } from '../context.js';
import type { RootServer } from '../generated/prisma/client.js';
import { connectRootServer, secretsOf, sshTargetOf, type ExecOptions, type ExecResult } from '../core/ssh.js';
import { maskSecrets, writeActionLog } from '../action-log/action-log-service.js';
import { ROOT_SERVER_MODEL } from './root-server-store.js';

export interface Audit {
  user_id: number | null;
  job_id?: string | null;
  /** Other values to mask besides the server's own (e.g. a git token fed on stdin). */
  secrets?: readonly string[];
}

export interface RemoteSession {
  /** Runs a command and writes it to the action log; `label` replaces the command text there. */
  run(command: string, opts?: ExecOptions & { label?: string }): Promise<ExecResult>;
  /** Masks the server's secrets in a text meant for storage or display. */
  mask(text: string): string;
  close(): void;
}

/** Output as stored in cmd_output and the action log: stdout, then stderr, then how it ended. */
export function formatResult(res: ExecResult, timeoutMs?: number): string {
  const parts = [res.stdout.replace(/\n$/, '')];
  if (res.stderr) parts.push(`[stderr]\n${res.stderr.replace(/\n$/, '')}`);
  if (res.truncated) parts.push('[output truncated]');
  if (res.timedOut) parts.push(`[timed out${timeoutMs ? ` after ${Math.round(timeoutMs / 1000)} s` : ''}; command killed]`);
  else parts.push(res.exitCode === null ? `[ended by signal ${res.signal ?? 'unknown'}]` : `[exit code ${res.exitCode}]`);
  return parts.filter(Boolean).join('\n');
}

export async function openRemoteSession(ctx: AppContext, server: RootServer, audit: Audit): Promise<RemoteSession> {
  const target = await sshTargetOf(ctx.box, server);
  const secrets = [...secretsOf(target), await ctx.box.reveal(server.code_server_password), ...(audit.secrets ?? [])];
  const mask = (text: string) => maskSecrets(text, secrets);
  const log = (input_text: string, output_text: string, ok: boolean) =>
    writeActionLog(ctx.db, {
      model_name: ROOT_SERVER_MODEL,
      rec_id: server.id,
      action_type: 'ssh_command',
      status: ok ? 'success' : 'failure',
      input_text,
      output_text,
      user_id: audit.user_id,
      job_id: audit.job_id ?? null,
      secrets,
    });

  const where = `${server.username}@${server.ip}:${server.port}`;
  let conn;
  try {
    conn = await connectRootServer(ctx, server);
  } catch (err) {
    await log(`ssh ${where}`, (err as Error).message, false);
    throw err;
  }
  const connection = conn;

  return {
    async run(command, opts = {}) {
      const input = opts.label ?? command;
      try {
        const res = await connection.exec(command, opts);
        await log(input, formatResult(res, opts.timeoutMs), res.exitCode === 0 && !res.timedOut);
        return res;
      } catch (err) {
        await log(input, (err as Error).message, false);
        throw err;
      }
    },
    mask,
    close: () => connection.close(),
  };
}
