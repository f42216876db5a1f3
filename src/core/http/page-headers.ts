// Security headers for the server-rendered public pages: no scripts but the one inline script a page
// allows by its hash (allowOnPage), the one inline style block of the layout allowed by its hash,
// forms posting only to this site (or where a page allows), no framing.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { FastifyInstance, FastifyReply } from 'fastify';

/** What one answer allows beyond the default policy. */
export interface PageAllowance {
  /** The text of the page's one inline script (allowed by its hash; it may fetch from this site). */
  script?: string;
  /** Origins (besides this site) its forms may post to. */
  formOrigins?: string[];
}

const allowances = new WeakMap<FastifyReply, PageAllowance>();

/** Allows this answer what `allow` says (the page's own script, a form to another origin). */
export function allowOnPage(reply: FastifyReply, allow: PageAllowance) {
  allowances.set(reply, allow);
}

/** The CSP hash source of an inline block's text. */
const hashSource = (text: string) => `'sha256-${createHash('sha256').update(text).digest('base64')}'`;

/** CSP hash sources of every inline <style> block of a template. */
function styleHashes(template: string): string[] {
  return [...template.matchAll(/<style>([\s\S]*?)<\/style>/g)].map((m) => hashSource(m[1]!));
}

function pageSecurityHeaders(layoutFile: string): (allow: PageAllowance | undefined) => Record<string, string> {
  const styles = styleHashes(readFileSync(layoutFile, 'utf8'));
  return (allow) => ({
    'content-security-policy': [
      "default-src 'none'",
      ...(allow?.script ? [`script-src ${hashSource(allow.script)}`, "connect-src 'self'"] : []),
      `style-src ${styles.join(' ') || "'none'"}`,
      "img-src 'self'",
      `form-action ${["'self'", ...(allow?.formOrigins ?? [])].join(' ')}`,
      "frame-ancestors 'none'",
      "base-uri 'none'",
    ].join('; '),
    'x-frame-options': 'DENY',
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'same-origin',
  });
}

/** Adds the headers to every answer of this scope (pages, error pages, redirects). */
export function registerPageSecurityHeaders(scope: FastifyInstance, layoutFile: string) {
  const headers = pageSecurityHeaders(layoutFile);
  scope.addHook('onSend', async (_req, reply) => {
    reply.headers(headers(allowances.get(reply)));
  });
}
