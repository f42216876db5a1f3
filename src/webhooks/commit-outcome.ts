// Whether a transaction whose COMMIT was sent when its connection broke committed (the answer lost:
// a failover in that instant). Used by both ways a webhook call is stored: a message batch
// (webhook-message.ts) and a trigger_action's transaction (webhook-call-service.ts). Each knows,
// before sending COMMIT, the server process and transaction id that hold it, and a row only that
// transaction wrote (its settlement record); this reads whether that row is there, once nothing
// can commit it any more. See docs/high-availability.md, "A call whose COMMIT's answer was lost".
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';

/** How long a call whose COMMIT's answer was lost waits at most to find out whether it committed. */
export const COMMIT_CHECK_MS = 5_000;
const CHECK_TIMEOUT_MS = 1_000;
const CHECK_PAUSE_MS = 200;

/** The transaction that was committing: its server process and id (both from inside it). */
export interface HeldTransaction {
  pid: number;
  xid: string;
}

/**
 * Whether the transaction committed, read on fresh connections until the database answers (a
 * primary: a standby may not have replayed it yet) or COMMIT_CHECK_MS have passed ('unknown'). The
 * old backend may still hold the transaction (the COMMIT unread in its socket, or being written):
 * it is ended first, so what is read is final (ended before its commit record, the transaction
 * aborts; after, it is committed). It is found by pid and xid together, so another backend is
 * never ended; after a failover it is not there. `there` answers one row with a boolean `there`:
 * whether the transaction's own row exists (matched so that a row a promoted replica wrote in its
 * place is not taken for it).
 */
export async function commitOutcome(
  config: pg.ClientConfig,
  held: HeldTransaction,
  there: { text: string; values: unknown[] },
  boundMs = COMMIT_CHECK_MS,
): Promise<'committed' | 'absent' | 'unknown'> {
  const deadline = Date.now() + boundMs;
  while (Date.now() < deadline) {
    const client = new pg.Client({
      ...config,
      pipeline: false, // one query at a time, as written below (the pool's options may ask for it)
      connectionTimeoutMillis: CHECK_TIMEOUT_MS,
      query_timeout: CHECK_TIMEOUT_MS,
      statement_timeout: CHECK_TIMEOUT_MS,
    });
    client.on('error', () => {});
    try {
      await client.connect();
      const { rows: ending } = await client.query(
        `SELECT pg_terminate_backend(pid, ${CHECK_TIMEOUT_MS / 2}) FROM pg_stat_activity WHERE pid = $1 AND backend_xid = $2::xid`,
        [held.pid, held.xid],
      );
      if (ending.length > 0) continue; // ended, or ending: looked at again
      const {
        rows: [primary],
      } = await client.query<{ primary: boolean }>('SELECT NOT pg_is_in_recovery() AS primary');
      if (primary!.primary) {
        const {
          rows: [seen],
        } = await client.query<{ there: boolean }>(there.text, there.values);
        return seen!.there ? 'committed' : 'absent';
      }
    } catch {
      // Not answering yet: tried again after a pause.
    } finally {
      // Closing a connection the work is done with: a close that fails leaves nothing open (the server ends the session with its socket).
      await client.end().catch(() => {});
    }
    await sleep(Math.min(CHECK_PAUSE_MS, Math.max(0, deadline - Date.now())));
  }
  return 'unknown';
}
