// Generic record operations shared by the REST resources: paging, secret fields (encrypted on the
// way in, `<field>_set` on the way out), tracked fields written to the chatter, JSON-safe output.
// Feature services start from this and add their rules and actions.
import type { Db } from './db.js';
import type { SecretBox } from './crypto.js';
import { NotFoundError } from './errors.js';
import { MODELS, type ModelName } from './models.js';
import { trackChanges, type Author } from '../chatter/chatter-service.js';

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
  modelName: ModelName;
  secrets?: readonly string[];
  tracked?: readonly string[];
  orderBy?: object;
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

/** Anything with Prisma's findMany/count, e.g. `db.actionLog`. */
interface Pageable<T> {
  findMany(args: { where: object; orderBy: object | object[]; take: number; skip: number }): Promise<T[]>;
  count(args: { where: object }): Promise<number>;
}

/**
 * One page of a list answer (DESIGN §8): `{items, total, limit, offset}`, each row through `view`
 * (JSON-safe by default). Filters left undefined are ignored by Prisma, so optional query
 * parameters pass straight in.
 */
export async function listPage<T extends object, V = JsonSafe<T>>(
  delegate: Pageable<T>,
  where: object,
  page: { limit: number; offset: number },
  opts: { orderBy?: object | object[]; view?: (row: T) => V } = {},
) {
  const { orderBy = { id: 'asc' }, view = jsonSafe as (row: T) => V } = opts;
  const [rows, total] = await Promise.all([
    delegate.findMany({ where, orderBy, take: page.limit, skip: page.offset }),
    delegate.count({ where }),
  ]);
  return { items: rows.map(view), total, limit: page.limit, offset: page.offset };
}

export type RecordService = ReturnType<typeof createRecordService>;

export function createRecordService(db: Db, box: SecretBox, opts: RecordServiceOptions) {
  const { modelName, secrets = [], tracked = [], orderBy = { id: 'asc' } } = opts;
  const delegate = (db as unknown as Record<string, Delegate>)[MODELS[modelName].delegate]!;
  const label = MODELS[modelName].resource.replace(/-/g, ' ').replace(/s$/, '');

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
      out[field] = typeof value === 'string' && value !== '' ? await box.encrypt(value) : null;
    }
    return out;
  }

  async function getRow(id: number): Promise<Row> {
    const row = await delegate.findUnique({ where: { id } });
    if (!row) throw new NotFoundError(label.charAt(0).toUpperCase() + label.slice(1));
    return row;
  }

  return {
    modelName,
    toOutput,
    sealSecrets,
    getRow,

    async list(query: { limit: number; offset: number } & Data) {
      const { limit, offset, ...where } = query;
      return listPage(delegate, where, { limit, offset }, { orderBy, view: toOutput });
    },

    async get(id: number) {
      return toOutput(await getRow(id));
    },

    async create(data: Data, author: Author | null = null) {
      const row = await db.$transaction(async (tx) => {
        const created = await (tx as unknown as Record<string, Delegate>)[MODELS[modelName].delegate]!.create({
          data: await sealSecrets(data),
        });
        await trackChanges(tx, { model_name: modelName, rec_id: created.id }, tracked, null, created, author);
        return created;
      });
      return toOutput(row);
    },

    async update(id: number, data: Data, author: Author | null = null) {
      const row = await db.$transaction(async (tx) => {
        const txDelegate = (tx as unknown as Record<string, Delegate>)[MODELS[modelName].delegate]!;
        const before = await txDelegate.findUnique({ where: { id } });
        if (!before) throw new NotFoundError(label);
        const after = await txDelegate.update({ where: { id }, data: await sealSecrets(data) });
        await trackChanges(tx, { model_name: modelName, rec_id: id }, tracked, before, after, author);
        return after;
      });
      return toOutput(row);
    },

    async remove(id: number) {
      await getRow(id);
      await delegate.delete({ where: { id } });
    },
  };
}
