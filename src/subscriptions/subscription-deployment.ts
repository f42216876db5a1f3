// Deployment of a subscription: a customer instance, not just a copy of the template. The database
// is a ready standby of the trial's package when there is one (renamed, so the trial is ready at
// once), else a copy of the template (CREATE DATABASE ... TEMPLATE). Then, each a step of the job's
// progress and of the action log: a new identity (a copy only; a standby has its own), the
// customer's login with a password of its own, the package limits as config parameters, and the
// filestore on the template's Odoo host. A deployment that fails removes what it made
// (subscription-deployment-cleanup.ts). The state goes deploying → running (the ready mail, a
// trial's trial_ready or a paid subscription's ready, tells the password, which is stored nowhere)
// or failed with the error in the chatter and on the trial request(s) it came from. Each step's
// action-log row starts with "deploy: ", so that a search of the log finds the deployment's rows.
import { writeActionLog } from '../core/action-log.js';
import { authorOfUser, postMessage, type Author } from '../core/chatter.js';
import type { DbTx } from '../core/db.js';
import { ConflictError } from '../core/errors.js';
import type { Subscription } from '../generated/prisma/client.js';
import { newPassword, type Standby } from '../instances/index.js';
import { hostsOdoo } from '../odoo/index.js';
import { type Actor, actorFields, onSubscription, postAlert, postNotice } from './subscription-audit.js';
import { removeMade, type Made } from './subscription-deployment-cleanup.js';
import { makeInstance, placeInstance, removeEarlierAttempt, signIn } from './subscription-deployment-instance.js';
import { type Ctx, type DeploymentStep, type Run, type Source, sourceOf } from './subscription-deployment-run.js';
import { createLifecycleMail } from './subscription-mail.js';
import { assertState, DEPLOYABLE_STATES, lockSubscription, setSubscriptionState } from './subscription-service.js';
import { queueInstanceSync } from './subscription-instance-sync.js';

export interface DeploymentResult {
  subscription_id: number;
  database_name: string;
  template_db_name: string;
  postgresql_server_id: number;
  /** The standby it took, or null for a copy of the template. */
  standby: string | null;
}

export async function deploySubscription(
  ctx: Ctx,
  subscriptionId: number,
  actor: Actor,
  report: (progress: { step: DeploymentStep }) => Promise<unknown> = async () => {},
): Promise<DeploymentResult> {
  const author = await authorOfUser(ctx.db, actor.userId);
  const sub = await claimDeployment(ctx, subscriptionId, author, actor.jobId);
  const made: Made = { database: null, filestoreOn: null, credentialsOn: null };
  const run: Run = { ctx, sub, databaseName: sub.database_name!, author, audit: actorFields(actor), report, made, stepsStarted: 0 };
  try {
    await report({ step: 'connecting' });
    const template = await sourceOf(ctx, sub);
    await removeEarlierAttempt(run, template);
    const { source, standby } = await placeInstance(run, template);
    const password = newPassword();
    const { limitsReadAt, uid } = await makeInstance(run, source, standby, password);
    if (hostsOdoo(source.root)) await signIn(run, source.root, source, uid, password);
    await report({ step: 'recording' });
    const running = await markRunning(run, source, standby, limitsReadAt);
    if (running.instance_sync_pending_at) await queueInstanceSync(ctx, sub.id);
    await sendReadyMail(run, password);
    await report({ step: 'done' });
    return {
      subscription_id: sub.id,
      database_name: run.databaseName,
      template_db_name: source.template.template_db_name,
      postgresql_server_id: source.server.id,
      standby: standby?.database_name ?? null,
    };
  } catch (err) {
    await failDeployment(run, (err as Error).message);
    throw err;
  }
}

/**
 * Only one deployment at a time, and only from a deployable state. The claim records the job, so a
 * job Redis lost is found and failed (subscription-lost-jobs.ts) instead of deploying for ever.
 */
function claimDeployment(ctx: Ctx, subscriptionId: number, author: Author | null, jobId: string | null) {
  return ctx.db.$transaction(async (tx) => {
    const before = await lockSubscription(tx, subscriptionId);
    assertState(before, DEPLOYABLE_STATES, 'deploy');
    return setSubscriptionState(tx, before, 'deploying', author, {
      database_name: before.database_name ?? `sub_${before.id}`,
      operation: 'deploy',
      operation_job_id: jobId,
    });
  });
}

/** running, told in the chatter; a database made again (after a drop) starts open and unsuspended. */
function markRunning(run: Run, source: Source, standby: Standby | null, limitsReadAt: Date) {
  const { ctx, sub, databaseName, author } = run;
  return ctx.db.$transaction(async (tx) => {
    const before = await lockSubscription(tx, sub.id);
    // Ended meanwhile (its job recorded as lost, and what it made removed): it does not come back.
    if (!holdsDeployment(before, sub.operation_job_id)) {
      throw new ConflictError(
        `Subscription ${sub.id} is no longer deploying with this job (it is ${before.state}): the deployment ended meanwhile`,
      );
    }
    // A change of the package fields after they were written stays pending (and is written next).
    const pending =
      before.instance_sync_pending_at && before.instance_sync_pending_at > limitsReadAt ? before.instance_sync_pending_at : null;
    const after = await setSubscriptionState(tx, before, 'running', author, {
      database_dropped_at: null,
      database_created_at: new Date(),
      // Where it lives from now on (a move changes it): the servers its database was made on.
      postgresql_server_id: standby ? standby.postgresql_server_id : source.server.id,
      root_server_id: standby ? standby.root_server_id : (source.root?.id ?? null),
      suspended_at: null,
      suspend_reason: null,
      instance_sync_pending_at: pending,
      operation: null,
      operation_job_id: null,
    });
    const how = standby ? `taken from standby ${standby.database_name}` : `created from template ${source.template.template_db_name}`;
    await postNotice(tx, sub.id, `Database ${databaseName} ${how} on ${source.server.ip}:${source.server.port}.`, author);
    return after;
  });
}

/** The ready mail (trial_ready, or ready when paid): done whatever it does (a failure is in the chatter, retried with a new password). */
async function sendReadyMail(run: Run, password: string) {
  await run.report({ step: run.sub.is_trial ? 'trial_ready_mail' : 'ready_mail' });
  // Both: whichever is due (convert_to_paid may have come during the deployment).
  await createLifecycleMail(run.ctx)
    .sendDue({ subscriptionId: run.sub.id, mails: ['trial_ready', 'ready'], password })
    .catch((err) => run.ctx.log.warn({ err, subscription_id: run.sub.id }, 'ready mail not sent'));
}

/** What it made is removed; failed, with the reason in the chatter (and the action log when no step says it). */
async function failDeployment(run: Run, message: string) {
  const { ctx, sub, author } = run;
  const now = await ctx.db.subscription.findUniqueOrThrow({ where: { id: sub.id } });
  // Ended meanwhile (the sweep removed what it made; a new deployment may own the name now): only
  // its database goes, by the identity it made (never another's by name).
  const made = holdsDeployment(now, sub.operation_job_id) ? run.made : { ...run.made, filestoreOn: null, credentialsOn: null };
  const removed = await removeMade(ctx, sub, made, run.audit);
  await ctx.db.$transaction(async (tx) => {
    await markDeploymentFailed(tx, sub.id, message, author, sub.operation_job_id);
    await postAlert(tx, sub.id, `Deployment failed: ${message}${removed ? `\n${removed}` : ''}`, author);
    if (run.stepsStarted === 0) {
      await writeActionLog(tx, {
        ...onSubscription(sub.id),
        action_type: 'deployment',
        status: 'failure',
        input_text: `deploy ${run.databaseName}`,
        output_text: message,
        ...run.audit,
      });
    }
  });
}

/** Whether the deployment of `jobId` still holds the subscription (one claimed before jobs were recorded: any). */
function holdsDeployment(sub: Subscription, jobId: string | null) {
  if (sub.state !== 'deploying') return false;
  return sub.operation === null || (sub.operation === 'deploy' && sub.operation_job_id === jobId);
}

/**
 * A deployment that did not end: the subscription goes `failed` (from `deploying` by this job's
 * deployment only), its claim ends, and the trial request(s) it came from are told. Used on an
 * error, when the job was interrupted and when Redis lost it.
 */
export async function markDeploymentFailed(tx: DbTx, subscriptionId: number, message: string, author: Author | null, jobId: string | null) {
  const sub = await lockSubscription(tx, subscriptionId);
  if (!holdsDeployment(sub, jobId)) return;
  await setSubscriptionState(tx, sub, 'failed', author, { operation: null, operation_job_id: null });
  const requests = await tx.trialRequest.findMany({ where: { subscription_id: sub.id }, select: { id: true } });
  for (const r of requests) {
    await postMessage(tx, {
      model_name: 'svc.subscription.trial.request',
      rec_id: r.id,
      body: `Deployment of subscription ${sub.id} failed: ${message}`,
      message_type: 'notification',
      subtype_xmlid: 'mail.mt_alert',
    });
  }
}
