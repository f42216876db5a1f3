// Which trial request this browser may follow and be signed into: the verified visitor's cookie.
// Set with the page that answers the correct code; it holds the request's id and its expiry, signed
// with a key derived from the master key (HMAC-SHA256), so every API process checks it and no
// server-side session is needed. HttpOnly (no script reads it), SameSite=Lax (no other site's form
// or fetch sends it), Secure behind https, and only for /saas/trial. A browser follows the last
// trial it verified. Whoever holds it can be taken into that trial's Odoo (as whoever holds an
// Odoo session cookie is inside), so it lives as long as an Odoo session does: VISITOR_DAYS.
import { createHmac, timingSafeEqual } from 'node:crypto';

const VISITOR_COOKIE = 'svc_trial_visitor';
export const VISITOR_DAYS = 7;

export function createTrialVisitor(key: Buffer, opts: { secureCookie: boolean; path: string }) {
  const mac = (requestId: number, expiry: number) => createHmac('sha256', key).update(`${requestId}.${expiry}`).digest('base64url');

  return {
    /** Set-Cookie value for the visitor of trial request `requestId`. */
    cookie(requestId: number, nowMs = Date.now()): string {
      const expiry = Math.floor(nowMs / 1000) + VISITOR_DAYS * 86_400;
      const value = `${requestId}.${expiry}.${mac(requestId, expiry)}`;
      return `${VISITOR_COOKIE}=${value}; Path=${opts.path}; Max-Age=${VISITOR_DAYS * 86_400}; HttpOnly; SameSite=Lax${opts.secureCookie ? '; Secure' : ''}`;
    },

    /** The trial request the cookie header's visitor cookie names, when its signature holds and it has not expired. */
    requestFrom(cookieHeader: string | undefined, nowMs = Date.now()): number | null {
      for (const part of (cookieHeader ?? '').split(';')) {
        const [name, ...rest] = part.trim().split('=');
        if (name !== VISITOR_COOKIE) continue;
        const match = /^(\d{1,10})\.(\d{1,12})\.([A-Za-z0-9_-]{43})$/.exec(rest.join('='));
        if (!match) return null;
        const [requestId, expiry] = [Number(match[1]), Number(match[2])];
        if (expiry < Math.floor(nowMs / 1000) || requestId < 1 || requestId > 2_147_483_647) return null;
        const given = Buffer.from(match[3]!);
        const expected = Buffer.from(mac(requestId, expiry));
        return given.length === expected.length && timingSafeEqual(given, expected) ? requestId : null;
      }
      return null;
    },
  };
}
