// Shared zod pieces for routes: ids, paging, list envelopes, timestamps, secret-field helpers.
import { z } from 'zod';

export const idParams = z.object({ id: z.coerce.number().int().positive() });
export type IdParams = z.infer<typeof idParams>;

export const listQuery = z.object({
  limit: z.coerce.number().int().min(1).max(200).default(50),
  offset: z.coerce.number().int().min(0).default(0),
});
export type ListQuery = z.infer<typeof listQuery>;

export function listOf<T extends z.ZodType>(item: T) {
  return z.object({ items: z.array(item), total: z.number().int(), limit: z.number().int(), offset: z.number().int() });
}

export const timestamp = z.string().describe('ISO 8601 date-time');
export const nullableTimestamp = timestamp.nullable();

export const jobAccepted = z.object({ job_id: z.string() });

/** `{ <field>_set: boolean }` for each write-only secret field of a resource. */
export function secretFlags<const F extends string>(fields: readonly F[]) {
  return z.object(Object.fromEntries(fields.map((f) => [`${f}_set`, z.boolean()]))) as z.ZodObject<
    Record<`${F}_set`, z.ZodBoolean>
  >;
}

export const errorBody = z.object({
  error: z.object({ code: z.string(), message: z.string(), details: z.unknown().optional() }),
});

/** A query-string boolean: "true"/"false"/"1"/"0". */
export const queryBoolean = z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1');
