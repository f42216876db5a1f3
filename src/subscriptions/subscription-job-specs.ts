import { z } from 'zod';
import { refId } from '../core/http/schemas.js';
import { defineJobs, job, requestedBy } from '../core/jobs.js';

/** A backup's id on the backup server: a string or a number, as the server gives it. */
export const remoteBackupId = z.union([z.string().min(1).max(200), z.number().int()]);

export const subscriptionJobs = defineJobs({
  // Create the customer database from the template.
  deploy_subscription: job({
    queue: 'deployments',
    payload: z.object({ subscription_id: refId, ...requestedBy }),
    key: (p) => String(p.subscription_id),
    afterCrash: 'interrupt', // CREATE DATABASE on a PostgreSQL server
  }),
  // A new password for the customer's login, set in the instance and mailed (resend_credentials).
  resend_credentials: job({
    queue: 'deployments',
    payload: z.object({ subscription_id: refId, ...requestedBy }),
    key: (p) => String(p.subscription_id),
    afterCrash: 'interrupt', // run again, it would set a password nobody may be told
  }),
  // POST to the backup server, then wait for the backup to be listed done.
  backup_subscription: job({
    queue: 'backups',
    payload: z.object({ subscription_id: refId, ...requestedBy }),
    key: (p) => String(p.subscription_id),
    afterCrash: 'interrupt', // starts a backup on the backup server
  }),
  restore_subscription: job({
    queue: 'backups',
    payload: z.object({ subscription_id: refId, backup_id: remoteBackupId, ...requestedBy }),
    // A restore of another backup asked meanwhile is its own job (it runs after this one), not this one's id.
    key: (p) => `${p.subscription_id}:${p.backup_id}`,
    afterCrash: 'interrupt', // overwrites the customer database
  }),
  // The final backup, then DROP DATABASE; the subscription ends cancelled.
  drop_subscription_database: job({
    queue: 'backups',
    payload: z.object({ subscription_id: refId, skip_backup: z.boolean().default(false), ...requestedBy }),
    key: (p) => String(p.subscription_id),
    afterCrash: 'interrupt',
  }),
  // The package limits into the customer's instance (svc.* parameters) after a change.
  sync_instance: job({
    queue: 'lifecycle',
    payload: z.object({ subscription_id: refId }),
    key: (p) => String(p.subscription_id),
    afterCrash: 'rerun', // writes the current values again: idempotent
  }),
  // Every 5 minutes (and on demand): reminders, expiry, drops after grace, mails due.
  trial_lifecycle: job({
    queue: 'lifecycle',
    payload: z.object({ ...requestedBy }),
    // Idempotent: every change claims its row (state checked under the lock, mails by conditional
    // updates), so a re-run, or two runs at once, do each thing once; its drops are separate jobs.
    afterCrash: 'rerun',
  }),
  // Every 5 minutes: the daily backups due in the window queued (backup_subscription jobs, bounded
  // overall and per Odoo host), and the 26 h backup alert judged.
  backup_schedule: job({
    queue: 'lifecycle',
    payload: z.object({ ...requestedBy }),
    // Idempotent: each queueing is claimed (backup_attempted_at) and the backup job is deduplicated
    // per subscription; the alert fires and resolves by conditional updates.
    afterCrash: 'rerun',
  }),
  // Every 10 minutes: a deployment, backup, restore or drop whose job Redis lost ends as interrupted (its
  // claim released; a deployment failed, what it made removed).
  recover_lost_operations: job({
    queue: 'lifecycle',
    payload: z.object({ ...requestedBy }),
    afterCrash: 'rerun', // reads the claims and Redis again; a claim is recorded once (it ends with it)
  }),
});
