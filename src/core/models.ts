// The record families of the service. Each feature defines its models with defineModel() and lists
// them in its manifest; the registry composed from them serves the chatter, inbound webhooks,
// the record services and key rotation. A model name is checked by the compiler: the feature that
// defines a model adds its name to ModelNames (declaration merging, next to the definition).
import type { Db, DbTx } from './db.js';
import type { UserGroup } from './groups.js';

/** Every model name of the service, added by the features: `interface ModelNames { 'res.partner': true }`. */
// biome-ignore lint/suspicious/noEmptyInterface: filled by declaration merging in the features
export interface ModelNames {}
export type ModelName = keyof ModelNames & string;

export interface ModelInfo {
  name: ModelName;
  /** Prisma delegate, e.g. `rootServer`. */
  delegate: string;
  /** PostgreSQL table, for the few raw-SQL paths (key rotation, the webhook endpoint). */
  table: string;
  /** REST resource under /api/v1 (`root-servers`); records of a model without one have no chatter routes. */
  resource?: string;
  /** Minimum group that may read the record and its chatter. */
  readGroup: UserGroup;
  /** Minimum group that may read its action-log rows (default user: the audit log is everyone's, secrets masked). */
  actionLogGroup?: UserGroup;
  /** Naming fields `?q=` searches (case-insensitive substring): name, ip, e-mail... */
  search?: readonly string[];
  /** Fields `?sort=` accepts besides id and created_at (default: name, when searched). */
  sortable?: readonly string[];
  /**
   * The time field of a time-ordered record (alerts: `started_at`): its list takes `?from=&to=`,
   * and is then ordered by it, newest first, unless `?sort=` says otherwise.
   */
  timeField?: string;
  /** Fields whose changes are written to the chatter. */
  tracked?: readonly string[];
  /**
   * Secret columns: encrypted at rest, write-only in the API (`<field>_set`), re-encrypted by key
   * rotation. This is the one list; a test compares it with what the database holds.
   */
  secrets?: readonly string[];
  /** Where the secrets are sent: changing one of these clears them. */
  destinations?: readonly string[];
  /** Reset too when a destination changes (e.g. a recorded host key). */
  forgetOnMove?: Readonly<Record<string, unknown>>;
}

/** A model definition, keeping its literal field lists for the schemas built from it. */
export function defineModel<const M extends ModelInfo>(model: M): M {
  return model;
}

/** "git repositories" → "git repository", "root servers" → "root server". */
export function singularOf(plural: string): string {
  return plural.endsWith('ies') ? `${plural.slice(0, -3)}y` : plural.replace(/s$/, '');
}

/** "root server" for "root-servers": how messages name a record of the model. */
export function labelOf(model: ModelInfo): string {
  return singularOf((model.resource ?? model.table).replace(/[-_]/g, ' '));
}

/** What `?sort=` accepts for a model's list. */
export function sortFieldsOf(model: ModelInfo): string[] {
  return ['id', 'created_at', ...(model.sortable ?? (model.search?.includes('name') ? ['name'] : []))];
}

export type ModelRegistry = ReturnType<typeof createModelRegistry>;

/** Every feature's models, by name; a name defined twice is a programming error. */
export function createModelRegistry(models: readonly ModelInfo[]) {
  const byName = new Map<string, ModelInfo>();
  for (const model of models) {
    if (byName.has(model.name)) throw new Error(`Model ${model.name} is defined twice`);
    byName.set(model.name, model);
  }

  return {
    all: models,
    /** The model of that name, or null (names come from requests too: a Map, no prototype lookups). */
    find: (name: string): ModelInfo | null => byName.get(name) ?? null,
    names: (): string[] => [...byName.keys()].sort(),

    /** Whether the record exists; a name outside the registry never has records. */
    async recordExists(client: Db | DbTx, name: string, id: number): Promise<boolean> {
      const model = byName.get(name);
      if (!model) return false;
      const delegate = (client as unknown as Record<string, { count(args: object): Promise<number> }>)[model.delegate]!;
      return (await delegate.count({ where: { id } })) > 0;
    },

    /** Every secret column by table, for key rotation. */
    secretColumns(): Record<string, readonly string[]> {
      return Object.fromEntries(models.filter((m) => m.secrets?.length).map((m) => [m.table, m.secrets!]));
    },
  };
}
