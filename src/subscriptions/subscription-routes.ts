// REST: /api/v1/subscriptions (read: user, write and actions: operator) and the state methods as
// actions: confirm, cancel, reset_to_draft, suspend, reactivate, extend_trial, convert_to_paid (200
// with the record), deploy, resend_credentials and backup (202, a job), restore and drop_database
// (administrator, 202);
// and POST /api/v1/settings/actions/run_trial_lifecycle (operator, 202).
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { action, registerActions, registerSettingsActions } from '../core/http/actions.js';
import { registerCrud } from '../core/http/crud.js';
import { queryBoolean, queryId } from '../core/http/schemas.js';
import { SubscriptionState, UsageState } from '../generated/prisma/enums.js';
import { remoteBackupId, subscriptionJobs } from './subscription-job-specs.js';
import { createBackupOperations } from './subscription-backup.js';
import { createCredentialsOperation } from './subscription-credentials.js';
import { createDropOperation } from './subscription-drop.js';
import { subscription, subscriptionCreate, subscriptionUpdate, type SubscriptionOut } from './subscription-schemas.js';
import { createSubscriptionService } from './subscription-service.js';
import { subscriptionModel } from './subscription-models.js';
import { createSuspensionService } from './subscription-suspension.js';
import { rotateDatabaseRole } from './subscription-database-role.js';

export function registerSubscriptionRoutes(parent: FastifyInstance, ctx: AppContext) {
  const service = createSubscriptionService(ctx);
  const suspension = createSuspensionService(ctx);
  const backups = createBackupOperations(ctx);
  const drops = createDropOperation(ctx);
  const credentials = createCredentialsOperation(ctx);
  registerCrud(parent, {
    path: '/subscriptions',
    model: subscriptionModel,
    tag: 'subscriptions',
    service,
    output: subscription,
    create: subscriptionCreate,
    update: subscriptionUpdate,
    filters: z.object({
      state: z.enum(SubscriptionState).optional(),
      partner_id: queryId.optional(),
      is_trial: queryBoolean.optional(),
      usage_state: z.enum(UsageState).optional(),
    }),
    read: 'user',
    write: 'operator',
  });

  const transition = (summary: string, description: string, name: 'confirm' | 'cancel' | 'reset_to_draft') =>
    action({
      summary,
      description,
      response: subscription,
      run: async ({ id, author }) => (await service[name](id, author)) as SubscriptionOut,
    });
  const answer = (row: Parameters<typeof service.view>[0]) => service.view(row) as SubscriptionOut;
  const actorOf = (user: { id: number }) => ({ userId: user.id, jobId: null });

  registerActions(parent, {
    path: '/subscriptions',
    tag: 'subscriptions',
    group: 'operator',
    actions: {
      confirm: transition('Confirm a subscription', 'draft → confirmed.', 'confirm'),
      cancel: transition(
        'Cancel a subscription',
        'Any state but deploying or cancelled → cancelled. The database is left as it is (drop_database removes it).',
        'cancel',
      ),
      reset_to_draft: transition('Reset a subscription to draft', 'cancelled or failed → draft.', 'reset_to_draft'),
      deploy: action({
        summary: 'Deploy a subscription',
        description: 'Queues the deployment (confirmed or failed subscriptions): the customer database is created from the template.',
        response: 'job',
        run: ({ id, user }) => service.deploy(id, user.id),
      }),
      suspend: action({
        summary: 'Suspend a subscription',
        description:
          "running → suspended (suspend_reason manual). On the database template's PostgreSQL server: ALTER DATABASE ... ALLOW_CONNECTIONS false CONNECTION LIMIT 0, and the open sessions are ended. PostgreSQL unreachable: 400, state unchanged.",
        response: subscription,
        run: async ({ id, user, author }) => answer(await suspension.suspend(id, author, actorOf(user))),
      }),
      rotate_database_role: action({
        summary: "Change the password of the subscription's database role",
        description:
          "On an Odoo host svc set up, each customer database is its own PostgreSQL role: a new random password for it, set in PostgreSQL (as a SCRAM verifier) and in the credentials file the host's Odoo reads (its new connections use it at once). Never shown: kept encrypted. 409 when the database has no role of its own or another operation holds the subscription; a step that fails puts the old password back.",
        response: subscription,
        run: async ({ id, user, author }) => answer(await rotateDatabaseRole(ctx, id, actorOf(user), author)),
      }),
      reactivate: action({
        summary: 'Reactivate a subscription',
        description:
          'suspended → running: ALLOW_CONNECTIONS true, CONNECTION LIMIT -1. A trial whose trial_end_date has passed answers 400 (use extend_trial or convert_to_paid).',
        response: subscription,
        run: async ({ id, user, author }) => answer(await suspension.reactivate(id, author, actorOf(user))),
      }),
      extend_trial: action({
        summary: 'Extend a trial',
        description:
          'Trials only (400 otherwise), any state but cancelled. Moves trial_end_date by `days` from the later of now and the current end, and grace_end_date by the same amount; a subscription suspended because its trial expired is reactivated.',
        body: z
          .object({ days: z.number().int().min(1).max(365).describe('1 to 365') })
          .strict()
          .meta({ example: { days: 14 } }),
        response: subscription,
        run: async ({ id, body, user, author }) => answer(await suspension.extendTrial(id, body.days, author, actorOf(user))),
      }),
      convert_to_paid: action({
        summary: 'Convert a trial to a paid subscription',
        description:
          'is_trial → false (400 when it is already paid), any state but cancelled: the trial dates no longer apply. A suspension for trial_expired is lifted (running again).',
        response: subscription,
        run: async ({ id, user, author }) => answer(await suspension.convertToPaid(id, author, actorOf(user))),
      }),
      resend_credentials: action({
        summary: 'Mail the customer a new password',
        description:
          'From running, with the database its deployment made (409 otherwise). A job: a new password for the customer\'s login (the partner\'s e-mail) is set in the instance, then mailed to the customer ("Your new password"); the earlier password no longer works. The password is told only in that mail (the chatter copy shows ********). A mail that cannot be sent fails the job: run it again.',
        response: 'job',
        run: async ({ id, user }) => {
          await credentials.checkResend(id);
          return ctx.queues.enqueue(subscriptionJobs.resend_credentials, { subscription_id: id, user_id: user.id });
        },
      }),
      backup: action({
        summary: 'Back up the database of a subscription',
        description:
          "From running, suspended or cancelled (database not dropped). A job: POST {backup server url}{backup_db_path} {db_name}, then GET /api/backups?db_name= until that backup is done or failed (bounded by BACKUP_WAIT_MS); sets backup_state. The backup server is the subscription's backup_server_id, or the only one. A suspended database is opened to superusers only for the backup.",
        response: 'job',
        run: async ({ id, user }) => {
          await backups.checkBackup(id);
          return ctx.queues.enqueue(subscriptionJobs.backup_subscription, { subscription_id: id, user_id: user.id });
        },
      }),
      restore: action({
        summary: 'Restore the database of a subscription',
        description:
          'Administrators; from running. backup_id must be a completed backup of this database that the backup server lists (400 otherwise); without it, the latest completed one. A job: POST {restore_db_path} {db_name, backup_id}.',
        group: 'administrator',
        body: z
          .object({ backup_id: remoteBackupId.optional().describe('A completed backup of this database; default: the latest one') })
          .strict()
          .meta({ example: { backup_id: 17 } })
          .nullable()
          .optional(),
        response: 'job',
        run: async ({ id, body, user }) => {
          const backupId = await backups.resolveRestore(id, body?.backup_id, user.id);
          return ctx.queues.enqueue(subscriptionJobs.restore_subscription, { subscription_id: id, backup_id: backupId, user_id: user.id });
        },
      }),
      drop_database: action({
        summary: 'Drop the database of a subscription',
        description:
          'Administrators; from suspended or cancelled. A job: a final backup that must end done (unless skip_backup), then DROP DATABASE ... WITH (FORCE); database_dropped_at is set and the state becomes cancelled. A failed backup stops it with nothing dropped.',
        group: 'administrator',
        body: z
          .object({ skip_backup: z.boolean().optional().describe('Drop without the final backup (default false)') })
          .strict()
          .meta({ example: { skip_backup: false } })
          .nullable()
          .optional(),
        response: 'job',
        run: async ({ id, body, user }) => {
          await drops.checkDrop(id);
          return ctx.queues.enqueue(subscriptionJobs.drop_subscription_database, {
            subscription_id: id,
            skip_backup: body?.skip_backup ?? false,
            user_id: user.id,
          });
        },
      }),
    },
  });

  registerSettingsActions(parent, 'operator', {
    run_trial_lifecycle: action({
      summary: 'Run the trial lifecycle now',
      description:
        'Queues the trial_lifecycle job (it also runs every 5 minutes): due reminder mails, suspension of running trials whose trial_end_date has passed (with the trial_expired mail), and, when drop_expired_trials is on, drop_database of the expired ones whose grace_end_date has passed. Result: {suspended, suspend_failed, drops_queued, mails}.',
      response: 'job',
      run: ({ user }) => ctx.queues.enqueue(subscriptionJobs.trial_lifecycle, { user_id: user.id }),
    }),
  });
}
