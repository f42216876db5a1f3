// The one way to write the audit log of remote actions (spec §2.12). Secrets passed in `secrets`
// are masked in both texts before anything is stored.
import type { Db, DbTx } from '../core/db.js';
import type { ActionStatus, ActionType } from '../generated/prisma/enums.js';

export interface ActionLogEntry {
  model_name: string;
  rec_id: number;
  action_type: ActionType;
  input_text: string;
  output_text?: string;
  status?: ActionStatus;
  user_id?: number | null;
  job_id?: string | null;
  /** Values that must not be stored (passwords, tokens...): replaced by ******** wherever they appear. */
  secrets?: readonly (string | null | undefined)[];
}

const MAX_TEXT = 256 * 1024;

export function maskSecrets(text: string, secrets: readonly (string | null | undefined)[] = []): string {
  let out = text;
  for (const secret of secrets) {
    if (secret && secret.length >= 3) out = out.split(secret).join('********');
  }
  return out.length > MAX_TEXT ? `${out.slice(0, MAX_TEXT)}\n[truncated ${out.length - MAX_TEXT} characters]` : out;
}

export function writeActionLog(tx: DbTx | Db, entry: ActionLogEntry) {
  return tx.actionLog.create({
    data: {
      model_name: entry.model_name,
      rec_id: entry.rec_id,
      action_type: entry.action_type,
      status: entry.status ?? 'success',
      input_text: maskSecrets(entry.input_text, entry.secrets),
      output_text: maskSecrets(entry.output_text ?? '', entry.secrets),
      user_id: entry.user_id ?? null,
      job_id: entry.job_id ?? null,
    },
  });
}
