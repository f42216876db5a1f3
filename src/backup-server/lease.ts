// The lease a backup, a restore or a verify holds while it runs: renewed every LEASE_MS / 4 by the
// process running it; once it has run out, the work is taken as interrupted (its process died) by
// the next sweep of any process of the backup server.
import type { Logger } from 'pino';

export const LEASE_MS = 2 * 60_000;
export const INTERRUPTED = 'interrupted: the backup server stopped while it ran';

/** When a lease taken or renewed now runs out. */
export const leaseUntil = () => new Date(Date.now() + LEASE_MS);

/** Runs `work`, renewing its lease meanwhile (`renew`; a failed renewal is logged as `what`). */
export async function whileLeased<T>(log: Logger, what: string, renew: () => Promise<unknown>, work: () => Promise<T>): Promise<T> {
  const timer = setInterval(() => {
    renew().catch((err) => log.warn({ err }, `renewing the lease of ${what} failed`));
  }, LEASE_MS / 4);
  try {
    return await work();
  } finally {
    clearInterval(timer);
  }
}
