// The inbound-webhook hot path's message insert, with group commit (group-commit.ts): concurrent
// calls that post a message without a trigger_action are written by one statement on the
// endpoint's own pg pool, one transaction per batch (a single statement commits as one):
//   INSERT INTO messages ... SELECT ... FROM unnest(<one array per column>) WHERE EXISTS (target row)
// Each row is inserted only when its target record exists; the statement answers which rows were
// inserted (the rows of `ok`, materialized once and inserted whole), so a call whose record is
// gone fails alone. The columns are those postMessage() (core/chatter.ts) writes for the same
// message. Rows are inserted in the order they were submitted.
// The statement runs inside BEGIN ... COMMIT, not on its own: a statement sent alone commits on the
// server even when its client is gone by then (a failover, a cut connection while it waited on a
// lock), so the call would have been answered 503 and stored. In a transaction, a connection lost
// before COMMIT aborts it; only a COMMIT whose answer was lost is left unknown (answered 503 too:
// docs/high-availability.md, "A call that may have been stored").
import type pg from 'pg';
import { messageRow, type NewMessage } from '../core/chatter.js';
import type { ModelInfo } from '../core/models.js';
import { createGroupCommit, type GroupCommitOptions } from './group-commit.js';

export interface MessageRow {
  /** The target record's table (from the model registry, never from input). */
  table: string;
  msg: NewMessage;
}

/** Batching of the message insert: see docs/decisions.md ("Group commit of webhook messages"). */
export const MESSAGE_BATCHING = { windowMs: 5, maxRows: 500, maxInFlight: 4, maxSize: 4_000_000 } as const;

const quoted = (table: string) => `"${table.replaceAll('"', '""')}"`;

/** A prepared statement per set of target tables (parsed and planned once per connection, not per batch); a few dozen at most. */
const statementNames = new Map<string, string>();
const MAX_PREPARED = 50;
function statementName(tables: string[]): string | undefined {
  const key = tables.join(' ');
  if (!statementNames.has(key) && statementNames.size < MAX_PREPARED)
    statementNames.set(key, `svc_webhook_messages_${statementNames.size + 1}`);
  return statementNames.get(key);
}

/** Inserts the rows whose target record exists, in one statement; true for each row inserted. */
export async function insertMessagesIfRecordsExist(pool: pg.Pool, rows: MessageRow[]): Promise<boolean[]> {
  if (rows.length === 0) return [];
  const tables = [...new Set(rows.map((r) => r.table))].sort();
  // The row postMessage() would write for each (core/chatter.ts): the same defaults.
  const messages = rows.map((r) => messageRow(r.msg));
  const exists = tables.map((t, i) => `WHEN ${i} THEN EXISTS (SELECT 1 FROM ${quoted(t)} r WHERE r.id = m.rec_id)`).join(' ');
  const client = await pool.connect();
  // A connection lost between two of the statements is an 'error' event on the checked-out
  // client (no query to fail): unheard, it would end the process. The next query fails instead.
  const ignore = () => {};
  client.on('error', ignore);
  let inserted: { n: number }[];
  try {
    await client.query('BEGIN');
    ({ rows: inserted } = await client.query<{ n: number }>({
      name: statementName(tables),
      text: `WITH m AS (
       SELECT * FROM unnest($1::int[], $2::text[], $3::int[], $4::text[], $5::"MessageType"[], $6::text[], $7::int[], $8::text[])
         WITH ORDINALITY AS m(t, model_name, rec_id, body, message_type, subtype_xmlid, author_id, author_name, n)
     ),
     ok AS MATERIALIZED (SELECT * FROM m WHERE CASE m.t ${exists} END),
     ins AS (
       INSERT INTO messages (model_name, rec_id, body, message_type, subtype_xmlid, author_id, author_name)
       SELECT model_name, rec_id, body, message_type, subtype_xmlid, author_id, author_name FROM ok ORDER BY n
     )
     SELECT n::int AS n FROM ok`,
      values: [
        rows.map((r) => tables.indexOf(r.table)),
        messages.map((m) => m.model_name),
        messages.map((m) => m.rec_id),
        messages.map((m) => m.body),
        messages.map((m) => m.message_type),
        messages.map((m) => m.subtype_xmlid),
        messages.map((m) => m.author_id),
        messages.map((m) => m.author_name),
      ],
    }));
    await client.query('COMMIT');
  } catch (err) {
    // The connection is closed, not given back (its listener stays: it may still report the
    // socket's end): the server aborts whatever it had not committed.
    client.release(err as Error);
    throw err;
  }
  client.off('error', ignore);
  client.release();
  const done = new Set(inserted.map((r) => r.n));
  return rows.map((_, i) => done.has(i + 1));
}

export type MessageWriter = ReturnType<typeof createMessageWriter>;

/** Posts messages through group commit; close() writes what waits and waits for every batch. */
export function createMessageWriter(
  pool: pg.Pool,
  batching: Omit<GroupCommitOptions<MessageRow, boolean>, 'write' | 'sizeOf'> = MESSAGE_BATCHING,
) {
  const batches = createGroupCommit<MessageRow, boolean>({
    ...batching,
    sizeOf: (row) => row.msg.body.length, // characters: a statement of at most a few MB
    write: (rows) => insertMessagesIfRecordsExist(pool, rows),
  });
  return {
    /** Posts the message when the record exists (after its batch committed); false when it does not. */
    post: (model: ModelInfo, msg: NewMessage) => batches.submit({ table: model.table, msg }),
    close: batches.close,
  };
}
