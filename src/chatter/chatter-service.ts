// The one way to write to a record's discussion thread: messages, tracking values, activities.
import type pg from 'pg';
import type { Db, DbTx } from '../core/db.js';
import { isModelName, MODELS } from '../core/models.js';
import type { MessageType } from '../generated/prisma/enums.js';

export const SUBTYPES = ['mail.mt_note', 'mail.mt_comment', 'mail.mt_file', 'mail.mt_alert', 'mail.mt_audit'] as const;
export type Subtype = (typeof SUBTYPES)[number];
export const MESSAGE_TYPES = [
  'email',
  'comment',
  'notification',
  'whatsapp',
  'sms',
  'auto_comment',
  'tracking',
  'activity',
] as const satisfies readonly MessageType[];

export interface RecordRef {
  model_name: string;
  rec_id: number;
}

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

function display(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  if (value instanceof Date) return value.toISOString();
  return typeof value === 'object' ? JSON.stringify(value) : String(value);
}

/** Posts a message on a record's thread. `tx` lets callers make it part of a larger unit. */
export function postMessage(tx: DbTx | Db, msg: NewMessage) {
  return tx.message.create({
    data: {
      model_name: msg.model_name,
      rec_id: msg.rec_id,
      body: msg.body,
      message_type: msg.message_type ?? 'comment',
      subtype_xmlid: msg.subtype_xmlid ?? 'mail.mt_note',
      author_id: msg.author?.id ?? null,
      author_name: msg.author?.name ?? null,
    },
  });
}

/**
 * postMessage for the inbound-webhook hot path: one statement on a plain pg pool, inserting only
 * when the target record exists (atomic, no transaction needed), at about three times Prisma's
 * throughput. Returns false when the record does not exist.
 */
export async function postMessageIfRecordExists(pool: pg.Pool, msg: NewMessage): Promise<boolean> {
  if (!isModelName(msg.model_name)) return false;
  const posted = await pool.query(
    `INSERT INTO messages (model_name, rec_id, body, message_type, subtype_xmlid, author_id, author_name)
     SELECT $1, $2, $3, $4::"MessageType", $5, $6, $7 WHERE EXISTS (SELECT 1 FROM "${MODELS[msg.model_name].table}" WHERE id = $2)`,
    [
      msg.model_name,
      msg.rec_id,
      msg.body,
      msg.message_type ?? 'comment',
      msg.subtype_xmlid ?? 'mail.mt_note',
      msg.author?.id ?? null,
      msg.author?.name ?? null,
    ],
  );
  return posted.rowCount === 1;
}

/**
 * Records the changes of tracked fields between two versions of a record as one tracking
 * message (spec: fields marked (T)). Returns null when no tracked field changed.
 */
export async function trackChanges<T extends Record<string, unknown>>(
  tx: DbTx | Db,
  ref: RecordRef,
  fields: readonly (keyof T & string)[],
  before: Partial<T> | null,
  after: Partial<T>,
  author: Author | null = null,
) {
  const changes = fields
    .map((field) => ({ field, old_value: display(before?.[field]), new_value: display(after[field]) }))
    .filter((c) => c.old_value !== c.new_value);
  if (changes.length === 0) return null;
  return tx.message.create({
    data: {
      ...ref,
      body: before ? '' : 'Record created',
      message_type: 'tracking',
      subtype_xmlid: 'mail.mt_note',
      author_id: author?.id ?? null,
      author_name: author?.name ?? null,
      tracking_values: { create: changes },
    },
  });
}

export function listMessages(db: Db, ref: RecordRef, page: { limit: number; offset: number }) {
  const where = { model_name: ref.model_name, rec_id: ref.rec_id };
  return Promise.all([
    db.message.findMany({
      where,
      orderBy: { id: 'desc' },
      take: page.limit,
      skip: page.offset,
      include: { tracking_values: { orderBy: { id: 'asc' } } },
    }),
    db.message.count({ where }),
  ]);
}

export function scheduleActivity(
  tx: DbTx | Db,
  ref: RecordRef,
  activity: { summary: string; note?: string; due_date?: Date | null; user_id?: number | null },
) {
  return tx.activity.create({ data: { ...ref, ...activity } });
}

/** The chatter author for work done on behalf of a user (jobs carry only the user id). */
export async function authorOfUser(db: Db, userId: number | null): Promise<Author | null> {
  if (userId === null) return null;
  const user = await db.user.findUnique({ where: { id: userId }, select: { email: true } });
  return { id: userId, name: user?.email ?? `user ${userId}` };
}
