// The public trial pages: server-rendered with eta, usable without
// JavaScript. Each outcome of the verification service maps to one page and status code here.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import view from '@fastify/view';
import { Eta } from 'eta';
import type { AppContext } from '../context.js';
import { clientIp } from '../core/http/client-ip.js';
import { registerPageSecurityHeaders } from '../core/http/page-headers.js';
import type { RouteDocs } from '../core/http/openapi.js';
import { z } from 'zod';
import { createTrialCsrf, CSRF_FIELD } from './trial-csrf.js';
import { createTrialProgressPages } from './trial-progress-routes.js';
import { createTrialVisitor } from './trial-visitor.js';
import { createTrialVerificationService, type CodeEntry, type SignupField } from './trial-verification-service.js';

const VIEWS = path.resolve(fileURLToPath(new URL('../../views', import.meta.url)));
const FORM_PATH = '/saas/trial';
const CSRF_REFUSED = 'The form was not sent from this site (CSRF field missing or stale)';
const DEFAULT_PAGE_SETTINGS = { brand: 'svc', privacyUrl: null };
const NO_SUCH_VERIFICATION = {
  title: 'Request not found',
  message: 'This verification does not exist. Please fill in the trial form again.',
};

/** The trial form as a browser posts it (for the API docs; the service validates it). */
const signupFormDocs = z
  .object({
    _csrf: z.string().describe('The hidden field of the form page'),
    contact_name: z.string(),
    company_name: z.string(),
    email: z.email(),
    mobile: z.string(),
    company_size: z.enum(['1-5', '6-10', '11-30', '30-100', '100+']),
    trial_package_id: z.string().describe('A trial package id'),
  })
  .meta({
    example: {
      _csrf: '<from the form page>',
      contact_name: 'Jane Doe',
      company_name: 'Acme GmbH',
      email: 'jane@acme.example',
      mobile: '+49 170 1234567',
      company_size: '6-10',
      trial_package_id: '1',
    },
  });

type Body = Record<string, unknown>;

interface MessagePage {
  title: string;
  message: string;
  resendToken?: string;
  startAgain?: string | false;
}

export async function registerTrialPageRoutes(parent: FastifyInstance, ctx: AppContext) {
  const service = createTrialVerificationService(ctx);
  const csrf = createTrialCsrf(ctx.secretBox.deriveKey('trial-form-csrf'), {
    secureCookie: ctx.config.BASE_URL.startsWith('https:'),
    path: FORM_PATH,
  });
  const visitor = createTrialVisitor(ctx.secretBox.deriveKey('trial-visitor'), {
    secureCookie: ctx.config.BASE_URL.startsWith('https:'),
    path: FORM_PATH,
  });

  await parent.register(async (app) => {
    await app.register(view, { engine: { eta: new Eta() }, root: VIEWS, layout: 'layout.eta', production: true });
    registerPageSecurityHeaders(app, path.join(VIEWS, 'layout.eta'));

    /** The visitor's CSRF nonce, set as a cookie on first sight. */
    function nonceFor(req: FastifyRequest, reply: FastifyReply): string {
      const existing = csrf.nonceFrom(req.headers.cookie);
      if (existing) return existing;
      const nonce = csrf.newNonce();
      reply.header('set-cookie', csrf.cookie(nonce));
      return nonce;
    }

    async function render(req: FastifyRequest, reply: FastifyReply, status: number, page: string, data: object) {
      // The error page too must render when the database does not answer: then with the defaults.
      const settings = await service.pageSettings().catch(() => DEFAULT_PAGE_SETTINGS);
      const html = await reply.viewAsync(`trial/${page}`, { ...settings, ...data, csrf: csrf.issue(nonceFor(req, reply)) });
      return reply.code(status).type('text/html; charset=utf-8').send(html);
    }

    const message = (req: FastifyRequest, reply: FastifyReply, status: number, page: MessagePage) =>
      render(req, reply, status, 'message', {
        ...page,
        heading: page.title,
        status,
        startAgain: page.startAgain === false ? null : (page.startAgain ?? FORM_PATH),
      });

    const codePage = (
      req: FastifyRequest,
      reply: FastifyReply,
      status: number,
      entry: CodeEntry,
      extra: { error?: string; notice?: string } = {},
    ) => render(req, reply, status, 'code', { title: 'Enter your code', ...entry, ...extra });

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

    /** A public page's route options: its OpenAPI (the form is validated by the service, not a schema). */
    const page = (name: string, summary: string, docs: RouteDocs) => ({
      schema: { tags: ['trial pages'], operationId: `trialPages.${name}`, summary },
      config: { group: 'public' as const, openapi: { produces: 'text/html', ...docs } },
    });
    const FORM = 'application/x-www-form-urlencoded';
    const progressPages = createTrialProgressPages(ctx, { render, message, page, views: VIEWS }, visitor);
    progressPages.register(app);

    app.get(
      FORM_PATH,
      page('form', 'The trial form', { responses: { 200: 'The form, with every active trial package' } }),
      async (req, reply) =>
        render(req, reply, 200, 'form', {
          title: 'Start your free trial',
          heading: 'Start your free trial',
          packages: await service.activePackages(),
        }),
    );

    const packageForm = page('packageForm', 'The trial form of one package', {
      params: z.object({ url_string: z.string().describe("The package's url_string").meta({ example: 'crm' }) }),
      responses: { 200: 'The form of the package whose url_string this is', 404: 'No active package at this address' },
    });
    app.get<{ Params: { url_string: string } }>(`${FORM_PATH}/:url_string`, packageForm, async (req, reply) => {
      const pkg = await service.packageAt(req.params.url_string);
      if (!pkg) return message(req, reply, 404, { title: 'Trial not found', message: 'There is no trial at this address.' });
      return render(req, reply, 200, 'form', {
        title: `Start your ${pkg.name} trial`,
        heading: `Start your ${pkg.name} trial`,
        packages: [pkg],
        fixedPackage: pkg,
      });
    });

    const submitDocs = page('submit', 'Submit the trial form', {
      body: signupFormDocs,
      consumes: FORM,
      responses: {
        200: 'The code entry page: a 6-digit code was e-mailed',
        400: 'The form again, with a message next to each wrong field',
        403: CSRF_REFUSED,
        429: 'Too many codes for this address or network; try again in an hour',
        502: 'The code could not be e-mailed',
      },
    });
    app.post(`${FORM_PATH}/submit`, submitDocs, async (req, reply) => {
      if (await csrfRefused(req, reply)) return reply;
      const body = (req.body ?? {}) as Body;
      const outcome = await service.submit(body, clientIp(req));
      switch (outcome.kind) {
        case 'code_sent':
          return codePage(req, reply, 200, outcome);
        case 'invalid': {
          const packages = await service.activePackages();
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
        case 'rate_limited': {
          reply.header('Retry-After', String(outcome.retryAfterSeconds));
          // Starting again now would only meet the same limit: say when it lifts instead.
          const minutes = Math.max(1, Math.ceil(outcome.retryAfterSeconds / 60));
          const when = `Please come back in ${minutes} ${minutes === 1 ? 'minute' : 'minutes'}.`;
          return message(req, reply, 429, {
            title: 'Too many requests',
            message:
              outcome.reason === 'email'
                ? `Too many codes were requested for this e-mail address. ${when}`
                : `Too many trial requests came from your network. ${when}`,
            startAgain: false,
          });
        }
        case 'mail_failed':
          return message(req, reply, 502, {
            title: 'The code could not be sent',
            message: 'We could not send the code to your e-mail address. Check the address and try again, or come back later.',
          });
      }
    });

    const verifyDocs = page('verify', 'Enter the e-mailed code', {
      body: z
        .object({ _csrf: z.string(), token: z.string().describe('From the code entry page'), code: z.string().describe('6 digits') })
        .meta({ example: { _csrf: '<from the page>', token: '<from the code entry page>', code: '123456' } }),
      consumes: FORM,
      responses: {
        200: "The trial's progress page (the trial request is created; this browser follows it: an HttpOnly visitor cookie)",
        400: 'Wrong code (attempts left on the page) or not 6 digits',
        403: CSRF_REFUSED,
        404: 'No such verification',
        409: 'This e-mail already has a trial of this package',
        410: 'The code expired (resend offered) or the verification ended',
        429: 'Too many wrong codes: the verification is cancelled',
      },
    });
    app.post(`${FORM_PATH}/verify`, verifyDocs, async (req, reply) => {
      if (await csrfRefused(req, reply)) return reply;
      const outcome = await service.verify((req.body ?? {}) as Body);
      switch (outcome.kind) {
        case 'verified':
          // This browser now follows the trial: the progress page, and later the way into it.
          reply.header('set-cookie', visitor.cookie(outcome.trialRequestId));
          return progressPages.show(req, reply, outcome.trialRequestId, { maskedEmail: outcome.maskedEmail });
        case 'not_found':
          return message(req, reply, 404, NO_SUCH_VERIFICATION);
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
            message:
              'This e-mail address has already requested a trial of this package, so no new one was made. When that trial is ready, ' +
              'we send its address to this e-mail address: look for that e-mail (also in your spam folder).',
            startAgain: false,
          });
      }
    });

    const resendDocs = page('resend', 'Send a new code', {
      body: z
        .object({ _csrf: z.string(), token: z.string() })
        .meta({ example: { _csrf: '<from the page>', token: '<from the code entry page>' } }),
      consumes: FORM,
      responses: {
        200: 'The code entry page: a new code was e-mailed',
        403: CSRF_REFUSED,
        404: 'No such verification',
        410: 'The verification ended',
        429: 'Wait before asking again (Retry-After), or no more codes can be sent',
        502: 'The code could not be e-mailed',
      },
    });
    app.post(`${FORM_PATH}/resend`, resendDocs, async (req, reply) => {
      if (await csrfRefused(req, reply)) return reply;
      const outcome = await service.resend((req.body ?? {}) as Body);
      switch (outcome.kind) {
        case 'code_sent':
          return codePage(req, reply, 200, outcome, { notice: 'A new code is on its way. Only the newest code is valid.' });
        case 'not_found':
          return message(req, reply, 404, NO_SUCH_VERIFICATION);
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
