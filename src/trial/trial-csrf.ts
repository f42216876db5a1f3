// CSRF protection of the public trial forms without server-side sessions, so it works across
// any number of API processes: a signed double-submit token.
// - The browser holds a random nonce in an HttpOnly, SameSite=Lax cookie (set on the first page).
// - Each rendered form carries `<expiry>.<HMAC-SHA256(key, nonce "." expiry)>` in a hidden field.
// - A POST is accepted only when the field's MAC matches the cookie's nonce and has not expired.
// A cross-site page can make the browser send the cookie but cannot read it, so it cannot produce
// a matching token; a token taken from the attacker's own visit is bound to another nonce. The key
// is derived from the master key file with HKDF, which every process shares.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

const CSRF_COOKIE = 'svc_trial_csrf';
export const CSRF_FIELD = '_csrf';
const TOKEN_TTL_SECONDS = 2 * 3600;
const NONCE = /^[A-Za-z0-9_-]{43}$/;

export function createTrialCsrf(key: Buffer, opts: { secureCookie: boolean; path: string }) {
  const mac = (nonce: string, expiry: number) => createHmac('sha256', key).update(`${nonce}.${expiry}`).digest();

  return {
    /** The nonce in the request's cookie header, or null. */
    nonceFrom(cookieHeader: string | undefined): string | null {
      for (const part of (cookieHeader ?? '').split(';')) {
        const [name, ...rest] = part.trim().split('=');
        if (name === CSRF_COOKIE) {
          const value = rest.join('=');
          return NONCE.test(value) ? value : null;
        }
      }
      return null;
    },

    newNonce(): string {
      return randomBytes(32).toString('base64url');
    },

    /** Set-Cookie value; a session cookie, the token's expiry bounds its use. */
    cookie(nonce: string): string {
      return `${CSRF_COOKIE}=${nonce}; Path=${opts.path}; HttpOnly; SameSite=Lax${opts.secureCookie ? '; Secure' : ''}`;
    },

    /** The hidden-field value for forms rendered for this nonce. */
    issue(nonce: string, nowMs = Date.now()): string {
      const expiry = Math.floor(nowMs / 1000) + TOKEN_TTL_SECONDS;
      return `${expiry}.${mac(nonce, expiry).toString('base64url')}`;
    },

    /** True when `token` was issued for `nonce` and has not expired. */
    check(nonce: string | null, token: unknown, nowMs = Date.now()): boolean {
      if (!nonce || typeof token !== 'string') return false;
      const match = /^(\d{1,12})\.([A-Za-z0-9_-]{43})$/.exec(token);
      if (!match) return false;
      const expiry = Number(match[1]);
      if (expiry < Math.floor(nowMs / 1000)) return false;
      // Compared as text: base64 decoding would accept non-canonical variants of the same MAC.
      const given = Buffer.from(match[2]!);
      const expected = Buffer.from(mac(nonce, expiry).toString('base64url'));
      return given.length === expected.length && timingSafeEqual(given, expected);
    },
  };
}
