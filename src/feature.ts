// What a feature contributes to the service, declared in one manifest per folder
// (src/<feature>/index.ts), and what the composition of all of them gives back (the registry).
// src/features.ts lists the features; buildApp() and startWorkers() loop over that list.
import type { FastifyInstance } from 'fastify';
import type { AppContext } from './context.js';
import {
  featureJobs as coreFeatureJobs,
  type FeatureJobs,
  type Interruptions,
  type JobCatalog,
  type JobHandlers,
  type JobSpec,
} from './core/jobs.js';
import type { ModelInfo, ModelRegistry } from './core/models.js';
import type { WebhookMethodTable } from './core/webhook-methods.js';

/** Everything the features contribute, composed once per process (src/features.ts). */
export interface Registry {
  models: ModelRegistry;
  jobs: JobCatalog;
  webhookMethods: WebhookMethodTable;
}

export interface Feature {
  /** The folder's name, for errors and logs. */
  name: string;
  /** Record families: chatter routes, webhook targets, tracked fields, secret columns. */
  models?: readonly ModelInfo[];
  /** HTTP routes (the REST API under /api/v1, public pages). */
  routes?(app: FastifyInstance, ctx: AppContext, registry: Registry): void | Promise<void>;
  /** Background jobs, their handlers, and how an interruption is recorded for those that must not run twice. */
  jobs?: FeatureJobs<AppContext, Registry>;
  /** Recurring jobs and other schedules, put in place at worker start (idempotent). */
  schedules?(ctx: AppContext): Promise<void>;
  /** The methods inbound webhooks may call on this feature's models (DESIGN §3 registry). */
  webhookMethods?(ctx: AppContext): WebhookMethodTable;
}

/** A feature's jobs, checked by the compiler: a handler for every job, an interruption for every at-most-once one. */
export function featureJobs<const T extends Record<string, JobSpec>>(
  specs: T,
  handlers: (ctx: AppContext, registry: Registry) => JobHandlers<T>,
  interruptions: Interruptions<T, AppContext>,
): FeatureJobs<AppContext, Registry> {
  return coreFeatureJobs(specs, handlers, interruptions);
}
