// Background jobs: what a job is (its spec: queue, payload schema, deduplication key, what crash
// recovery may do with it), what handles it, and the catalog composed from every feature's jobs.
// A feature defines its jobs with defineJobs() and gives their handlers in its manifest; the
// compiler checks that every job has a handler and every at-most-once job an interruption.
import type { Job } from 'bullmq';
import type { z } from 'zod';
import type { ActionType } from '../generated/prisma/enums.js';
import type { RecordRef } from './chatter.js';
import type { DbTx } from './db.js';
import { refId } from './http/schemas.js';

/**
 * What crash recovery does with a job whose worker died while it ran:
 * - `rerun`: run it again (idempotent maintenance, read-only polls);
 * - `interrupt`: never run it again (it changes a remote system): it ends `failed` with the error
 *   `interrupted`, and its record and action log say so.
 */
export type AfterCrash = 'rerun' | 'interrupt';

export interface JobSpec<P extends z.ZodObject = z.ZodObject> {
  name: string;
  queue: string;
  payload: P;
  afterCrash: AfterCrash;
  /** Deduplication key: while a job with this key waits or runs, adding another returns it. */
  // A method, not a function property: a spec of one payload still counts as a JobSpec.
  key?(payload: z.output<P>): string;
  /** Attempts before the job is failed (default 1: remote side effects are not retried blindly). */
  attempts?: number;
}

/** Who asked for a job; null for the service itself (schedules, webhooks). */
export const requestedBy = { user_id: refId.nullable().default(null) };

type JobSpecInput<P extends z.ZodObject, A extends AfterCrash> = Omit<JobSpec<P>, 'name' | 'afterCrash'> & { afterCrash: A };

/** One job's spec; the payload schema types the key function, and afterCrash stays a literal. */
export function job<P extends z.ZodObject, const A extends AfterCrash>(spec: JobSpecInput<P, A>): JobSpecInput<P, A> {
  return spec;
}

/** A feature's jobs by name; each spec learns its name. */
export function defineJobs<const T extends Record<string, Omit<JobSpec, 'name'>>>(
  specs: T,
): { [K in keyof T & string]: T[K] & { name: K } } {
  return Object.fromEntries(Object.entries(specs).map(([name, spec]) => [name, { ...spec, name }])) as never;
}

export type JobPayload<S extends JobSpec> = z.output<S['payload']>;
export type JobHandler<S extends JobSpec> = (payload: JobPayload<S>, job: Job) => Promise<unknown>;
/** A handler for every job of a feature: the compiler checks none is missing. */
export type JobHandlers<T extends Record<string, JobSpec>> = { [K in keyof T]: JobHandler<T[K]> };

/** How a job that must not run twice reports an interruption (src/jobs/job-interruption.ts). */
export interface Interruption<S extends JobSpec, Ctx = unknown> {
  /** The record the job worked on: its chatter is told, and the action-log row goes there if the job left none. */
  record(payload: JobPayload<S>): RecordRef;
  action_type: ActionType;
  /**
   * Shows the interruption on the record where it has a field for it (same transaction), with the
   * process's context when it must look at the remote side to tell what happened.
   */
  onInterrupted?(tx: DbTx, payload: JobPayload<S>, jobId: string, ctx: Ctx): Promise<void>;
}
/** One for every job of a feature that is not run again after a crash. */
export type Interruptions<T extends Record<string, JobSpec>, Ctx = unknown> = {
  [K in keyof T as T[K]['afterCrash'] extends 'interrupt' ? K : never]: Interruption<T[K], Ctx>;
};

/** What a feature's manifest gives for its jobs; handlers are made from the process's context and registry. */
export interface FeatureJobs<Ctx, Reg> {
  specs: Record<string, JobSpec>;
  handlers(ctx: Ctx, registry: Reg): Record<string, JobHandler<JobSpec>>;
  interruptions: Record<string, Interruption<JobSpec, Ctx>>;
}

/** Ties a feature's specs to its handlers and interruptions, so the compiler checks them against each other. */
export function createFeatureJobs<Ctx, Reg, const T extends Record<string, JobSpec>>(
  specs: T,
  handlers: (ctx: Ctx, registry: Reg) => JobHandlers<T>,
  interruptions: Interruptions<T, Ctx>,
): FeatureJobs<Ctx, Reg> {
  return {
    specs,
    handlers: handlers as FeatureJobs<Ctx, Reg>['handlers'],
    interruptions: interruptions as FeatureJobs<Ctx, Reg>['interruptions'],
  };
}

export type JobCatalog = ReturnType<typeof createJobCatalog>;

/**
 * Every job of the service by name. A name defined twice is refused, and so is a queue that mixes
 * jobs run again after a crash with jobs that must not be: crash recovery is a setting of a whole
 * BullMQ worker, that is of a queue.
 */
export function createJobCatalog(specs: readonly JobSpec[]) {
  const byName = new Map<string, JobSpec>();
  const byQueue = new Map<string, JobSpec>();
  for (const spec of specs) {
    if (byName.has(spec.name)) throw new Error(`Job ${spec.name} is defined twice`);
    // Public job ids are "<queue>-<id>": a queue name holds no dash.
    if (!/^[a-z][a-z_]*$/.test(spec.queue)) throw new Error(`Queue name ${spec.queue} of job ${spec.name}: lower-case letters and _ only`);
    byName.set(spec.name, spec);
    const other = byQueue.get(spec.queue);
    if (other && other.afterCrash !== spec.afterCrash) {
      throw new Error(
        `Queue ${spec.queue} mixes jobs run again after a crash and jobs that must not be ` +
          `(${other.name}: ${other.afterCrash}, ${spec.name}: ${spec.afterCrash}); put them in separate queues`,
      );
    }
    if (!other) byQueue.set(spec.queue, spec);
  }
  return {
    find: (name: string): JobSpec | null => byName.get(name) ?? null,
    names: () => [...byName.keys()].sort(),
    queueNames: (): string[] => [...byQueue.keys()].sort(),
    afterCrashOf: (queue: string): AfterCrash | null => byQueue.get(queue)?.afterCrash ?? null,
  };
}
