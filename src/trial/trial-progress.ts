// Where a verified visitor's trial is, for the progress page and its status endpoint, and the
// one-time sign-in link that takes the visitor into the instance once it runs (minted only when
// the page is served, never by the status endpoint). The token goes back to the page only: the log
// line of a link that could not be made names the subscription, not the token.
import type { AppContext } from '../context.js';
import { newSignInToken, SIGN_IN_LINK_MINUTES, storeSignInLink } from '../instances/index.js';
import { onInstance, subscriptionUrl } from '../subscriptions/index.js';

export type TrialProgressState =
  /** Our team sets it up (a package without auto-run): the ready mail tells the visitor. */
  | 'waiting'
  /** The request is being made into a subscription. */
  | 'preparing'
  /** The instance is being deployed. */
  | 'deploying'
  | 'ready'
  /** Processing or the deployment failed: the operator was told (the alert in the chatter). */
  | 'failed'
  /** Cancelled, suspended or ended: nothing to sign into. */
  | 'closed';

export interface TrialProgress {
  state: TrialProgressState;
  packageName: string;
  /** The instance's own address, once it runs. */
  url: string | null;
  subscriptionId: number | null;
}

export interface SignInLink {
  /** Where the page posts the token: the instance's own address. */
  action: string;
  token: string;
  minutes: number;
}

type Ctx = Pick<AppContext, 'db' | 'secretBox' | 'config' | 'log'>;

export function createTrialProgress(ctx: Ctx) {
  const { db } = ctx;

  async function progress(requestId: number): Promise<TrialProgress | null> {
    const request = await db.trialRequest.findUnique({
      where: { id: requestId },
      include: { trial_package: { select: { name: true, auto_run_subscription: true } }, subscription: true },
    });
    if (!request) return null;
    const base = { packageName: request.trial_package.name, url: null, subscriptionId: request.subscription_id };
    const sub = request.subscription;
    if (!sub) {
      if (request.state === 'cancelled') return { ...base, state: 'closed' };
      if (request.state === 'done') return { ...base, state: 'closed' }; // its subscription was deleted
      // Processing that failed left the request new with an alert as its latest message.
      const latest = await db.message.findFirst({
        where: { model_name: 'svc.subscription.trial.request', rec_id: request.id },
        orderBy: { id: 'desc' },
        select: { subtype_xmlid: true },
      });
      if (request.state === 'new' && latest?.subtype_xmlid === 'mail.mt_alert') return { ...base, state: 'failed' };
      return { ...base, state: request.state === 'processing' || request.trial_package.auto_run_subscription ? 'preparing' : 'waiting' };
    }
    switch (sub.state) {
      case 'draft':
      case 'confirmed':
      case 'deploying':
        return { ...base, state: 'deploying' };
      case 'failed':
        return { ...base, state: 'failed' };
      case 'running': {
        const url = subscriptionUrl(ctx.config, sub);
        return url ? { ...base, state: 'ready', url } : { ...base, state: 'closed' };
      }
      default:
        return { ...base, state: 'closed' };
    }
  }

  return {
    progress,

    /**
     * A one-time link into the running instance of the request's subscription, its hash written
     * inside the instance; null when the instance is not running or the link could not be made
     * (the page then gives the address and the mailed login instead).
     */
    async signInLink(requestId: number): Promise<SignInLink | null> {
      const request = await db.trialRequest.findUnique({ where: { id: requestId }, include: { subscription: true } });
      const sub = request?.subscription;
      const url = sub?.state === 'running' ? subscriptionUrl(ctx.config, sub) : null;
      if (!sub || !url) return null;
      const { token, hash } = newSignInToken();
      try {
        await onInstance(ctx, sub, (query) => storeSignInLink(query, hash));
      } catch (err) {
        ctx.log.warn({ err, subscription_id: sub.id }, 'no sign-in link for the trial page: the visitor signs in with the mailed password');
        return null;
      }
      return { action: new URL('/svc/sign_in', url).href, token, minutes: SIGN_IN_LINK_MINUTES };
    },
  };
}
