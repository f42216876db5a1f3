// Crash recovery of jobs that change a remote system (they run at most once). When a
// worker dies, BullMQ finds the job stalled and hands it to a worker once more (maxStalledCount 1
// on their queues, src/worker.ts); the dispatcher sees its stall count and, instead of running it,
// records the interruption here and fails the job with INTERRUPTED. One transaction: the job's
// action-log rows still `running` become failures (or one failure row is written if the job left
// none), the record's chatter says so, and the job's own onInterrupted shows it on the record.
import type { AppContext } from '../context.js';
import type { Interruption, JobPayload, JobSpec } from '../core/jobs.js';
import { interruptActionLogs, writeActionLog } from '../core/action-log.js';
import { postMessage } from '../core/chatter.js';

export const INTERRUPTED = 'interrupted: the worker stopped while the job ran; it was not run again because it changes a remote system';
/** The same for a job Redis lost while it ran (its data emptied): found by the claim it left (src/subscriptions/subscription-lost-jobs.ts). */
export const LOST_WITH_REDIS = 'interrupted: Redis lost the job while it ran; it was not run again because it changes a remote system';

/** Why a job ended without finishing: its worker died, or Redis lost the job. */
export type InterruptionCause = 'worker' | 'redis';
const CAUSES: Record<InterruptionCause, { output: string; what: string }> = {
  worker: { output: INTERRUPTED, what: 'the worker stopped while it ran' },
  redis: { output: LOST_WITH_REDIS, what: 'Redis lost the job while it ran' },
};

/** BullMQ's failedReason when a job stalled more often than its queue's maxStalledCount allows. */
export const BULLMQ_STALLED_REASON = 'job stalled more than allowable limit';

/** Room for an onInterrupted that asks the remote side what happened (a connection, a query). */
const RECORD_TIMEOUT_MS = 60_000;

export async function recordInterruption(
  ctx: AppContext,
  job: { name: string; id: string; payload: JobPayload<JobSpec> },
  how: Interruption<JobSpec, AppContext>,
  cause: InterruptionCause = 'worker',
): Promise<void> {
  const { output, what } = CAUSES[cause];
  const record = how.record(job.payload);
  const userId = (job.payload as { user_id?: number | null }).user_id ?? null;
  await ctx.db.$transaction(
    async (tx) => {
      const rows = await interruptActionLogs(tx, job.id, output);
      if (rows === 0) {
        await writeActionLog(tx, {
          ...record,
          action_type: how.action_type,
          status: 'failure',
          input_text: `${job.name} (job ${job.id})`,
          output_text: output,
          user_id: userId,
          job_id: job.id,
        });
      }
      await postMessage(tx, {
        ...record,
        body:
          `${job.name} (job ${job.id}) was interrupted: ${what}. It was not run again ` +
          'because it changes a remote system; check the remote side before running it again.',
        message_type: 'notification',
        subtype_xmlid: 'mail.mt_alert',
      });
      await how.onInterrupted?.(tx, job.payload, job.id, ctx);
    },
    { timeout: RECORD_TIMEOUT_MS },
  );
}

/** A job's error as the API shows it: BullMQ's stall limit reads as an interruption. */
export function jobErrorOf(job: { failedReason?: string | null; stalledCounter?: number }): string | null {
  if (!job.failedReason) return null;
  if (job.failedReason !== BULLMQ_STALLED_REASON) return job.failedReason;
  return `interrupted: the worker stopped while the job ran (${job.stalledCounter ?? 1} times); it is not run again`;
}
