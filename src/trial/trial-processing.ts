// Processing of a trial request into a partner and a trial subscription:
// New → Processing → Done in one transaction, so a failure leaves the request New (nothing
// half-made) and the error is then posted in its chatter. The deployment is queued after commit.
import type { AppContext } from '../context.js';
import { AppError, ConflictError, NotFoundError, UserError } from '../core/errors.js';
import { postMessage, type Author, type RecordRef } from '../core/chatter.js';
import { findOrCreatePartner } from '../partners/index.js';
import { createTrialSubscription, subscriptionJobs } from '../subscriptions/index.js';
import { lockTrialRequest, trackTrialRequest, trialRequestView } from './trial-request-service.js';

export interface ProcessingResult {
  trial_request: ReturnType<typeof trialRequestView>;
  partner_id: number;
  partner_created: boolean;
  subscription_id: number;
  deployment_job_id: string | null;
}

export async function processTrialRequest(
  ctx: Pick<AppContext, 'db' | 'queues' | 'log'>,
  id: number,
  author: Author | null,
): Promise<ProcessingResult> {
  const ref: RecordRef = { model_name: 'svc.subscription.trial.request', rec_id: id };
  let outcome;
  try {
    outcome = await ctx.db.$transaction(async (tx) => {
      const before = await lockTrialRequest(tx, id);
      if (before.subscription_id !== null) {
        throw new ConflictError(`Trial request ${id} already has subscription ${before.subscription_id}`);
      }
      if (before.state !== 'new') throw new ConflictError(`Trial request ${id} is ${before.state}; create_subscription needs new`);
      const processing = await tx.trialRequest.update({ where: { id }, data: { state: 'processing' } });
      await trackTrialRequest(tx, before, processing, author);

      const pkg = await tx.trialPackage.findUniqueOrThrow({ where: { id: before.trial_package_id } });
      const templateId = before.database_template_id ?? pkg.database_template_id;
      if (!templateId) throw new UserError(`Neither the trial request nor its trial package "${pkg.name}" has a database template`);

      const { partner, created } = await findOrCreatePartner(tx, {
        name: before.name,
        company_name: before.company_name,
        email: before.email,
        mobile: before.mobile,
      });
      const subscription = await createTrialSubscription(tx, {
        partnerId: partner.id,
        companyName: before.company_name,
        pkg,
        databaseTemplateId: templateId,
        author,
      });
      const done = await tx.trialRequest.update({
        where: { id },
        data: { state: 'done', partner_id: partner.id, subscription_id: subscription.id },
      });
      await trackTrialRequest(tx, processing, done, author);
      await postMessage(tx, {
        ...ref,
        body: `${created ? 'Created' : 'Reused'} partner ${partner.id} (${partner.email}); created trial subscription ${subscription.id}.`,
        message_type: 'notification',
        author,
      });
      return { done, partner, created, subscription };
    });
  } catch (err) {
    // A request that is not in a state to be processed was not touched: nothing to report on it.
    if (err instanceof ConflictError || err instanceof NotFoundError) throw err;
    const message = err instanceof AppError ? err.message : `Unexpected error: ${(err as Error).message}`;
    ctx.log.warn({ err, trial_request_id: id }, 'trial request processing failed');
    await postMessage(ctx.db, {
      ...ref,
      body: `Processing failed: ${message}`,
      message_type: 'notification',
      subtype_xmlid: 'mail.mt_alert',
      author,
    });
    throw err;
  }

  let jobId: string | null = null;
  try {
    jobId = await ctx.queues.enqueue(subscriptionJobs.deploy_subscription, {
      subscription_id: outcome.subscription.id,
      user_id: author?.id ?? null,
    });
  } catch (err) {
    ctx.log.error({ err, subscription_id: outcome.subscription.id }, 'could not queue the deployment');
    const body = `The deployment could not be queued: ${(err as Error).message}. Use the subscription action deploy.`;
    await postMessage(ctx.db, { model_name: 'svc.subscription', rec_id: outcome.subscription.id, body, subtype_xmlid: 'mail.mt_alert' });
    await postMessage(ctx.db, { ...ref, body, subtype_xmlid: 'mail.mt_alert' });
  }
  return {
    trial_request: trialRequestView(outcome.done),
    partner_id: outcome.partner.id,
    partner_created: outcome.created,
    subscription_id: outcome.subscription.id,
    deployment_job_id: jobId,
  };
}

/**
 * A run that committed and then stopped before queueing the deployment (its worker died) left a
 * confirmed subscription that no job deploys; the run taken up again queues it. The deployment is
 * deduplicated per subscription, so this never deploys twice. Null when there is nothing to resume.
 */
export async function queueMissedDeployment(ctx: Pick<AppContext, 'db' | 'queues'>, id: number, author: Author | null) {
  const request = await ctx.db.trialRequest.findUnique({ where: { id }, select: { subscription: { select: { id: true, state: true } } } });
  if (request?.subscription?.state !== 'confirmed') return null;
  return ctx.queues.enqueue(subscriptionJobs.deploy_subscription, {
    subscription_id: request.subscription.id,
    user_id: author?.id ?? null,
  });
}
