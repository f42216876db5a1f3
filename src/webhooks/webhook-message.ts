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
// before COMMIT aborts it. BEGIN goes out with the statement (the endpoint's pool is in node-pg's
// pipeline mode): two round trips a batch, not three; COMMIT is sent once the statement answered.
// A COMMIT sent when the connection broke (its answer lost: a failover in that instant) is found
// out (commitOutcome): the statement answered the inserted rows' ids, their transaction's xid and
// its backend's pid, and once the database answers again on a fresh
// connection (within COMMIT_CHECK_MS) the batch ends the old backend if it still holds the
// transaction, then reads whether its rows are there: there → the batch succeeded; not there →
// the connection error (503, the caller's retry is then stored once); still unknown → the same
// 503 (docs/high-availability.md, "A call whose COMMIT's answer was lost").
import type pg from 'pg';
import { messageRow, type NewMessage } from '../core/chatter.js';
import { isDatabaseUnavailable } from '../core/db.js';
import type { ModelInfo } from '../core/models.js';
import { numberArray, textArray } from '../core/pg-arrays.js';
import { commitOutcome } from './commit-outcome.js';
import { createGroupCommit, type GroupCommitOptions } from './group-commit.js';

export interface MessageRow {
  /** The target record's table (from the model registry, never from input). */
  table: string;
  msg: NewMessage;
}

/** Batching of the message insert: see docs/decisions.md ("Group commit of webhook messages"). */
export const MESSAGE_BATCHING = { windowMs: 5, maxRows: 500, maxInFlight: 1, maxSize: 4_000_000 } as const;

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
  let batch: InsertedBatch | undefined;
  let commitSent = false;
  try {
    ({
      rows: [batch],
    } = await afterBegin(client, () =>
      client.query<InsertedBatch>({
        name: statementName(tables),
        text: `WITH m AS (
       SELECT * FROM unnest($1::int[], $2::text[], $3::int[], $4::text[], $5::"MessageType"[], $6::text[], $7::int[], $8::text[])
         WITH ORDINALITY AS m(t, model_name, rec_id, body, message_type, subtype_xmlid, author_id, author_name, n)
     ),
     ok AS MATERIALIZED (SELECT * FROM m WHERE CASE m.t ${exists} END),
     ins AS (
       INSERT INTO messages (model_name, rec_id, body, message_type, subtype_xmlid, author_id, author_name)
       SELECT model_name, rec_id, body, message_type, subtype_xmlid, author_id, author_name FROM ok ORDER BY n
       RETURNING id, created_at
     )
     SELECT coalesce((SELECT array_agg(n::int) FROM ok), '{}') AS ns,
       coalesce((SELECT array_agg(id) FROM ins), '{}') AS ids,
       (SELECT min(created_at) FROM ins)::text AS created_at,
       pg_backend_pid() AS pid,
       xid(pg_current_xact_id_if_assigned())::text AS xid`,
        values: [
          numberArray(rows.map((r) => tables.indexOf(r.table))),
          textArray(messages.map((m) => m.model_name)),
          numberArray(messages.map((m) => m.rec_id)),
          textArray(messages.map((m) => m.body)),
          textArray(messages.map((m) => m.message_type)),
          textArray(messages.map((m) => m.subtype_xmlid)),
          numberArray(messages.map((m) => m.author_id)),
          textArray(messages.map((m) => m.author_name)),
        ],
      }),
    ));
    commitSent = true;
    await client.query('COMMIT');
    client.off('error', ignore);
    client.release();
  } catch (err) {
    // The connection is closed, not given back (its listener stays: it may still report the
    // socket's end): the server aborts whatever it had not committed.
    client.release(err as Error);
    // Nothing inserted, nothing to find out; a COMMIT refused by a live server (an error answer,
    // no broken connection) is known not to have committed.
    if (!(commitSent && batch && batch.ids.length > 0 && isDatabaseUnavailable(err, { fromPg: true }))) throw err;
    const there = {
      text: 'SELECT EXISTS (SELECT 1 FROM messages WHERE id = ANY($1::int[]) AND created_at = $2::timestamp) AS there',
      values: [batch.ids, batch.created_at],
    };
    if ((await commitOutcome(pool.options, batch, there)) !== 'committed') throw err;
  }
  const done = new Set(batch!.ns);
  return rows.map((_, i) => done.has(i + 1));
}

/**
 * The batch's transaction is opened with its plan cache mode, so the statement is planned once per
 * connection. Left to choose, PostgreSQL planned it again for every batch (custom plans: small
 * batches make them look cheaper than the generic one): 0.4 ms of the server's CPU per batch,
 * where a whole batch of one row now takes 0.3 ms. The generic plan follows the tables'
 * statistics (an index probe per row on a large table, one hashed scan of a small one).
 */
const BEGIN = 'BEGIN; SET LOCAL plan_cache_mode = force_generic_plan';

/**
 * BEGIN, then `query()`'s statement. In pipeline mode (the endpoint's pool) both leave in one write
 * and are answered in one round trip: a write to PostgreSQL's socket took ~30 µs of CPU on the
 * 2-vCPU machine (CPU profile of batches alone), and the batch holds its connection one round trip
 * less.
 * Without it (a test's own pool), one after the other.
 */
async function afterBegin<R>(client: pg.PoolClient, query: () => Promise<R>): Promise<R> {
  if (!client.pipeline) {
    await client.query(BEGIN);
    return query();
  }
  const { stream } = client.connection;
  stream.cork();
  let begin: Promise<unknown>;
  let result: Promise<R>;
  try {
    begin = client.query(BEGIN);
    result = query();
  } finally {
    stream.uncork();
  }
  return (await Promise.all([begin, result]))[1];
}

/** What the batch's statement answered: which rows it inserted, and how to find them and their transaction again. */
interface InsertedBatch {
  /** The submitted rows inserted (1-based). */
  ns: number[];
  ids: number[];
  /** The rows' created_at (the transaction's start), as PostgreSQL writes it. */
  created_at: string;
  pid: number;
  xid: string;
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
