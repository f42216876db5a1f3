// The one way to write the audit log of remote actions. Secrets passed in `secrets`
// are masked in both texts before anything is stored, and the texts made storable (no NUL).
import type { Db, DbTx } from './db.js';
import type { ActionStatus, ActionType } from '../generated/prisma/enums.js';
import type { ModelName } from './models.js';

export interface ActionLogEntry {
  model_name: ModelName;
  rec_id: number;
  action_type: ActionType;
  /** The operation the row belongs to (`suspend`, `deploy`): the input text starts with it, so a search for it finds the row. */
  operation?: string;
  input_text: string;
  output_text?: string;
  status?: ActionStatus;
  user_id?: number | null;
  job_id?: string | null;
  /** Values that must not be stored (passwords, tokens...): replaced by ******** as maskSecrets says. */
  secrets?: readonly (string | null | undefined)[];
}

const MAX_TEXT = 256 * 1024;
/** What a secret is replaced with; also what texts the service writes itself show in its place. */
export const MASK = '********';

/**
 * Secrets shorter than this are not masked: masks of one to three characters would turn ordinary
 * text into masks (a secret "k" inside "loopback") and tell which short strings are secrets, while
 * hiding little (such a secret is guessed at once).
 */
export const MIN_MASKED_LENGTH = 4;

const WORD = /[\p{L}\p{N}_]/u;

/**
 * A secret as a whole value: not preceded (followed) by a letter, digit or `_` when it starts (ends)
 * with one, so that it is never cut out of a longer word.
 */
function wholeValue(form: string): RegExp {
  const escaped = form.replace(/[\\^$.*+?()[\]{}|/]/g, '\\$&');
  const before = WORD.test(form[0]!) ? '(?<![\\p{L}\\p{N}_])' : '';
  const after = WORD.test(form.at(-1)!) ? '(?![\\p{L}\\p{N}_])' : '';
  return new RegExp(`${before}${escaped}${after}`, 'gu');
}

/**
 * Text from elsewhere as PostgreSQL text can hold it: NUL (which it cannot) becomes U+FFFD, as bytes
 * that are no UTF-8 already do when output is decoded; very long text is cut, saying how much.
 */
export function storableText(text: string): string {
  const out = text.replaceAll('\0', '\uFFFD');
  return out.length > MAX_TEXT ? `${out.slice(0, MAX_TEXT)}\n[truncated ${out.length - MAX_TEXT} characters]` : out;
}

/**
 * Masks secrets in text that came from elsewhere (command output, remote answers), then makes it
 * storable. Texts the service composes never hold a secret in the first place (they are built with
 * MASK); this is the second line. A secret is masked as a whole value (see wholeValue), and so is its
 * JSON-escaped form (a secret with `"` or `\` quoted inside a config file or a JSON body); longer
 * secrets first, so one holding another is masked whole. Masking compares values: whoever chooses
 * the text (a command that prints a guess) learns whether the guess is a secret.
 */
export function maskSecrets(text: string, secrets: readonly (string | null | undefined)[] = []): string {
  const forms = new Set<string>();
  for (const secret of secrets) {
    if (!secret || secret.length < MIN_MASKED_LENGTH) continue;
    forms.add(secret).add(JSON.stringify(secret).slice(1, -1));
  }
  let out = text;
  for (const form of [...forms].sort((a, b) => b.length - a.length)) out = out.replace(wholeValue(form), MASK);
  return storableText(out);
}

export function writeActionLog(tx: DbTx | Db, entry: ActionLogEntry) {
  return tx.actionLog.create({
    data: {
      model_name: entry.model_name,
      rec_id: entry.rec_id,
      action_type: entry.action_type,
      status: entry.status ?? 'success',
      input_text: maskSecrets(entry.operation ? `${entry.operation}: ${entry.input_text}` : entry.input_text, entry.secrets),
      output_text: maskSecrets(entry.output_text ?? '', entry.secrets),
      user_id: entry.user_id ?? null,
      job_id: entry.job_id ?? null,
    },
  });
}

/** A remote step whose row is already written with status `running`; finish() completes it. */
export interface ActionLogStep {
  readonly id: number;
  /**
   * Writes how the step ended; `tx` makes it part of the caller's transaction. When the database
   * refuses the output, the status is written with a line saying so: the row never stays `running`.
   */
  finish(status: 'success' | 'failure', output_text: string, tx?: DbTx | Db): Promise<void>;
}

const OUTPUT_NOT_STORED = '[output not stored: the database refused it]';

/**
 * Writes the row of a remote step before the step starts (status `running`), so a worker that dies
 * during the step still leaves a trace; the job's interruption handling turns it into a failure.
 */
export async function startActionLog(db: DbTx | Db, entry: Omit<ActionLogEntry, 'status' | 'output_text'>): Promise<ActionLogStep> {
  const row = await writeActionLog(db, { ...entry, status: 'running' });
  return {
    id: row.id,
    async finish(status, output_text, tx = db) {
      const write = (text: string) => tx.actionLog.update({ where: { id: row.id }, data: { status, output_text: text } });
      try {
        await write(maskSecrets(output_text, entry.secrets));
      } catch (err) {
        // Inside a transaction the first failure has aborted it: nothing more can be written there.
        if (tx !== db) throw err;
        await write(OUTPUT_NOT_STORED).catch(() => Promise.reject(err));
      }
    },
  };
}

/** Runs `work` as a remote step: its row written `running` first, then finished with the outcome. */
export async function runLoggedStep<T>(
  db: Db,
  entry: Omit<ActionLogEntry, 'status' | 'output_text'>,
  work: () => Promise<T>,
  output: (result: T) => string = () => 'done',
): Promise<T> {
  const row = await startActionLog(db, entry);
  try {
    const result = await work();
    await row.finish('success', output(result));
    return result;
  } catch (err) {
    await row.finish('failure', (err as Error).message);
    throw err;
  }
}

/**
 * After a crash: the job's rows still `running` become failures saying so. Returns how many rows
 * the job has in all, so the caller can write one when it left none.
 */
export async function interruptActionLogs(tx: DbTx | Db, jobId: string, output_text: string): Promise<number> {
  await tx.actionLog.updateMany({ where: { job_id: jobId, status: 'running' }, data: { status: 'failure', output_text } });
  return tx.actionLog.count({ where: { job_id: jobId } });
}
