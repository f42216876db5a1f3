// What a feature contributes to the service, declared in one manifest per folder
// (src/<feature>/index.ts), and what the composition of all of them gives back (the registry).
// src/features.ts lists the features; buildApp() and startWorkers() loop over that list.
import type { FastifyInstance } from 'fastify';
import type { AppContext } from './context.js';
import type { Author } from './core/chatter.js';
import { createFeatureJobs, type FeatureJobs, type Interruptions, type JobCatalog, type JobHandlers, type JobSpec } from './core/jobs.js';
import type { MetricsSource } from './core/metrics.js';
import type { ModelInfo, ModelRegistry } from './core/models.js';
import type { WebhookMethodTable } from './core/webhook-methods.js';

/** Everything the features contribute, composed once per process (src/features.ts). */
export interface Registry {
  models: ModelRegistry;
  jobs: JobCatalog;
  webhookMethods: WebhookMethodTable;
  /** Called with the recorded monitoring polls, good or failed (the features' onMonitorPoll). */
  monitorPollObservers: readonly MonitorPollObserver[];
  /** Called when monitoring of a server was stopped (the features' onMonitorStop). */
  monitorStopObservers: readonly MonitorStopObserver[];
  /** Called with the changes of root servers that other features follow (the features' onRootServerChange). */
  rootServerObservers: readonly RootServerObserver[];
  /** The series the features read at scrape time (their `metrics`). */
  metricsSources: readonly MetricsSource[];
  /** Called after a git deploy switched a live path (the features' onGitDeploy). */
  gitDeployObservers: readonly GitDeployObserver[];
  /** Called after a host's Odoo was set up or a template built or updated (the features' onOdooChange). */
  odooChangeObservers: readonly OdooChangeObserver[];
}

/**
 * What the odoo feature changed, for the features that follow hosts and templates (pools): told in
 * the job, after it succeeded. Plain data, so that odoo imports none of them.
 */
export type OdooChange =
  | { kind: 'host_set_up'; root_server_id: number }
  | { kind: 'template_built' | 'template_updated'; database_template_id: number };

export type OdooChangeObserver = (change: OdooChange) => Promise<void>;

/** A git deploy that switched the live path on a root server; told by git after it succeeded. Plain data. */
export interface GitDeployEvent {
  repository_id: number;
  /** The git commit record deployed. */
  commit_id: number;
  root_server_id: number;
  live_path: string;
  user_id: number | null;
}

export type GitDeployObserver = (event: GitDeployEvent) => Promise<void>;

/**
 * What one monitoring poll recorded, for the features that react to it (alerts). Plain data, so
 * that neither side imports the other: monitoring emits it, any feature may observe it.
 */
export interface MonitorPollEvent {
  root_server_id: number;
  outcome: 'ok' | 'failed';
  /** server_state before and after this poll. */
  previous_state: string;
  server_state: string;
  /** The sample's metrics (a good poll), by monitor-log field name. */
  metrics: Readonly<Record<string, number>> | null;
  /** Failed polls in a row (0 after a good poll). */
  failures: number;
  error: string | null;
  at: Date;
}

/**
 * Told the polls recorded together: one event for a single poll, many for a batch write of
 * streamed samples (each event once; in the order recorded).
 */
export type MonitorPollObserver = (events: readonly MonitorPollEvent[]) => Promise<void>;

/** Monitoring of a server was stopped (stop_monitor): told once, after the stop committed. */
export interface MonitorStopEvent {
  root_server_id: number;
  /** When it was stopped. */
  at: Date;
  /** Who stopped it (null: the service, e.g. a webhook). */
  by: string | null;
}

export type MonitorStopObserver = (event: MonitorStopEvent) => Promise<void>;

/**
 * A change of a root server that features following the server react to (monitoring), told by
 * the servers feature in the request that makes it; an observer's failure fails the request.
 * Plain data, so that servers imports none of them: they read what else they need.
 */
export type RootServerChange =
  /** It is about to be reset to draft or cancelled: told before, so what needs a confirmed server stops first. */
  | { kind: 'unconfirming'; root_server_id: number; to: 'draft' | 'cancel'; author: Author | null }
  /** The API changed these fields of it: told after the change committed. */
  | { kind: 'updated'; root_server_id: number; fields: readonly string[] }
  /** It is about to be deleted: told before. */
  | { kind: 'deleting'; root_server_id: number };

export type RootServerObserver = (change: RootServerChange) => Promise<void>;

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
  /** The methods inbound webhooks may call on this feature's models (only those safe for anyone holding a webhook URL). */
  webhookMethods?(ctx: AppContext): WebhookMethodTable;
  /** Reacts to every recorded monitoring poll (a batch at a time); runs in the worker that recorded them, after they are stored. */
  onMonitorPoll?(ctx: AppContext): MonitorPollObserver;
  /** Reacts to a stop of monitoring (in a job of the worker role, retried on failure). */
  onMonitorStop?(ctx: AppContext): MonitorStopObserver;
  /** Reacts to a change of a root server (in the request that makes it). */
  onRootServerChange?(ctx: AppContext): RootServerObserver;
  /** Reacts to a successful git deploy (in the deploy's job; a failure is told, the deploy stays done). */
  onGitDeploy?(ctx: AppContext): GitDeployObserver;
  /** Reacts to a host's Odoo set up or a template built or updated (in that job, after it succeeded; a failure fails the job). */
  onOdooChange?(ctx: AppContext): OdooChangeObserver;
  /** Series read at scrape time from PostgreSQL or Redis (GET /metrics of the API processes). */
  metrics?(ctx: AppContext, registry: Registry): readonly MetricsSource[];
  /** Long-running work of the worker role besides jobs (the monitor runner); stopped by Workers.close(). */
  background?(ctx: AppContext, registry: Registry): Promise<BackgroundTask>;
}

export interface BackgroundTask {
  close(): Promise<void>;
}

/** A feature's jobs, checked by the compiler: a handler for every job, an interruption for every at-most-once one. */
export function featureJobs<const T extends Record<string, JobSpec>>(
  specs: T,
  handlers: (ctx: AppContext, registry: Registry) => JobHandlers<T>,
  interruptions: Interruptions<T, AppContext>,
): FeatureJobs<AppContext, Registry> {
  return createFeatureJobs(specs, handlers, interruptions);
}
