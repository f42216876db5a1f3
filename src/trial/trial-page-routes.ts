// The public trial pages (spec §4.1, DESIGN §5): server-rendered with eta, usable without
// JavaScript. Each outcome of the verification service maps to one page and status code here.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import view from '@fastify/view';
import { Eta } from 'eta';
import type { AppContext } from '../context.js';
import { clientIp } from '../core/http/client-ip.js';
import { createTrialCsrf, CSRF_FIELD } from './trial-csrf.js';
import { createTrialVerificationService, type CodeEntry, type SignupField } from './trial-verification-service.js';

const VIEWS = path.resolve(fileURLToPath(new URL('../../views', import.meta.url)));
const FORM_PATH = '/saas/trial';

type Body = Record<string, unknown>;

interface MessagePage {
  title: string;
  message: string;
  resendToken?: string;
  startAgain?: string | false;
}

export async function registerTrialPageRoutes(parent: FastifyInstance, ctx: AppContext) {
  const service = createTrialVerificationService(ctx);
  const csrf = createTrialCsrf(ctx.box.deriveKey('trial-form-csrf'), {
    secureCookie: ctx.config.BASE_URL.startsWith('https:'),
    path: FORM_PATH,
  });

  await parent.register(async (app) => {
    await app.register(view, { engine: { eta: new Eta() }, root: VIEWS, layout: 'layout.eta', production: true });

    /** The visitor's CSRF nonce, set as a cookie on first sight. */
    function nonceFor(req: FastifyRequest, reply: FastifyReply): string {
      const existing = csrf.nonceFrom(req.headers.cookie);
      if (existing) return existing;
      const nonce = csrf.newNonce();
      reply.header('set-cookie', csrf.cookie(nonce));
      return nonce;
    }

    async function render(req: FastifyRequest, reply: FastifyReply, status: number, page: string, data: object) {
      const html = await reply.viewAsync(`trial/${page}`, { ...data, csrf: csrf.issue(nonceFor(req, reply)) });
      return reply.code(status).type('text/html; charset=utf-8').send(html);
    }

    const message = (req: FastifyRequest, reply: FastifyReply, status: number, page: MessagePage) =>
      render(req, reply, status, 'message', {
        ...page,
        heading: page.title,
        status,
        startAgain: page.startAgain === false ? null : (page.startAgain ?? FORM_PATH),
      });

    const codePage = (req: FastifyRequest, reply: FastifyReply, status: number, entry: CodeEntry, extra: { error?: string; notice?: string } = {}) =>
      render(req, reply, status, 'code', { title: 'Enter your code', ...entry, ...extra });

    async function activePackages() {
      return ctx.db.trialPackage.findMany({ where: { active: true }, orderBy: { name: 'asc' }, select: { id: true, name: true } });
    }

    /** POSTs must carry the hidden field that matches the cookie; otherwise nothing is done. */
    async function csrfRefused(req: FastifyRequest, reply: FastifyReply): Promise<boolean> {
      const body = (req.body ?? {}) as Body;
      if (csrf.check(csrf.nonceFrom(req.headers.cookie), body[CSRF_FIELD])) return false;
      await message(req, reply, 403, {
        title: 'Please reload the form',
        message: 'This form has expired or was not sent from this site. Reload the trial form and try again (cookies must be enabled).',
      });
      return true;
    }

    app.setErrorHandler(async (err: Error & { statusCode?: number }, req, reply) => {
      const status = err.statusCode && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 500;
      if (status === 500) req.log.error({ err }, 'trial page failed');
      return message(req, reply, status, {
        title: status === 500 ? 'Something went wrong' : 'The form could not be read',
        message: status === 500 ? 'Please try again in a few minutes.' : 'Please reload the trial form and try again.',
      });
    });

    const config = { group: 'public' as const };

    app.get(FORM_PATH, { config }, async (req, reply) =>
      render(req, reply, 200, 'form', { title: 'Start your free trial', heading: 'Start your free trial', packages: await activePackages() }),
    );

    app.get<{ Params: { url_string: string } }>(`${FORM_PATH}/:url_string`, { config }, async (req, reply) => {
      const pkg = await ctx.db.trialPackage.findFirst({ where: { url_string: req.params.url_string, active: true } });
      if (!pkg) return message(req, reply, 404, { title: 'Trial not found', message: 'There is no trial at this address.' });
      return render(req, reply, 200, 'form', {
        title: `Start your ${pkg.name} trial`,
        heading: `Start your ${pkg.name} trial`,
        packages: [pkg],
        fixedPackage: pkg,
      });
    });

    app.post(`${FORM_PATH}/submit`, { config }, async (req, reply) => {
      if (await csrfRefused(req, reply)) return reply;
      const body = (req.body ?? {}) as Body;
      const outcome = await service.submit(body, clientIp(req));
      switch (outcome.kind) {
        case 'code_sent':
          return codePage(req, reply, 200, outcome);
        case 'invalid': {
          const packages = await activePackages();
          const fixed = body.package_fixed === '1' ? packages.find((p) => String(p.id) === String(body.trial_package_id)) : undefined;
          const values = Object.fromEntries(
            (['contact_name', 'company_name', 'email', 'mobile', 'company_size', 'trial_package_id'] satisfies SignupField[]).map((f) => [
              f,
              typeof body[f] === 'string' ? body[f] : '',
            ]),
          );
          return render(req, reply, 400, 'form', {
            title: 'Please correct the form',
            heading: fixed ? `Start your ${fixed.name} trial` : 'Start your free trial',
            packages,
            fixedPackage: fixed,
            errors: outcome.errors,
            values,
          });
        }
        case 'rate_limited':
          reply.header('Retry-After', String(outcome.retryAfterSeconds));
          return message(req, reply, 429, {
            title: 'Too many requests',
            message:
              outcome.reason === 'email'
                ? 'Too many codes were requested for this e-mail address. Please try again in an hour.'
                : 'Too many trial requests came from your network. Please try again in an hour.',
          });
        case 'mail_failed':
          return message(req, reply, 502, {
            title: 'The code could not be sent',
            message: 'We could not send the code to your e-mail address. Check the address and try again, or come back later.',
          });
      }
    });

    app.post(`${FORM_PATH}/verify`, { config }, async (req, reply) => {
      if (await csrfRefused(req, reply)) return reply;
      const outcome = await service.verify((req.body ?? {}) as Body);
      switch (outcome.kind) {
        case 'verified':
          return render(req, reply, 200, 'confirmed', { title: 'Request received', packageName: outcome.packageName });
        case 'not_found':
          return message(req, reply, 404, { title: 'Request not found', message: 'This verification does not exist. Please fill in the trial form again.' });
        case 'not_pending':
          return message(req, reply, 410, {
            title: 'This code can no longer be used',
            message: 'This verification has ended (it was completed, replaced by a newer one, or cancelled). Please start again.',
          });
        case 'malformed_code':
          return codePage(req, reply, 400, outcome, { error: 'The code has 6 digits.' });
        case 'wrong_code':
          return codePage(req, reply, 400, outcome, {
            error: `This code is not correct. ${outcome.attemptsLeft} ${outcome.attemptsLeft === 1 ? 'attempt' : 'attempts'} left.`,
          });
        case 'attempts_exhausted':
          return message(req, reply, 429, {
            title: 'Too many wrong codes',
            message: 'The code was entered wrongly too many times, so this verification is cancelled. Please start again.',
          });
        case 'expired':
          return message(req, reply, 410, {
            title: 'The code has expired',
            message: outcome.canResend
              ? 'The code is valid for 10 minutes and has expired. Ask for a new one.'
              : 'The code has expired and no more codes can be sent for this request. Please start again.',
            resendToken: outcome.canResend ? outcome.token : undefined,
            startAgain: outcome.canResend ? false : undefined,
          });
        case 'duplicate':
          return message(req, reply, 409, {
            title: 'You already have this trial',
            message: 'A trial of this package was already requested with this e-mail address. We will contact you about it.',
            startAgain: false,
          });
      }
    });

    app.post(`${FORM_PATH}/resend`, { config }, async (req, reply) => {
      if (await csrfRefused(req, reply)) return reply;
      const outcome = await service.resend((req.body ?? {}) as Body);
      switch (outcome.kind) {
        case 'code_sent':
          return codePage(req, reply, 200, outcome, { notice: 'A new code is on its way. Only the newest code is valid.' });
        case 'not_found':
          return message(req, reply, 404, { title: 'Request not found', message: 'This verification does not exist. Please fill in the trial form again.' });
        case 'not_pending':
          return message(req, reply, 410, {
            title: 'This request has ended',
            message: 'No code can be sent for this verification any more. Please start again.',
          });
        case 'rate_limited':
          if (outcome.retryAfterSeconds) reply.header('Retry-After', String(outcome.retryAfterSeconds));
          return codePage(req, reply, 429, outcome, {
            error:
              outcome.reason === 'cooldown'
                ? `Please wait ${outcome.retryAfterSeconds} seconds before asking for a new code.`
                : 'No more codes can be sent for this request. Use the last code you received.',
          });
        case 'mail_failed':
          return message(req, reply, 502, {
            title: 'The code could not be sent',
            message: 'We could not send a new code to your e-mail address, so this verification is cancelled. Please start again later.',
          });
      }
    });
  });
}
