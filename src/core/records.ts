// Generic record operations shared by the REST resources: paging, secret fields (encrypted on the
// way in, `<field>_set` on the way out), tracked fields written to the chatter, JSON-safe output.
// Feature services start from this and add their rules and actions.
import { indexColumns, Prisma, violatedIndexOf, type Db, type DbTx } from './db.js';
import type { SecretBox } from './crypto.js';
import { ConflictError, NotFoundError } from './errors.js';
import { conditionalWrite, type Precondition, type RowLock } from './conditional-write.js';
import { labelOf, type ModelInfo } from './models.js';
import { trackChanges, type Author } from './chatter.js';
import {
  assertOnePosition,
  boundedTotal,
  type Column,
  columnsOf,
  cursorSecret,
  decodeCursor,
  encodeCursor,
  estimateRows,
  type ListAnswer,
  type Page,
  searchedPage,
  whereSql,
} from './lists.js';

type Row = Record<string, unknown> & { id: number };
type Data = Record<string, unknown>;

// Prisma's delegates share these methods but no usable common type; this is the one place that
// talks to a delegate generically.
interface Delegate {
  findMany(args: object): Promise<Row[]>;
  findUnique(args: object): Promise<Row | null>;
  count(args: object): Promise<number>;
  create(args: object): Promise<Row>;
  update(args: object): Promise<Row>;
  delete(args: object): Promise<Row>;
}

export interface RecordServiceOptions {
  /** The list's order without `?sort=`: `id` (default) or e.g. `-id`. */
  sort?: string;
  /**
   * Runs in the update's transaction, with the row locked and read: throws to refuse the update, or
   * answers the data to write instead of `data` (rules that depend on the row as it is). `moved`:
   * the destination fields the update changes (its secrets are then cleared).
   */
  prepareUpdate?(tx: DbTx, before: Row, data: Data, moved: string[]): Promise<Data | undefined>;
  /** Runs in the create's transaction: throws to refuse it, or answers the data to write instead of `data`. */
  prepareCreate?(tx: DbTx, data: Data): Promise<Data>;
  /** Runs after a create, update or delete has committed (e.g. to tell the workers to reload). */
  afterWrite?(): Promise<unknown>;
}

type JsonValue<V> = V extends Date ? string : V extends bigint ? number : V;
/** A row as JSON carries it: Dates become ISO strings, BigInts numbers. */
export type JsonSafe<T> = { [K in keyof T]: JsonValue<T[K]> };

/** Dates as ISO strings and BigInts as numbers, so rows can be serialised as JSON. */
export function jsonSafe<T extends object>(row: T): JsonSafe<T> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(row)) {
    out[k] = v instanceof Date ? v.toISOString() : typeof v === 'bigint' ? Number(v) : v;
  }
  return out as JsonSafe<T>;
}

/** The list parameters every resource shares, besides its exact filters. */
export interface ListParams extends Page {
  /** `name` or `-name` (descending). */
  sort?: string;
  /** Case-insensitive substring of any naming field. */
  q?: string;
  /** Bounds of the model's time field (`timeField`), as [from, to). */
  from?: string;
  to?: string;
}

/** `?q=` as a Prisma filter over `fields`; LIKE's wildcards in the text are matched literally. */
export function searchWhere(fields: readonly string[] = [], q: string | undefined): object {
  if (!q || fields.length === 0) return {};
  const contains = q.replace(/[\\%_]/g, (c) => `\\${c}`);
  return { OR: fields.map((f) => ({ [f]: { contains, mode: 'insensitive' } })) };
}

/** `?from=&to=` as a Prisma filter of a time field, [from, to); undefined when neither is given. */
export function timeRange(from: string | undefined, to: string | undefined): { gte?: Date; lt?: Date } | undefined {
  if (!from && !to) return undefined;
  return { ...(from ? { gte: new Date(from) } : {}), ...(to ? { lt: new Date(to) } : {}) };
}

/** Anything with Prisma's findMany/count, e.g. `db.actionLog`. */
interface Pageable<T> {
  findMany(args: { where: object; orderBy: object[]; take?: number; skip?: number; select?: { id: true } }): Promise<T[]>;
  count(args: { where: object; orderBy: object[]; take: number }): Promise<number>;
}

/**
 * One stretch of a list's order that an index walks on its own: the rows with a value of the sort
 * field (in the order of the field, then id), the rows without one (by id), or for an enum field
 * the rows of each value (by id; Prisma cannot compare enums). PostgreSQL sorts NULLs last
 * ascending and first descending, and enums in their declared order: the stretches follow that.
 */
interface Stretch {
  base: object | null;
  /** The rows after (value, id) within the stretch. */
  after(value: unknown, id: unknown): object;
  orderBy: object[];
  holds(value: unknown): boolean;
}

function stretchesOf(sort: string, column: Column | undefined): Stretch[] {
  const desc = sort.startsWith('-');
  const field = desc ? sort.slice(1) : sort;
  const dir = desc ? 'desc' : 'asc';
  const beyond = desc ? 'lt' : 'gt';
  const byId = (id: unknown) => ({ id: { [beyond]: id } });
  const byIdOnly = { after: (_v: unknown, id: unknown) => byId(id), orderBy: [{ id: dir }] };
  if (field === 'id' || !column) return [{ base: null, ...byIdOnly, holds: () => true }];
  const labels = typeof column.type === 'object' ? [...column.type.enum] : null;
  const values: Stretch[] = labels
    ? (desc ? labels.reverse() : labels).map((label) => ({ base: { [field]: label }, ...byIdOnly, holds: (v) => v === label }))
    : [
        {
          base: column.nullable ? { [field]: { not: null } } : null,
          after: (v, id) => ({ AND: [{ [field]: { [desc ? 'lte' : 'gte']: v } }, { OR: [{ [field]: { [beyond]: v } }, byId(id)] }] }),
          orderBy: [{ [field]: dir }, { id: dir }],
          holds: (v) => v !== null,
        },
      ];
  if (!column.nullable) return values;
  const nulls: Stretch = { base: { [field]: null }, ...byIdOnly, holds: (v) => v === null };
  return desc ? [nulls, ...values] : [...values, nulls];
}

/**
 * One page of a list: `{items, total, total_is_estimate, limit, offset, next_cursor}`, each row
 * through `view` (JSON-safe by default). `sort` is `field` or `-field`, id breaking ties in the
 * same direction. A cursor page walks the stretches of the order from the cursor's row, each an
 * index range scan; an offset page is one query (offsets are kept shallow by the query schema).
 * Filters left undefined are ignored by Prisma, so optional query parameters pass straight in.
 */
export async function listPage<T extends object, V = JsonSafe<T>>(
  deps: { db: Db; secretBox: Pick<SecretBox, 'deriveKey'> },
  delegate: Pageable<T>,
  where: object,
  page: Page,
  opts: { table: string; sort: string; resource?: string; view?: (row: T) => V; search?: boolean },
): Promise<ListAnswer<V>> {
  assertOnePosition(page);
  const { db } = deps;
  const secret = cursorSecret(deps.secretBox);
  const { table, sort, view = jsonSafe as (row: T) => V } = opts;
  const key = { resource: opts.resource ?? table, sort };
  const columns = await columnsOf(db, table);
  const field = sort.replace(/^-/, '');
  const column = field === 'id' ? undefined : columns.get(field);
  if (field !== 'id' && !column) throw new Error(`${table} has no column ${field}`);
  const stretches = stretchesOf(sort, column);
  const need = page.limit + 1;

  const dir = sort.startsWith('-') ? 'desc' : 'asc';
  const orderBy = column ? [{ [field]: dir }, { id: dir }] : [{ id: dir }];

  async function rows(): Promise<T[]> {
    if (!page.cursor) return delegate.findMany({ where, orderBy, take: need, skip: page.offset });
    const idColumn = columns.get('id')!;
    const [value, id] = column
      ? decodeCursor(secret, page.cursor, key, [column, idColumn])
      : [null, ...decodeCursor(secret, page.cursor, key, [idColumn])];
    const from = stretches.findIndex((s) => s.holds(value));
    const found: T[] = [];
    for (let i = from; i < stretches.length && found.length < need; i++) {
      const { base, after, orderBy } = stretches[i]!;
      const parts = [where, base, i === from ? after(value, id) : null].filter((p): p is object => p !== null);
      found.push(...(await delegate.findMany({ where: { AND: parts }, orderBy, take: need - found.length })));
    }
    return found;
  }

  // A filter written here as SQL is estimated by the planner; otherwise the table's size is.
  // (whereSql throws for a filter it cannot write: that too falls back, not a 500.) Asked once.
  let estimated: Promise<number> | undefined;
  const estimate = () =>
    (estimated ??= Promise.resolve()
      .then(() => estimateRows(db, table, whereSql(where)))
      .catch(() => estimateRows(db, table, Prisma.sql`TRUE`)));

  // A search (`q`): its first pages and count from one scan of the matches when they are few enough.
  const searched =
    opts.search && !page.cursor
      ? await searchedPage(
          page,
          Math.round(await estimate()),
          async (limit) => (await delegate.findMany({ where, orderBy, take: limit, select: { id: true } })).map((r) => (r as Row).id),
          (ids) => delegate.findMany({ where: { id: { in: ids } }, orderBy }),
        )
      : null;
  const [found, total] = searched
    ? [searched.found, searched]
    : await Promise.all([
        rows(),
        // In the page's order: Prisma orders a limited count (by id unless told), and that order picks the index.
        boundedTotal((limit) => delegate.count({ where, orderBy, take: limit }), estimate),
      ]);
  const items = found.slice(0, page.limit);
  const last = items.at(-1) as Record<string, unknown> | undefined;
  const next = found.length > page.limit && last ? encodeCursor(secret, key, column ? [last[field], last.id] : [last.id]) : null;
  const { total: count, total_is_estimate } = total;
  return { items: items.map(view), total: count, total_is_estimate, limit: page.limit, offset: page.offset, next_cursor: next };
}

/**
 * A unique violation as the API answers it: a 409 naming the fields of the violated
 * index and, when `values` hold them, the id of the record that already has them. Null when `err`
 * is no unique violation.
 */
export async function uniqueConflict(db: Db, model: ModelInfo, err: unknown, values: Data): Promise<ConflictError | null> {
  const index = violatedIndexOf(err);
  if (!index) return null;
  const fields = await indexColumns(db, index);
  const label = labelOf(model);
  let existing: number | undefined;
  if (fields.length > 0 && fields.every((f) => values[f] !== undefined)) {
    const delegate = (db as unknown as Record<string, Delegate>)[model.delegate]!;
    const [row] = await delegate.findMany({ where: Object.fromEntries(fields.map((f) => [f, values[f]])), take: 1 } as object);
    existing = row?.id;
  }
  const what = fields.length ? ` with this ${fields.join(' and ')}` : '';
  return new ConflictError(`A ${label}${what} already exists${existing ? ` (${label} ${existing})` : ''}`, {
    fields: fields.map((field) => ({ field, message: 'already used by another record' })),
    ...(existing ? { existing_id: existing } : {}),
  });
}

/**
 * The REST resource of a model: secrets, tracked fields and destinations come from its definition
 * (src/core/models.ts), so every service handles them the one way.
 */
export function createRecordService(deps: { db: Db; secretBox: SecretBox }, model: ModelInfo, opts: RecordServiceOptions = {}) {
  const { db, secretBox } = deps;
  const { secrets = [], tracked = [], destinations = [], forgetOnMove = {} } = model;
  const { sort: defaultSort = 'id' } = opts;
  const modelName = model.name;
  const delegate = (db as unknown as Record<string, Delegate>)[model.delegate]!;
  const label = labelOf(model);
  const notFound = () => new NotFoundError(label.charAt(0).toUpperCase() + label.slice(1));

  function toOutput(row: Row): Data {
    const out: Data = jsonSafe(row);
    for (const field of secrets) {
      out[`${field}_set`] = row[field] !== null && row[field] !== undefined && row[field] !== '';
      delete out[field];
    }
    return out;
  }

  /** Encrypts secret values; '' or null clears the secret. */
  async function sealSecrets(data: Data): Promise<Data> {
    const out = { ...data };
    for (const field of secrets) {
      if (!(field in out) || out[field] === undefined) continue;
      const value = out[field];
      out[field] = typeof value === 'string' && value !== '' ? await secretBox.encrypt(value) : null;
    }
    return out;
  }

  /** The destination fields `data` changes on `before` (empty when it moves nothing). */
  function movedFields(before: Data, data: Data): string[] {
    return destinations.filter((f) => data[f] !== undefined && String(data[f]) !== String(before[f]));
  }

  /**
   * The update as it will be written: when it moves the record to another destination, the
   * secrets it does not set again are cleared, so a stored secret never follows the record to a
   * host of the caller's choosing.
   */
  function bindSecrets(before: Data, data: Data): Data {
    if (movedFields(before, data).length === 0) return data;
    const out = { ...data };
    for (const field of secrets) if (out[field] === undefined) out[field] = null;
    for (const [field, value] of Object.entries(forgetOnMove)) if (out[field] === undefined) out[field] = value;
    return out;
  }

  async function getRow(id: number): Promise<Row> {
    const row = await delegate.findUnique({ where: { id } });
    if (!row) throw notFound();
    return row;
  }

  return {
    modelName,
    toOutput,
    sealSecrets,
    getRow,
    movedFields,
    bindSecrets,

    /** With `from`/`to` and no `sort`, a time-ordered list is ordered by its time field, newest first. */
    async list(query: ListParams & Data) {
      const { limit, offset, cursor, sort, q, from, to, ...filters } = query;
      const range = model.timeField ? timeRange(from, to) : undefined;
      const search = searchWhere(model.search, q);
      const where = { ...filters, ...search, ...(range ? { [model.timeField!]: range } : {}) };
      const order = sort ?? (range ? `-${model.timeField}` : defaultSort);
      return listPage(
        deps,
        delegate,
        where,
        { limit, offset, cursor },
        { table: model.table, resource: model.resource, sort: order, view: toOutput, search: 'OR' in search },
      );
    },

    async get(id: number) {
      return toOutput(await getRow(id));
    },

    async create(data: Data, author: Author | null = null) {
      try {
        const row = await db.$transaction(async (tx) => {
          const next = opts.prepareCreate ? await opts.prepareCreate(tx, data) : data;
          const created = await (tx as unknown as Record<string, Delegate>)[model.delegate]!.create({
            data: await sealSecrets(next),
          });
          await trackChanges(tx, { model_name: modelName, rec_id: created.id }, tracked, null, created, author);
          return created;
        });
        await opts.afterWrite?.();
        return toOutput(row);
      } catch (err) {
        throw (await uniqueConflict(db, model, err, data)) ?? err;
      }
    },

    /** Runs `write` with the record's row locked by `lock(tx)`, under `precondition` (see conditionalWrite). */
    conditionally<T>(id: number, precondition: Precondition | undefined, write: (lock: RowLock) => Promise<T>): Promise<T> {
      return conditionalWrite(db, { table: model.table, id, notFound }, precondition, write);
    },

    /** `precondition` (If-Match) holds for the row as the update locks it. */
    async update(id: number, data: Data, author: Author | null = null, precondition?: Precondition) {
      let before: Row | null = null;
      try {
        const row = await conditionalWrite(db, { table: model.table, id, notFound }, precondition, (lock) =>
          db.$transaction(async (tx) => {
            const txDelegate = (tx as unknown as Record<string, Delegate>)[model.delegate]!;
            // Locked, so that concurrent changes of one record are applied and tracked one after the other.
            await lock(tx);
            before = await txDelegate.findUnique({ where: { id } });
            if (!before) throw notFound();
            const next = (await opts.prepareUpdate?.(tx, before, data, movedFields(before, data))) ?? data;
            const after = await txDelegate.update({ where: { id }, data: await sealSecrets(bindSecrets(before, next)) });
            await trackChanges(tx, { model_name: modelName, rec_id: id }, tracked, before, after, author);
            return after;
          }),
        );
        await opts.afterWrite?.();
        return toOutput(row);
      } catch (err) {
        throw (await uniqueConflict(db, model, err, { ...(before ?? {}), ...data })) ?? err;
      }
    },

    /** `precondition` (If-Match) holds for the row as the delete locks it. */
    async remove(id: number, precondition?: Precondition) {
      await conditionalWrite(db, { table: model.table, id, notFound }, precondition, (lock) =>
        db.$transaction(async (tx) => {
          await lock(tx);
          await (tx as unknown as Record<string, Delegate>)[model.delegate]!.delete({ where: { id } });
        }),
      );
      await opts.afterWrite?.();
    },
  };
}
