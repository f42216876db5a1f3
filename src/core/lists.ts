// What keeps lists fast as tables grow, below listPage() (src/core/records.ts) and the raw-SQL lists:
// - cursors: `next_cursor` holds the sort value and the id of a page's last row, so the next page
//   starts right after them with an index range scan, however deep (an offset walks every row it
//   skips). A cursor names its list and sort and carries an HMAC under a key derived from the
//   master key, so one that was edited, cut, crafted, or made for another list or sort is refused
//   (400 naming `cursor`). It is not a secret and grants nothing: its values are type-checked and
//   bound as parameters like any filter;
// - totals: exact while at most EXACT_TOTAL_LIMIT rows match (a count that stops there), beyond
//   that PostgreSQL's planner estimate, and the answer says so (`total_is_estimate`); a list the
//   planner expects to be far bigger is not counted at all.
import { createHmac, timingSafeEqual as cryptoEqual } from 'node:crypto';
import type { SecretBox } from './crypto.js';
import { type Db, Prisma } from './db.js';
import { ValidationError } from './errors.js';

/** Matching rows counted exactly up to this many; beyond, the total is the planner's estimate. */
export const EXACT_TOTAL_LIMIT = 10_000;

/** A page as asked: `cursor` (a previous page's next_cursor) or `offset`, not both. */
export interface Page {
  limit: number;
  offset: number;
  cursor?: string;
}

/** The answer of every list. */
export interface ListAnswer<V> {
  items: V[];
  total: number;
  total_is_estimate: boolean;
  limit: number;
  offset: number;
  next_cursor: string | null;
}

/** What a cursor belongs to: one list (e.g. `action-logs`) in one order (e.g. `-created_at`). */
export interface CursorKey {
  resource: string;
  sort: string;
}

/** How a cursor value is read back: the type of the column it comes from. */
export type ColumnType = 'timestamp' | 'int' | 'bigint' | 'number' | 'text' | 'boolean' | { enum: readonly string[] };

export interface Column {
  type: ColumnType;
  nullable: boolean;
}

const cursorError = (why: string) => new ValidationError(`cursor: ${why}`, [{ field: 'querystring.cursor', message: why }]);

/** A 400 naming `offset` when a page asks for both a cursor and an offset. */
export function assertOnePosition(page: Page): void {
  if (page.cursor && page.offset > 0) {
    const why = 'cannot be combined with cursor (a cursor already says where the page starts)';
    throw new ValidationError(`offset: ${why}`, [{ field: 'querystring.offset', message: why }]);
  }
}

const secrets = new WeakMap<Pick<SecretBox, 'deriveKey'>, Buffer>();

/**
 * The key of the cursors' HMAC: derived from the master key, so every process of one installation
 * (the same master key file) reads the cursors any of them made, and another master key refuses them.
 */
export function cursorSecret(secretBox: Pick<SecretBox, 'deriveKey'>): Buffer {
  let secret = secrets.get(secretBox);
  if (!secret) {
    secret = secretBox.deriveKey('list-cursor');
    secrets.set(secretBox, secret);
  }
  return secret;
}

/** 128 bits of HMAC-SHA256: a cursor cannot be made without the key. */
function digest(secret: Buffer, json: string): string {
  return createHmac('sha256', secret).update(json).digest('base64url').slice(0, 22);
}

/** The cursor of the row whose sort value and id are `values` ([id] when the sort is by id), signed with `secret` (cursorSecret). */
export function encodeCursor(secret: Buffer, key: CursorKey, values: readonly unknown[]): string {
  const plain = values.map((v) => (v instanceof Date ? v.toISOString() : typeof v === 'bigint' ? v.toString() : v));
  const json = JSON.stringify([key.resource, key.sort, ...plain]);
  return `${Buffer.from(json).toString('base64url')}.${digest(secret, json)}`;
}

/** Compares two digests in constant time. */
function timingSafeEqual(a: string, b: string): boolean {
  return a.length === b.length && cryptoEqual(Buffer.from(a), Buffer.from(b));
}

/** The values of a cursor made by encodeCursor for `key` with `secret`, typed by `columns`; otherwise a 400 naming `cursor`. */
export function decodeCursor(secret: Buffer, token: string, key: CursorKey, columns: readonly Column[]): unknown[] {
  const [body = '', sum, ...rest] = token.split('.');
  const json = Buffer.from(body, 'base64url').toString('utf8');
  if (!sum || rest.length > 0 || !timingSafeEqual(digest(secret, json), sum)) {
    throw cursorError(
      'is not a next_cursor of this service as it was answered (changed, cut, or made before its master key changed): start again from the first page',
    );
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(json);
  } catch {
    parsed = null;
  }
  if (!Array.isArray(parsed)) throw cursorError('does not fit this list');
  if (parsed[0] !== key.resource || parsed[1] !== key.sort) {
    throw cursorError(`belongs to another list or sort; this list is ${key.resource} sorted by ${key.sort}`);
  }
  const values = parsed.slice(2);
  if (values.length !== columns.length) throw cursorError('does not fit this list');
  return values.map((value, i) => {
    const read = readValue(value, columns[i]!);
    if (read === undefined) throw cursorError('does not fit this list');
    return read;
  });
}

/** A cursor value as the column holds it, or undefined when it cannot be one. */
function readValue(v: unknown, column: Column): unknown {
  if (v === null) return column.nullable ? null : undefined;
  const { type } = column;
  if (typeof type === 'object') return typeof v === 'string' && type.enum.includes(v) ? v : undefined;
  switch (type) {
    case 'timestamp': {
      const date = typeof v === 'string' ? new Date(v) : null;
      return date && !Number.isNaN(date.getTime()) ? date : undefined;
    }
    case 'int':
      return Number.isSafeInteger(v) ? v : undefined;
    case 'bigint':
      return typeof v === 'string' && /^-?\d{1,19}$/.test(v) ? BigInt(v) : undefined;
    case 'number':
      return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
    case 'boolean':
      return typeof v === 'boolean' ? v : undefined;
    default:
      return typeof v === 'string' ? v : undefined;
  }
}

const catalog = new Map<string, Promise<Map<string, Column>>>();

/** The columns of a table as cursors read them, looked up once per process. */
export function columnsOf(db: Db, table: string): Promise<Map<string, Column>> {
  let found = catalog.get(table);
  if (!found) {
    found = readColumns(db, table);
    catalog.set(table, found);
    found.catch(() => catalog.delete(table));
  }
  return found;
}

async function readColumns(db: Db, table: string): Promise<Map<string, Column>> {
  const rows = await db.$queryRaw<{ name: string; type: string; not_null: boolean; labels: string[] | null }[]>`
    SELECT a.attname::text AS name, t.typname::text AS type, a.attnotnull AS not_null,
      CASE WHEN t.typtype = 'e' THEN ARRAY(SELECT e.enumlabel::text FROM pg_enum e WHERE e.enumtypid = t.oid ORDER BY e.enumsortorder) END AS labels
    FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
    WHERE a.attrelid = to_regclass(${table}) AND a.attnum > 0 AND NOT a.attisdropped`;
  if (rows.length === 0) throw new Error(`No table ${table}`);
  const typeOf = (r: (typeof rows)[number]): ColumnType => {
    if (r.labels) return { enum: r.labels };
    if (r.type.startsWith('timestamp') || r.type === 'date') return 'timestamp';
    if (r.type === 'int2' || r.type === 'int4') return 'int';
    if (r.type === 'int8') return 'bigint';
    if (r.type.startsWith('float') || r.type === 'numeric') return 'number';
    return r.type === 'bool' ? 'boolean' : 'text';
  };
  return new Map(rows.map((r) => [r.name, { type: typeOf(r), nullable: !r.not_null }]));
}

/**
 * The total of a list. The planner's estimate comes first: beyond twice EXACT_TOTAL_LIMIT it is
 * the answer (counting even EXACT_TOTAL_LIMIT rows of a filter that matches 2 % of a big table
 * reads half a million). Otherwise `count(limit)` counts at most `limit` rows: exact up to
 * EXACT_TOTAL_LIMIT, the estimate beyond (never fewer than were counted).
 */
export async function boundedTotal(
  count: (limit: number) => Promise<number>,
  estimate: () => Promise<number>,
): Promise<{ total: number; total_is_estimate: boolean }> {
  const estimated = Math.round(await estimate());
  if (estimated > 2 * EXACT_TOTAL_LIMIT) return { total: estimated, total_is_estimate: true };
  const counted = await count(EXACT_TOTAL_LIMIT + 1);
  if (counted <= EXACT_TOTAL_LIMIT) return { total: counted, total_is_estimate: false };
  return { total: Math.max(counted, estimated), total_is_estimate: true };
}

/**
 * A searched list's page and total from one scan of its matches. A trigram search (`q`) is the
 * costly part of its answer: done once for the page and once for the count, it was most of the
 * time (and the page alone could walk the primary key testing every row it passed with ILIKE).
 * So, when the planner expects at most twice EXACT_TOTAL_LIMIT matches and the page lies within
 * the first EXACT_TOTAL_LIMIT + 1 of them, `ids(limit)` reads the ids of the first `limit` matches
 * in the page's order (one bitmap scan of the trigram indexes), they are counted, and `rows(ids)`
 * reads the page's rows by id. Null otherwise: the list is paged and counted as any other.
 */
export async function searchedPage<T>(
  page: Page,
  estimated: number,
  ids: (limit: number) => Promise<unknown[]>,
  rows: (ids: unknown[]) => Promise<T[]>,
): Promise<{ found: T[]; total: number; total_is_estimate: boolean } | null> {
  const end = page.offset + page.limit + 1;
  if (page.cursor || estimated > 2 * EXACT_TOTAL_LIMIT || end > EXACT_TOTAL_LIMIT + 1) return null;
  const matches = await ids(EXACT_TOTAL_LIMIT + 1);
  const wanted = matches.slice(page.offset, end);
  const found = wanted.length > 0 ? await rows(wanted) : [];
  const exact = matches.length <= EXACT_TOTAL_LIMIT;
  return { found, total: exact ? matches.length : Math.max(matches.length, estimated), total_is_estimate: !exact };
}

const IDENTIFIER = /^[a-z_][a-z0-9_]*$/;

function identifier(name: string): Prisma.Sql {
  if (!IDENTIFIER.test(name)) throw new Error(`Not a plain identifier: ${name}`);
  return Prisma.raw(`"${name}"`);
}

/** The planner's estimate of the rows of `table` matching `where` (SQL). */
export async function estimateRows(db: Db, table: string, where: Prisma.Sql): Promise<number> {
  const [row] = await db.$queryRaw<[{ 'QUERY PLAN': [{ Plan: { 'Plan Rows': number } }] }]>`
    EXPLAIN (FORMAT JSON) SELECT 1 FROM ${identifier(table)} WHERE ${where}`;
  return row['QUERY PLAN'][0].Plan['Plan Rows'];
}

const COMPARISONS: Record<string, string> = { equals: '=', gt: '>', gte: '>=', lt: '<', lte: '<=' };

/**
 * The SQL of the Prisma filters lists use (equality, comparisons, contains, not null, in/notIn, AND/OR),
 * for the planner's estimate; throws on anything else.
 */
export function whereSql(where: object): Prisma.Sql {
  const parts: Prisma.Sql[] = [];
  for (const [key, value] of Object.entries(where)) {
    if (value === undefined) continue;
    if (key === 'AND' || key === 'OR') {
      const list = (Array.isArray(value) ? value : [value]).map((w: object) => Prisma.sql`(${whereSql(w)})`);
      if (list.length > 0) parts.push(Prisma.sql`(${Prisma.join(list, key === 'AND' ? ' AND ' : ' OR ')})`);
      else if (key === 'OR') parts.push(Prisma.sql`FALSE`);
      continue;
    }
    const column = identifier(key);
    if (value === null) parts.push(Prisma.sql`${column} IS NULL`);
    else if (typeof value !== 'object' || value instanceof Date) parts.push(Prisma.sql`${column} = ${value}`);
    else {
      const filter = value as Record<string, unknown>;
      for (const [op, arg] of Object.entries(filter)) {
        if (arg === undefined || op === 'mode') continue;
        if (op in COMPARISONS) parts.push(Prisma.sql`${column} ${Prisma.raw(COMPARISONS[op]!)} ${arg}`);
        else if (op === 'not' && arg === null) parts.push(Prisma.sql`${column} IS NOT NULL`);
        else if ((op === 'in' || op === 'notIn') && Array.isArray(arg)) {
          // As Prisma reads them: `in: []` matches nothing, `notIn: []` everything.
          if (arg.length > 0) parts.push(Prisma.sql`${column} ${Prisma.raw(op === 'in' ? 'IN' : 'NOT IN')} (${Prisma.join(arg)})`);
          else if (op === 'in') parts.push(Prisma.sql`FALSE`);
        } else if (op === 'contains') {
          const like = filter.mode === 'insensitive' ? Prisma.raw('ILIKE') : Prisma.raw('LIKE');
          parts.push(Prisma.sql`${column} ${like} '%' || ${arg} || '%'`);
        } else throw new Error(`whereSql: no SQL for the filter ${key}.${op}`);
      }
    }
  }
  return parts.length > 0 ? Prisma.join(parts, ' AND ') : Prisma.sql`TRUE`;
}
