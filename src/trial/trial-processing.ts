// Processing of a trial request into a partner and a trial subscription: New → Processing → Done
// in one transaction, so a failure leaves the request New (no subscription) and the error is then
// posted in its chatter. The transaction holds only its few writes: what can be read or made
// before (the package, the partner found or created by e-mail, the subscription's id) is, because
// every statement in it waits for the event loop while it holds a connection and the request's
// row (twenty at once on a busy worker outlived Prisma's 5 s with the whole work inside: test/
// trial-crowd). The deployment is queued after commit.
import type { AppContext } from '../context.js';
import { AppError, ConflictError, NotFoundError, UserError } from '../core/errors.js';
import { messageRow, postMessage, postMessages, type Author, type RecordRef } from '../core/chatter.js';
import type { TrialRequest } from '../generated/prisma/client.js';
import { findOrCreatePartner } from '../partners/index.js';
import { createTrialSubscription, reserveSubscriptionId, subscriptionJobs } from '../subscriptions/index.js';
import { lockTrialRequest, trialRequestTracking, trialRequestView } from './trial-request-service.js';

export interface ProcessingResult {
  trial_request: ReturnType<typeof trialRequestView>;
  partner_id: number;
  partner_created: boolean;
  subscription_id: number;
  deployment_job_id: string | null;
}

/**
 * Waiting for one of the pool's connections holds nothing (no lock, no row), so a crowd of
 * processings queues for them as long as it takes; the transaction itself keeps Prisma's 5 s.
 */
const QUEUED_TX = { maxWait: 60_000 } as const;

/** A request already processed, or not new, is refused (409) and left as it is. */
function refuseProcessed(request: TrialRequest) {
  if (request.subscription_id !== null) {
    throw new ConflictError(`Trial request ${request.id} already has subscription ${request.subscription_id}`);
  }
  if (request.state !== 'new') throw new ConflictError(`Trial request ${request.id} is ${request.state}; create_subscription needs new`);
}

export async function processTrialRequest(
  ctx: Pick<AppContext, 'db' | 'queues' | 'log'>,
  id: number,
  author: Author | null,
): Promise<ProcessingResult> {
  const ref: RecordRef = { model_name: 'svc.subscription.trial.request', rec_id: id };
  let outcome;
  try {
    const request = await ctx.db.trialRequest.findUnique({ where: { id }, include: { trial_package: true } });
    if (!request) throw new NotFoundError('Trial request');
    refuseProcessed(request);
    const pkg = request.trial_package;
    if (!(request.database_template_id ?? pkg.database_template_id)) {
      throw new UserError(`Neither the trial request nor its trial package "${pkg.name}" has a database template`);
    }
    // The partner is the e-mail's, whatever becomes of this request: found or made once, outside.
    const { partner, created } = await findOrCreatePartner(ctx.db, {
      name: request.name,
      company_name: request.company_name,
      email: request.email,
      mobile: request.mobile,
    });
    const subscriptionId = await reserveSubscriptionId(ctx.db);

    outcome = await ctx.db.$transaction(async (tx) => {
      // Checked again under the row's lock: a concurrent run or an operator may have been first.
      const before = await lockTrialRequest(tx, id);
      refuseProcessed(before);
      const templateId = before.database_template_id ?? pkg.database_template_id;
      if (!templateId) throw new UserError(`Neither the trial request nor its trial package "${pkg.name}" has a database template`);
      const subscription = await createTrialSubscription(tx, {
        id: subscriptionId,
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
      const processing = { ...before, state: 'processing' as const };
      await postMessages(tx, [
        trialRequestTracking(before, processing, author),
        trialRequestTracking(processing, done, author),
        {
          row: messageRow({
            ...ref,
            body: `${created ? 'Created' : 'Reused'} partner ${partner.id} (${partner.email}); created trial subscription ${subscription.id}.`,
            message_type: 'notification',
            author,
          }),
          tracking: [],
        },
      ]);
      return { done, partner, created, subscription };
    }, QUEUED_TX);
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
