// Who may scrape: the bearer token of any active user (Prometheus' `authorization` setting). A
// scrape must answer while PostgreSQL is down, and the token is checked there: a token that
// PostgreSQL confirmed within TRUST_MS is still accepted while it does not answer (Prometheus
// scrapes every 15 to 60 s, so its token is known); one it refuses is forgotten at once.
import type { AppContext } from '../context.js';
import { UnauthenticatedError } from '../core/errors.js';
import { noAnswer, withTimeout } from '../core/timeout.js';
import { hashApiToken, createAuthService } from '../auth/index.js';

const TRUST_MS = 15 * 60_000;
const CHECK_TIMEOUT_MS = 1_000;

export function createScrapeAuth(ctx: Pick<AppContext, 'db'>) {
  const { authenticate } = createAuthService(ctx);
  /** Token hash → when PostgreSQL last confirmed it (only tokens it confirmed: as many as there are real ones). */
  const confirmed = new Map<string, number>();

  return async function checkScraper(authorization: string | undefined): Promise<void> {
    const token = /^Bearer\s+(\S+)$/i.exec(authorization ?? '')?.[1];
    if (!token) throw new UnauthenticatedError();
    const key = hashApiToken(token);
    try {
      await withTimeout(authenticate(token), CHECK_TIMEOUT_MS, noAnswer('PostgreSQL', CHECK_TIMEOUT_MS));
      confirmed.set(key, Date.now());
    } catch (err) {
      if (err instanceof UnauthenticatedError) {
        confirmed.delete(key);
        throw err;
      }
      const at = confirmed.get(key);
      if (at !== undefined && Date.now() - at < TRUST_MS) return;
      throw new UnauthenticatedError('The token cannot be checked now: PostgreSQL does not answer');
    }
  };
}
