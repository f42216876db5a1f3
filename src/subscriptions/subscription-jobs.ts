// Subscription jobs: the deployment of the customer database, its backups, restores and drop, the
// trial lifecycle run and the daily backups' schedule (every 5 minutes, BullMQ job schedulers: one
// run per interval across every worker process) and the recovery of operations whose job Redis
// lost (every 10 minutes).
import type { Job } from 'bullmq';
import type { AppContext } from '../context.js';
import type { DbTx } from '../core/db.js';
import { publicJobId } from '../core/queue.js';
import { featureJobs } from '../feature.js';
import { INTERRUPTED, LOST_WITH_REDIS } from '../jobs/index.js';
import { actorFields, onSubscription, type Actor } from './subscription-audit.js';
import { createBackupOperations } from './subscription-backup.js';
import { BACKUP_SCHEDULE_EVERY_MS, runBackupSchedule } from './subscription-backup-schedule.js';
import { createCredentialsOperation } from './subscription-credentials.js';
import { deploySubscription, markDeploymentFailed } from './subscription-deployment.js';
import { removeLostDeployment } from './subscription-deployment-cleanup.js';
import { createDropOperation } from './subscription-drop.js';
import { subscriptionJobs } from './subscription-job-specs.js';
import { syncInstance } from './subscription-instance-sync.js';
import { runTrialLifecycle } from './subscription-lifecycle.js';
import { recoverLostOperations } from './subscription-lost-jobs.js';

export const TRIAL_LIFECYCLE_EVERY_MS = 5 * 60_000;
export const LOST_OPERATIONS_EVERY_MS = 10 * 60_000;

const actorOf = (payload: { user_id: number | null }, job: Job): Actor => ({
  userId: payload.user_id,
  jobId: publicJobId(job.queueName, job.id!),
});
const recordOf = (p: { subscription_id: number }) => onSubscription(p.subscription_id);
const releaseOperation = (tx: DbTx, p: { subscription_id: number }, jobId: string, ctx: AppContext) =>
  createBackupOperations(ctx).interrupted(tx, p.subscription_id, jobId);

// Not run again (the database may exist): the subscription goes failed, as a failed deployment does.
const deployInterrupted = (message: string) =>
  ({
    record: recordOf,
    action_type: 'deployment',
    onInterrupted: (tx: DbTx, payload: { subscription_id: number }, jobId: string) =>
      markDeploymentFailed(tx, payload.subscription_id, message, null, jobId),
  }) as const;
// Not run again (a backup or restore may be under way on the backup server): the claim ends.
const backupInterrupted = { record: recordOf, action_type: 'database', onInterrupted: releaseOperation } as const;
// PostgreSQL is asked whether the database is still there: cancelled if it is gone, unchanged if not.
const dropInterrupted = {
  record: recordOf,
  action_type: 'database',
  onInterrupted: (tx: DbTx, payload: { subscription_id: number }, jobId: string, ctx: AppContext) =>
    createDropOperation(ctx).interrupted(tx, payload.subscription_id, jobId),
} as const;

export const subscriptionJobHandlers = featureJobs(
  subscriptionJobs,
  (ctx) => {
    const backups = createBackupOperations(ctx);
    const drops = createDropOperation(ctx);
    const credentials = createCredentialsOperation(ctx);
    return {
      deploy_subscription: (payload, job) =>
        deploySubscription(ctx, payload.subscription_id, actorOf(payload, job), (progress) => job.updateProgress(progress)),
      resend_credentials: (payload, job) => credentials.resend(payload.subscription_id, actorOf(payload, job)),
      backup_subscription: (payload, job) => backups.backup(payload.subscription_id, actorOf(payload, job)),
      restore_subscription: (payload, job) => backups.restore(payload.subscription_id, payload.backup_id, actorOf(payload, job)),
      drop_subscription_database: (payload, job) => drops.drop(payload.subscription_id, payload.skip_backup, actorOf(payload, job)),
      sync_instance: (payload) => syncInstance(ctx, payload.subscription_id),
      trial_lifecycle: (payload, job) => runTrialLifecycle(ctx, actorOf(payload, job)),
      backup_schedule: (payload, job) => runBackupSchedule(ctx, actorOf(payload, job)),
      recover_lost_operations: (payload, job) =>
        recoverLostOperations(
          ctx,
          {
            // What it made goes first (its claim keeps a new deployment off meanwhile).
            deploy_subscription: {
              interruption: deployInterrupted(LOST_WITH_REDIS),
              cleanUp: (sub, jobId, audit) => removeLostDeployment(ctx, sub, jobId, audit),
            },
            backup_subscription: { interruption: backupInterrupted },
            restore_subscription: { interruption: backupInterrupted },
            drop_subscription_database: { interruption: dropInterrupted },
          },
          actorFields(actorOf(payload, job)),
        ),
    };
  },
  {
    deploy_subscription: deployInterrupted(INTERRUPTED),
    // Not run again (the password may be set, never told): the chatter says so; the operator runs it again.
    resend_credentials: { record: recordOf, action_type: 'database' },
    backup_subscription: backupInterrupted,
    restore_subscription: backupInterrupted,
    drop_subscription_database: dropInterrupted,
  },
);

/** The lifecycle runs and the backup schedule (idempotent: upserting the schedulers at every worker start is safe). */
export async function registerSubscriptionSchedules(ctx: AppContext) {
  await ctx.queues.schedule('trial-lifecycle', { every: TRIAL_LIFECYCLE_EVERY_MS }, subscriptionJobs.trial_lifecycle, { user_id: null });
  await ctx.queues.schedule('backup-schedule', { every: BACKUP_SCHEDULE_EVERY_MS }, subscriptionJobs.backup_schedule, { user_id: null });
  await ctx.queues.schedule('lost-operations', { every: LOST_OPERATIONS_EVERY_MS }, subscriptionJobs.recover_lost_operations, {
    user_id: null,
  });
}
