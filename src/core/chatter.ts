// The one way to write to a record's discussion thread (spec: mail module): messages and the
// tracking of field changes. Reading threads and activities is the chatter feature's.
import type { Db, DbTx } from './db.js';
import type { ModelName } from './models.js';
import type { MessageType } from '../generated/prisma/enums.js';

export { MessageType } from '../generated/prisma/enums.js';

export const SUBTYPES = ['mail.mt_note', 'mail.mt_comment', 'mail.mt_file', 'mail.mt_alert', 'mail.mt_audit'] as const;
export type Subtype = (typeof SUBTYPES)[number];

export interface RecordRef {
  model_name: ModelName;
  rec_id: number;
}

/** Who did something: a user, or the service itself acting for someone (`id` null). */
export interface Author {
  id: number | null;
  name: string;
}

export interface NewMessage extends RecordRef {
  body: string;
  message_type?: MessageType;
  subtype_xmlid?: Subtype;
  author?: Author | null;
}

/** How a tracked value is stored (text) and read back (its type): see trackedValue(). */
type ValueType = 'text' | 'boolean' | 'number' | 'date' | 'json';

function display(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  if (value instanceof Date) return value.toISOString();
  return typeof value === 'object' ? JSON.stringify(value) : String(value);
}

function typeOf(before: unknown, after: unknown): ValueType {
  const value = after ?? before;
  if (value instanceof Date) return 'date';
  if (typeof value === 'boolean') return 'boolean';
  if (typeof value === 'number' || typeof value === 'bigint') return 'number';
  return value !== null && typeof value === 'object' ? 'json' : 'text';
}

/** A stored tracking value as the API answers it: a boolean as a boolean, a number as a number. */
export function trackedValue(text: string | null, type: string): unknown {
  if (text === null) return null;
  if (type === 'boolean') return text === 'true';
  if (type === 'number') return Number(text);
  if (type === 'json') return JSON.parse(text);
  return text;
}

/** A message as its row is written: the defaults applied, the author flattened. */
export function messageRow(msg: NewMessage) {
  return {
    model_name: msg.model_name,
    rec_id: msg.rec_id,
    body: msg.body,
    message_type: msg.message_type ?? 'comment',
    subtype_xmlid: msg.subtype_xmlid ?? 'mail.mt_note',
    author_id: msg.author?.id ?? null,
    author_name: msg.author?.name ?? null,
  };
}

/** Posts a message on a record's thread. `tx` lets callers make it part of a larger unit. */
export function postMessage(tx: DbTx | Db, msg: NewMessage) {
  return tx.message.create({ data: messageRow(msg) });
}

/** Posts unless the record's latest message says the same: a failure met by every periodic run is said once. */
export async function postMessageOnce(db: Db, msg: NewMessage) {
  const latest = await db.message.findFirst({
    where: { model_name: msg.model_name, rec_id: msg.rec_id },
    orderBy: { id: 'desc' },
    select: { body: true },
  });
  if (latest?.body !== msg.body) await postMessage(db, msg);
}

/** A message and its tracking values, as postMessages writes them. */
export interface MessageToPost {
  row: ReturnType<typeof messageRow>;
  tracking: { field: string; old_value: string | null; new_value: string | null; value_type: ValueType }[];
}

/**
 * The tracking message of the changes of tracked fields between two versions of a record (spec:
 * fields marked (T)), not yet written; null when no tracked field changed.
 */
export function trackingOf<T extends Record<string, unknown>>(
  ref: RecordRef,
  fields: readonly (keyof T & string)[],
  before: Partial<T> | null,
  after: Partial<T>,
  author: Author | null = null,
): MessageToPost | null {
  const tracking = fields
    .map((field) => ({
      field,
      old_value: display(before?.[field]),
      new_value: display(after[field]),
      value_type: typeOf(before?.[field], after[field]),
    }))
    .filter((c) => c.old_value !== c.new_value);
  if (tracking.length === 0) return null;
  const row = messageRow({ ...ref, body: before ? '' : 'Record created', message_type: 'tracking', author });
  return { row, tracking };
}

/** Records the changes of tracked fields between two versions of a record as one tracking message. */
export async function trackChanges<T extends Record<string, unknown>>(
  tx: DbTx | Db,
  ref: RecordRef,
  fields: readonly (keyof T & string)[],
  before: Partial<T> | null,
  after: Partial<T>,
  author: Author | null = null,
) {
  const message = trackingOf(ref, fields, before, after, author);
  if (!message) return null;
  return tx.message.create({ data: { ...message.row, tracking_values: { create: message.tracking } } });
}

/**
 * Writes messages (in this order) and their tracking values in two statements, whatever their
 * number: for a transaction that must stay short (every statement is a round trip that waits for
 * the event loop while the transaction holds its connection and its locks).
 */
export async function postMessages(tx: DbTx | Db, messages: readonly (MessageToPost | null)[]) {
  const list = messages.filter((m): m is MessageToPost => m !== null);
  if (list.length === 0) return;
  // One multi-row INSERT: PostgreSQL gives the serial ids in the order of the rows.
  const rows = await tx.message.createManyAndReturn({ data: list.map((m) => m.row), select: { id: true } });
  const ids = rows.map((r) => r.id).sort((a, b) => a - b);
  const tracking = list.flatMap((m, i) => m.tracking.map((t) => ({ ...t, message_id: ids[i]! })));
  if (tracking.length > 0) await tx.trackingValue.createMany({ data: tracking });
}

/** The author of work done for a user (a job carries only the user id); null for the service itself. */
export async function authorOfUser(db: Db | DbTx, userId: number | null): Promise<Author | null> {
  if (userId === null) return null;
  const user = await db.user.findUnique({ where: { id: userId }, select: { email: true } });
  return { id: userId, name: user?.email ?? `user ${userId}` };
}
