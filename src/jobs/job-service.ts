// Background jobs as the API shows them: state, progress, result, error; the
// list of recent jobs, newest first; and cancelling a job that has not started.
import type { Job, JobType } from 'bullmq';
import type { AppContext } from '../context.js';
import { ConflictError, NotFoundError } from '../core/errors.js';
import type { JobCatalog } from '../core/jobs.js';
import { publicJobId } from '../core/queue.js';
import { jobErrorOf } from './job-interruption.js';

export const JOB_STATES = ['waiting', 'delayed', 'active', 'completed', 'failed'] as const;
export type JobState = (typeof JOB_STATES)[number];

/** BullMQ's states behind each of ours: to a caller, prioritized and waiting-children are "waiting". */
const BULL_STATES: Record<JobState, readonly JobType[]> = {
  waiting: ['waiting', 'prioritized', 'waiting-children'],
  delayed: ['delayed'],
  active: ['active'],
  completed: ['completed'],
  failed: ['failed'],
};

function stateOf(raw: string): JobState {
  return (JOB_STATES as readonly string[]).includes(raw) ? (raw as JobState) : 'waiting';
}

function view(job: Job, state: JobState) {
  return {
    id: publicJobId(job.queueName, job.id!),
    queue: job.queueName,
    name: job.name,
    state,
    // BullMQ starts every job at 0; our jobs report objects, so anything else means "none yet".
    progress: job.progress !== null && typeof job.progress === 'object' ? job.progress : null,
    result: job.returnvalue ?? null,
    error: jobErrorOf(job),
    created_at: new Date(job.timestamp).toISOString(),
    finished_at: job.finishedOn ? new Date(job.finishedOn).toISOString() : null,
  };
}

export interface JobListQuery {
  limit: number;
  offset: number;
  state?: JobState;
  queue?: string;
  name?: string;
}

export function createJobService(ctx: Pick<AppContext, 'queues'>, catalog: JobCatalog) {
  const find = (id: string) => ctx.queues.find(id, catalog.queueNames());

  return {
    async get(id: string) {
      let job = await find(id);
      if (!job) throw new NotFoundError('Job');
      const raw = await job.getState();
      // It may have finished between the two reads: read it again so state and result agree.
      if ((raw === 'completed' || raw === 'failed') && !job.finishedOn) job = (await find(id)) ?? job;
      return view(job, stateOf(raw));
    },

    /**
     * Jobs newest first. Each queue is read newest first by state, the pages merged by creation
     * time; a window of offset + limit per state is enough unless a name filter drops rows, in
     * which case the window grows until the page is full or the queues are exhausted. The jobs
     * kept are counted first: a page past them reads nothing, and no window is larger than they are.
     */
    async list(q: JobListQuery) {
      // Offset pages only: BullMQ reads a state's jobs by position, so a cursor would be a position too.
      const page = (items: ReturnType<typeof view>[], total: number) => ({
        items,
        total,
        total_is_estimate: false,
        limit: q.limit,
        offset: q.offset,
        next_cursor: null,
      });
      const queueNames = q.name ? [catalog.find(q.name)!.queue] : q.queue ? [q.queue] : catalog.queueNames();
      const states = q.state ? [q.state] : [...JOB_STATES];
      const kept = await countOf(queueNames, states);
      if (kept === 0 || (!q.name && q.offset >= kept)) return page([], q.name ? 0 : kept);
      const need = q.offset + q.limit;
      let window = Math.min(need, kept);
      for (;;) {
        const rows: { job: Job; state: JobState }[] = [];
        let exhausted = true;
        for (const name of queueNames) {
          const queue = ctx.queues.queue(name);
          for (const state of states) {
            const jobs = (await queue.getJobs([...BULL_STATES[state]], 0, window - 1, false)).filter(Boolean);
            if (jobs.length >= window && window < kept) exhausted = false;
            for (const job of jobs) if (!q.name || job.name === q.name) rows.push({ job, state });
          }
        }
        if (rows.length >= need || exhausted) {
          // Same millisecond: the later id first ("<epoch>-<n>", the numbers compared as numbers).
          rows.sort((a, b) => b.job.timestamp - a.job.timestamp || b.job.id!.localeCompare(a.job.id!, 'en', { numeric: true }));
          const total = q.name ? rows.length : Math.max(kept, rows.length);
          return page(
            rows.slice(q.offset, need).map((r) => view(r.job, r.state)),
            total,
          );
        }
        window = Math.min(window * 4, kept);
      }
    },

    /** Removes a job that waits or is delayed; 409 once it runs or ran. */
    async cancel(id: string) {
      const job = await find(id);
      if (!job) throw new NotFoundError('Job');
      const state = stateOf(await job.getState());
      if (state !== 'waiting' && state !== 'delayed') {
        throw new ConflictError(`Job ${id} is ${state}: only a waiting or delayed job can be cancelled`, { state });
      }
      // BullMQ keeps a schedule's next run as a delayed job it refuses to remove: say so, not "started".
      if (job.repeatJobKey) {
        throw new ConflictError(`Job ${id} is the next run of a schedule (${job.repeatJobKey}): it cannot be cancelled`, { state });
      }
      const answer = view(job, state);
      try {
        await job.remove();
      } catch {
        // A worker took it between the two steps: it is running now.
        throw new ConflictError(`Job ${id} has just started: it can no longer be cancelled`, { state: 'active' });
      }
      return { ...answer, state: 'cancelled' as const };
    },
  };

  async function countOf(queueNames: string[], states: readonly JobState[]) {
    let total = 0;
    for (const name of queueNames) {
      const counts = await ctx.queues.queue(name).getJobCounts(...states.flatMap((s) => BULL_STATES[s]));
      total += Object.values(counts).reduce((a, b) => a + b, 0);
    }
    return total;
  }
}
