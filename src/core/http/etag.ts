// ETags of single records and If-Match on their writes. The ETag is a hash of the record as the API
// answers it (the answer schema's JSON), so any change a reader could see changes it, whoever made
// it (a PATCH, an action, a job). A write with a stale If-Match is refused with 412 and changes
// nothing: ifMatchOf() makes the condition, which the write checks for the row version it locks
// (conditionalWrite() in src/core/records.ts), so two writes with one ETag cannot both pass.
import { createHash } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { PreconditionFailedError } from '../errors.js';
import type { Precondition } from '../conditional-write.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The answer carries the record's ETag (the document says so). */
    etag?: boolean;
  }
}

/** The If-Match header of a conditional write (the answer keeps every other header). */
export const ifMatchHeaders = z
  .object({
    'if-match': z
      .string()
      .optional()
      .describe('The ETag of the record as you read it: the write is refused (412) if the record changed since; * for any version')
      .meta({ example: '*' }),
  })
  .loose();

/** The strong ETag of `data` as `schema` answers it. */
function etagOf(schema: z.ZodType, data: unknown): string {
  const json = JSON.stringify(z.encode(schema, data));
  return `"${createHash('sha256').update(json).digest('base64url').slice(0, 27)}"`;
}

/** Sets the ETag of a one-record answer and gives the record back. */
export function withEtag<T>(reply: FastifyReply, schema: z.ZodType, data: T): T {
  reply.header('etag', etagOf(schema, data));
  return data;
}

/**
 * Refuses the write (412 precondition_failed) when the request has an If-Match that names none of
 * the record's present ETag, or `*`. `current` reads the record, only when the header is there.
 */
async function checkIfMatch(req: FastifyRequest, schema: z.ZodType, current: () => Promise<unknown>): Promise<void> {
  const header = req.headers['if-match'];
  if (header === undefined) return;
  const wanted = header.split(',').map((tag) => tag.trim());
  const record = await current();
  // Strong comparison (RFC 9110): a weak tag W/"…" never matches.
  if (wanted.includes('*') || wanted.includes(etagOf(schema, record))) return;
  throw new PreconditionFailedError();
}

/** The request's If-Match as the precondition of a write (undefined without the header): see checkIfMatch. */
export function ifMatchOf(req: FastifyRequest, schema: z.ZodType, current: () => Promise<unknown>): Precondition | undefined {
  return req.headers['if-match'] === undefined ? undefined : () => checkIfMatch(req, schema, current);
}
