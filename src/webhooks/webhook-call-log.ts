// The per-webhook call log, written in batches: calls are buffered in memory and inserted every
// 100 ms (or every 500 calls) with one multi-row INSERT, so a call costs no database round trip
// of its own for logging. The buffer is flushed when the app closes and before the process's own
// reads of the log; a crash can lose at most the last ~100 ms of log lines (never a message, which
// is committed before the call is answered). Rows of webhooks deleted meanwhile are skipped; ids
// follow the order of the calls. The columns go as array literals (core/pg-arrays.ts), called_at as
// milliseconds since the epoch.
import type pg from 'pg';
import type { Logger } from 'pino';
import { numberArray, textArray } from '../core/pg-arrays.js';

export interface WebhookCallRow {
  webhook_id: number;
  /** Milliseconds since the epoch (Date.now()). */
  called_at: number;
  status: number;
  duration_ms: number;
  source_ip: string;
  body_size: number;
  error: string | null;
}

const FLUSH_MS = 100;
const FLUSH_ROWS = 500;
/** Kept for a retry when a flush fails; beyond this, lines are dropped (and that is logged). */
const MAX_BUFFER = 20_000;

export type WebhookCallLog = ReturnType<typeof createWebhookCallLog>;

export function createWebhookCallLog(pool: pg.Pool, log: Logger) {
  let buffer: WebhookCallRow[] = [];
  let running: Promise<void> = Promise.resolve();

  async function write(rows: WebhookCallRow[]) {
    try {
      await pool.query(
        `INSERT INTO webhook_calls (webhook_id, called_at, status, duration_ms, source_ip, body_size, error)
         SELECT c.webhook_id, timestamptz 'epoch' + c.called_at * interval '1 millisecond', c.status, c.duration_ms, c.source_ip,
           c.body_size, c.error
         FROM unnest($1::int[], $2::float8[], $3::int[], $4::float8[], $5::text[], $6::int[], $7::text[])
           WITH ORDINALITY AS c(webhook_id, called_at, status, duration_ms, source_ip, body_size, error, n)
         WHERE EXISTS (SELECT 1 FROM webhooks w WHERE w.id = c.webhook_id)
         ORDER BY c.n`,
        [
          numberArray(rows.map((r) => r.webhook_id)),
          numberArray(rows.map((r) => r.called_at)),
          numberArray(rows.map((r) => r.status)),
          numberArray(rows.map((r) => r.duration_ms)),
          textArray(rows.map((r) => r.source_ip)),
          numberArray(rows.map((r) => r.body_size)),
          textArray(rows.map((r) => r.error)),
        ],
      );
    } catch (err) {
      if (buffer.length + rows.length <= MAX_BUFFER) {
        buffer = rows.concat(buffer);
        log.error({ err, lines: rows.length }, 'webhook call log write failed; will retry');
      } else {
        log.error({ err, lines: rows.length }, 'webhook call log write failed; lines dropped');
      }
    }
  }

  /** Writes what is buffered; concurrent flushes run one after the other. */
  function flush(): Promise<void> {
    running = running.then(async () => {
      if (buffer.length === 0) return;
      const rows = buffer;
      buffer = [];
      await write(rows);
    });
    return running;
  }

  const timer = setInterval(() => void flush(), FLUSH_MS);
  timer.unref();

  return {
    add(row: WebhookCallRow) {
      buffer.push(row);
      if (buffer.length >= FLUSH_ROWS) void flush();
    },
    flush,
    async close() {
      clearInterval(timer);
      await flush();
    },
  };
}
