// The verified visitor's progress page (/saas/trial/progress), its status endpoint and its script:
// server-rendered in every state and refreshing itself without JavaScript; with it, live. Once the
// instance runs, the page carries a one-time sign-in link (a form posting the token to the
// instance's own /svc/sign_in, sent by the script at once) and the visitor is inside, signed in.
// Only the browser that entered the correct code sees it: the visitor cookie (trial-visitor.ts).
// The script (views/trial/progress.js) is inline, allowed by its hash: the page needs no other file.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { allowOnPage } from '../core/http/page-headers.js';
import type { RouteDocs } from '../core/http/openapi.js';
import { createTrialProgress, type TrialProgressState } from './trial-progress.js';
import type { createTrialVisitor } from './trial-visitor.js';

export const PROGRESS_PATH = '/saas/trial/progress';
const STATUS_PATH = `${PROGRESS_PATH}/status`;
/** States the page waits in (it refreshes itself, or its script asks the status endpoint). */
const WAITING: readonly TrialProgressState[] = ['waiting', 'preparing', 'deploying'];
const NOT_FOLLOWED = {
  title: 'No trial to show',
  message:
    'This page follows the trial whose code was entered in this browser, and there is none here (or it was long ago). ' +
    'When your trial is ready, the e-mail we send you has its address and your login.',
};

/** What the trial pages share with this file: their renderer and route options. */
export interface TrialPageKit {
  render(req: FastifyRequest, reply: FastifyReply, status: number, page: string, data: object): Promise<FastifyReply>;
  message(req: FastifyRequest, reply: FastifyReply, status: number, page: { title: string; message: string }): Promise<FastifyReply>;
  page(name: string, summary: string, docs: RouteDocs): object;
  views: string;
}

/**
 * The Content-Security-Policy source of where the sign-in form posts: its origin when CSP can name
 * its host (letters, digits, dots, hyphens), else the parent domain's wildcard (a database name,
 * the first label of the instance's address, may hold "_", which CSP refuses and so would block the
 * form), else its scheme.
 */
export function formSource(action: string): string {
  const url = new URL(action);
  const port = url.port ? `:${url.port}` : '';
  const cspHost = /^[A-Za-z0-9.-]+$/;
  if (cspHost.test(url.hostname)) return `${url.protocol}//${url.hostname}${port}`;
  const parent = url.hostname.slice(url.hostname.indexOf('.') + 1);
  return url.hostname.includes('.') && cspHost.test(parent) ? `${url.protocol}//*.${parent}${port}` : url.protocol;
}

export function createTrialProgressPages(ctx: AppContext, kit: TrialPageKit, visitor: ReturnType<typeof createTrialVisitor>) {
  const progress = createTrialProgress(ctx);
  const script = readFileSync(path.join(kit.views, 'trial', 'progress.js'), 'utf8');

  /** The page of trial request `requestId`: right after the code (`verified`: to whom the mail goes) or on a later visit. */
  async function show(req: FastifyRequest, reply: FastifyReply, requestId: number, verified?: { maskedEmail: string }) {
    const p = await progress.progress(requestId);
    if (!p) return kit.message(req, reply, 404, NOT_FOLLOWED);
    // A page with a sign-in token, or a state that changes, is never kept by a cache.
    reply.header('cache-control', 'no-store');
    // A HEAD (a link checker, a prefetch) mints nothing.
    const link = p.state === 'ready' && req.method !== 'HEAD' ? await progress.signInLink(requestId) : null;
    const live = WAITING.includes(p.state);
    allowOnPage(reply, { script: live || link ? script : undefined, formOrigins: link ? [formSource(link.action)] : [] });
    const heading = verified ? 'Thank you!' : `Your ${p.packageName} trial`;
    return kit.render(req, reply, p.state === 'closed' ? 410 : 200, 'progress', {
      ...p,
      title: heading,
      heading,
      maskedEmail: verified?.maskedEmail ?? null,
      link,
      refresh: live ? { seconds: p.state === 'waiting' ? 30 : 3, url: PROGRESS_PATH } : null,
      script: live || link ? script : null,
    });
  }

  function register(app: FastifyInstance) {
    const pageDocs = kit.page('progress', "The verified visitor's trial: progress, then into the instance signed in", {
      responses: {
        200: 'Progress (refreshing itself), the ready page posting a one-time sign-in link to the instance, or the failure',
        404: 'No trial is followed in this browser (no valid visitor cookie)',
        410: 'The trial was cancelled or has ended',
      },
    });
    app.get(PROGRESS_PATH, pageDocs, async (req, reply) => {
      const requestId = visitor.requestFrom(req.headers.cookie);
      if (requestId === null) return kit.message(req, reply, 404, NOT_FOLLOWED);
      return show(req, reply, requestId);
    });

    const status = z.object({ state: z.enum(['waiting', 'preparing', 'deploying', 'ready', 'failed', 'closed']).nullable() });
    const statusDocs = kit.page('progressStatus', "The state of the verified visitor's trial (the progress page's script asks it)", {
      produces: 'application/json',
      responses: {
        200: { description: 'The state; the page is loaded again when it changes', body: status },
        404: { description: 'No trial is followed in this browser', body: status },
      },
    });
    app.get(STATUS_PATH, statusDocs, async (req, reply) => {
      const requestId = visitor.requestFrom(req.headers.cookie);
      const p = requestId === null ? null : await progress.progress(requestId);
      return reply
        .code(p ? 200 : 404)
        .header('cache-control', 'no-store')
        .send({ state: p?.state ?? null });
    });
  }

  return { show, register };
}
