// Shared zod pieces for routes: ids, integers, paging, list envelopes, timestamps, secret-field
// helpers. Ids and integers are bounded to PostgreSQL's `integer` here, in one place, so a value
// the database cannot hold is a 400, never a database error.
import { z } from 'zod';
import { EXACT_TOTAL_LIMIT } from '../lists.js';
import { sortFieldsOf, type ModelInfo } from '../models.js';

export const INT32_MAX = 2_147_483_647;

/** A body integer that fits PostgreSQL's `integer`. */
export const int32 = z
  .number()
  .int()
  .min(-INT32_MAX - 1)
  .max(INT32_MAX);

/** A reference to a record in a body (`partner_id`, ...): a positive 32-bit integer. */
export const refId = z.number().int().min(1).max(INT32_MAX);

/**
 * An integer written plainly in a path or query string: digits only, so `0x1`, ` 1`, `1e0`, `+1`
 * and `1.0` are refused rather than read as 1. The document calls it what it is, an integer with
 * its bounds and an example the route accepts, so generators (Postman, client SDKs) send one; the
 * digits rule is a refinement, which JSON Schema does not show.
 */
export function queryInt(min: number, max: number, example = Math.max(min, Math.min(1, max))) {
  const digits = min < 0 ? /^-?(0|[1-9][0-9]{0,9})$/ : /^(0|[1-9][0-9]{0,9})$/;
  return z
    .string()
    .refine((v) => digits.test(v), 'must be an integer written with digits only')
    .transform(Number)
    .pipe(z.number().min(min, `must be at least ${min}`).max(max, `must be at most ${max}`))
    .meta({ type: 'integer', minimum: min, maximum: max, example });
}

/** A record id in a path or query string; the example is the first record of its kind. */
export const queryId = queryInt(1, INT32_MAX).describe('A record id (positive integer)');

export const idParams = z.object({ id: queryId });
/** The deepest `offset` a list takes: an offset page walks every row it skips; deeper pages go by cursor. */
const MAX_OFFSET = 10_000;

/** Paging of every list; a parameter a list does not know is refused (400 naming it). */
export const listQuery = z
  .object({
    limit: queryInt(1, 200, 50).default(50).describe('Page size, 1 to 200; default 50'),
    offset: queryInt(0, MAX_OFFSET, 0)
      .default(0)
      .describe(`Rows to skip, at most ${MAX_OFFSET.toLocaleString('en')}; default 0. Deeper pages: cursor`),
    cursor: z
      .string()
      .max(2000)
      .regex(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/, 'must be a next_cursor as a list answered it')
      .optional()
      .describe('Where the page starts: the next_cursor of the previous page, with the same sort (not with offset)'),
  })
  .strict();

/** `?sort=` over `fields`, each ascending or descending (a leading "-"). */
export function sortQuery(fields: readonly string[]) {
  const sort = [...fields, ...fields.map((f) => `-${f}`)] as [string, ...string[]];
  return z
    .enum(sort)
    .optional()
    .describe(`Order by ${fields.join(', ')}; a leading "-" for descending (e.g. -created_at)`);
}

/** `?q=`: a case-insensitive substring of any of `fields`. */
export function searchQuery(fields: readonly string[], minLength = 1) {
  return z
    .string()
    .trim()
    .min(minLength)
    .max(200)
    .optional()
    .describe(`Case-insensitive search in ${fields.join(', ')}`);
}

/** `?from=&to=` over a time field, as [from, to). */
export function timeRangeQuery(field: string) {
  return {
    from: isoInstant({ offset: true }).optional().describe(`Rows whose ${field} is at or after this time (ISO 8601)`),
    to: isoInstant({ offset: true }).optional().describe(`Rows whose ${field} is before this time (ISO 8601)`),
  };
}

/** The list query of a model's resource: paging, `sort`, `q` over its naming fields, `from`/`to` over its time field, and its exact filters. */
export function listQueryOf(model: ModelInfo | undefined, filters?: z.ZodObject) {
  let query = listQuery;
  if (model) {
    query = query.extend({
      sort: sortQuery(sortFieldsOf(model)),
      ...(model.search?.length ? { q: searchQuery(model.search) } : {}),
      ...(model.timeField ? timeRangeQuery(model.timeField) : {}),
    }) as unknown as typeof listQuery;
  }
  return filters ? query.extend(filters.shape) : query;
}

export function listOf<T extends z.ZodType>(item: T) {
  return z.object({
    items: z.array(item),
    total: z.number().int().describe("The rows the filters match: exact, or the planner's estimate when total_is_estimate"),
    total_is_estimate: z
      .boolean()
      .describe(`true when more than ${EXACT_TOTAL_LIMIT.toLocaleString('en')} rows match: total is then PostgreSQL's estimate`),
    limit: z.number().int(),
    offset: z.number().int(),
    next_cursor: z.string().nullable().describe('?cursor= of the next page (with the same sort and filters); null on the last page'),
  });
}

export const timestamp = z.string().describe('ISO 8601 date-time');

const FIRST_INSTANT = Date.parse('0001-01-01T00:00:00Z');
const AFTER_LAST_INSTANT = Date.UTC(10000, 0, 1);

/** An ISO 8601 date-time in input, within years 1 to 9999 (PostgreSQL refuses year 0 and ISO 8601 stops at 9999). */
export function isoInstant(opts: { offset?: boolean } = {}) {
  return z.iso.datetime(opts).refine((v) => {
    const t = Date.parse(v);
    return t >= FIRST_INSTANT && t < AFTER_LAST_INSTANT;
  }, 'must be between the years 1 and 9999');
}
export const nullableTimestamp = timestamp.nullable();

export const jobAccepted = z.object({ job_id: z.string() });

/** `{ <field>_set: boolean }` for each write-only secret field of a resource. */
export function secretFlags<const F extends string>(fields: readonly F[]) {
  return z.object(Object.fromEntries(fields.map((f) => [`${f}_set`, z.boolean()]))) as z.ZodObject<Record<`${F}_set`, z.ZodBoolean>>;
}

/**
 * The PATCH body of a resource from its create body: every field optional and no defaults, so
 * a field the request leaves out is left as it is (zod applies `.default()` even inside
 * `.partial()`, which would silently reset it). Its example changes the first field of the
 * create example (`example` to say otherwise).
 */
export function patchOf<S extends z.ZodRawShape>(create: z.ZodObject<S>, example?: Record<string, unknown>) {
  const shape = Object.fromEntries(
    Object.entries(create.shape).map(([key, field]) => {
      const inner = withoutDefault(field as z.ZodType);
      const description = (field as z.ZodType).description;
      // Described before it is made optional: a description on the optional wrapper of a union makes
      // the document lose the union's transformed branches.
      return [key, (description ? inner.describe(description) : inner).optional()];
    }),
  );
  const createExample = create.meta()?.example as Record<string, unknown> | undefined;
  const [first] = Object.entries(createExample ?? {});
  const patchExample = example ?? (first ? { [first[0]]: first[1] } : undefined);
  const patch = z.object(shape).strict();
  return (patchExample ? patch.meta({ example: patchExample }) : patch) as unknown as z.ZodObject<{
    [K in keyof S]: z.ZodOptional<z.ZodType<z.output<S[K]>, z.input<S[K]>>>;
  }>;
}

function withoutDefault(field: z.ZodType): z.ZodType {
  if (field instanceof z.ZodDefault || field instanceof z.ZodOptional) return withoutDefault(field.unwrap() as z.ZodType);
  return field;
}

export const errorBody = z.object({
  error: z.object({ code: z.string(), message: z.string(), details: z.unknown().optional() }),
});

/** A query-string boolean: "true"/"false"/"1"/"0". */
export const queryBoolean = z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1');
