// Security headers for the server-rendered public pages: no scripts at all, the one inline style
// block of the layout allowed by its hash, forms posting only to this site, no framing.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { FastifyInstance } from 'fastify';

/** CSP hash sources of every inline <style> block of a template. */
function styleHashes(template: string): string[] {
  return [...template.matchAll(/<style>([\s\S]*?)<\/style>/g)].map(
    (m) => `'sha256-${createHash('sha256').update(m[1]!).digest('base64')}'`,
  );
}

function pageSecurityHeaders(layoutFile: string): Record<string, string> {
  const styles = styleHashes(readFileSync(layoutFile, 'utf8'));
  return {
    'content-security-policy': [
      "default-src 'none'",
      `style-src ${styles.join(' ') || "'none'"}`,
      "img-src 'self'",
      "form-action 'self'",
      "frame-ancestors 'none'",
      "base-uri 'none'",
    ].join('; '),
    'x-frame-options': 'DENY',
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'same-origin',
  };
}

/** Adds the headers to every answer of this scope (pages, error pages, redirects). */
export function registerPageSecurityHeaders(scope: FastifyInstance, layoutFile: string) {
  const headers = pageSecurityHeaders(layoutFile);
  scope.addHook('onSend', async (_req, reply) => {
    reply.headers(headers);
  });
}
