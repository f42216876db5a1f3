// The one typed job catalog: each background job's queue, payload schema and, where running it
// twice at once would be wrong, the deduplication key (one waiting/active job per key).
// A feature adds its jobs here and their handlers in src/worker.ts.
import { z } from 'zod';

const id = z.number().int().positive();
/** Who asked for the job; null for the service itself (schedules, webhooks). */
const requestedBy = { user_id: id.nullable().default(null) };

interface JobSpec {
  queue: string;
  payload: z.ZodObject;
  /** Deduplication key: while a job with this key waits or runs, adding another returns it. */
  key?: (payload: never) => string;
  /** Attempts before the job is failed (default 1: remote side effects are not retried blindly). */
  attempts?: number;
}

export const JOBS = {
  rotate_encryption_key: {
    queue: 'maintenance',
    payload: z.object({ ...requestedBy }),
    key: () => 'rotate_encryption_key',
    // A worker that dies mid-rotation leaves the job stalled; the retry finishes it (idempotent).
    attempts: 3,
  },
  // Per-user tokens on a self-hosted push server (auto_generate_tokens); one run per server at a time.
  generate_notification_tokens: {
    queue: 'notifications',
    payload: z.object({ notification_server_id: id, ...requestedBy }),
    key: (p: { notification_server_id: number }) => String(p.notification_server_id),
  },
  // Trial signup (src/trial): a new trial request of a package with Auto Run Subscription.
  process_trial_request: {
    queue: 'trials',
    payload: z.object({ trial_request_id: id, ...requestedBy }),
    key: (p: { trial_request_id: number }) => String(p.trial_request_id),
  },
  // Subscriptions (src/subscriptions): create the customer database from the template.
  deploy_subscription: {
    queue: 'deployments',
    payload: z.object({ subscription_id: id, ...requestedBy }),
    key: (p: { subscription_id: number }) => String(p.subscription_id),
  },
  // Inbound webhooks (src/webhooks): daily retention of the call log (settings.webhook_call_log_days).
  prune_webhook_calls: {
    queue: 'maintenance',
    payload: z.object({}),
    key: () => 'prune_webhook_calls',
  },
  // Root server operations over SSH (spec §4.4), one queue so they never wait behind monitoring polls.
  // The command travels with the job: two run_cmd calls in a row each run their own command.
  root_server_run_cmd: {
    queue: 'ssh',
    payload: z.object({ root_server_id: id, cmd: z.string().min(1), ...requestedBy }),
  },
  root_server_setup_dir_structure: {
    queue: 'ssh',
    payload: z.object({ root_server_id: id, ...requestedBy }),
    key: (p: { root_server_id: number }) => String(p.root_server_id),
  },
  root_server_install_code_server: {
    queue: 'ssh',
    payload: z.object({ root_server_id: id, ...requestedBy }),
    key: (p: { root_server_id: number }) => String(p.root_server_id),
  },
  root_server_remove_code_server: {
    queue: 'ssh',
    payload: z.object({ root_server_id: id, ...requestedBy }),
    key: (p: { root_server_id: number }) => String(p.root_server_id),
  },
  // Git (src/git): deploy a recorded commit to the repository's root server; one job per commit.
  git_push_commit: {
    queue: 'ssh',
    payload: z.object({ repository_id: id, commit_id: id, ...requestedBy }),
    key: (p: { repository_id: number; commit_id: number }) => `${p.repository_id}:${p.commit_id}`,
  },
  // One poll of one monitored root server; created by its job scheduler (src/monitoring).
  monitor_poll: { queue: 'monitor', payload: z.object({ root_server_id: id }) },
  // Daily: deletes monitor logs older than the Keep Root Server Log Period.
  monitor_log_retention: { queue: 'maintenance', payload: z.object({}), key: () => 'monitor_log_retention' },
} as const satisfies Record<string, JobSpec>;

export type JobName = keyof typeof JOBS;
export type QueueName = (typeof JOBS)[JobName]['queue'];
export type JobPayload<N extends JobName> = z.output<(typeof JOBS)[N]['payload']>;
export type JobInput<N extends JobName> = z.input<(typeof JOBS)[N]['payload']>;
export const QUEUE_NAMES = [...new Set(Object.values(JOBS).map((j) => j.queue))] as QueueName[];
