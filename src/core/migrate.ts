// Prisma migrations without the native schema engine: the WebAssembly engine over a pg driver
// adapter applies prisma/migrations/* and records them in _prisma_migrations like `migrate deploy`.
import { readFile, readdir, mkdir, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { PrismaPg } from '@prisma/adapter-pg';
import { bindMigrationAwareSqlAdapterFactory } from '@prisma/driver-adapter-utils';
import type { MigrationList, SchemaEngine } from '@prisma/schema-engine-wasm';
import { sleep } from './sleep.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
export const MIGRATIONS_DIR = path.join(ROOT, 'prisma/migrations');
export const SCHEMA_FILE = path.join(ROOT, 'prisma/schema.prisma');
// Any constant works; it only has to be the same in every process of the fleet.
const MIGRATION_LOCK_KEY = 7_356_201_001;
const noFilters = { externalTables: [], externalEnums: [] };

// Node has WebAssembly at run time; its types live in the DOM lib, which this project does not load.
declare const WebAssembly: {
  instantiate(bytes: Uint8Array, imports: object): Promise<{ instance: { exports: Record<string, unknown> } }>;
};

let engineModule: Promise<typeof import('@prisma/schema-engine-wasm')> | undefined;

/** Instantiates the engine's .wasm by hand so Node 20 needs no --experimental-wasm-modules. */
function loadEngineModule() {
  engineModule ??= (async () => {
    const require = createRequire(import.meta.url);
    const dir = path.dirname(require.resolve('@prisma/schema-engine-wasm'));
    const bg = await import(path.join(dir, 'schema_engine_bg.js'));
    const bytes = await readFile(path.join(dir, 'schema_engine_bg.wasm'));
    // The engine leaves ~10 s timers behind; unref'd, they no longer keep a CLI run alive.
    const imports: Record<string, unknown> = { ...bg };
    for (const name of Object.keys(bg).filter((n) => n.startsWith('__wbg_setTimeout_'))) {
      imports[name] = (...args: unknown[]) => {
        const timer = bg[name](...args);
        timer?.unref?.();
        return timer;
      };
    }
    const { instance } = await WebAssembly.instantiate(bytes, { './schema_engine_bg.js': imports });
    bg.__wbg_set_wasm(instance.exports);
    (instance.exports as { __wbindgen_start?: () => void }).__wbindgen_start?.();
    return bg as typeof import('@prisma/schema-engine-wasm');
  })();
  return engineModule;
}

async function withEngine<T>(databaseUrl: string, run: (engine: SchemaEngine) => Promise<T>): Promise<T> {
  const { SchemaEngine } = await loadEngineModule();
  const schema = await readFile(SCHEMA_FILE, 'utf8');
  // Discrete fields, not a connectionString: the adapter's shadow database overrides `database`,
  // which a connectionString would silently win over.
  const factory = new MigrationPrismaPg(poolConfig(databaseUrl));
  const engine = await SchemaEngine.new({ datamodels: [[SCHEMA_FILE, schema]] }, () => {}, bindMigrationAwareSqlAdapterFactory(factory));
  try {
    return await run(engine);
  } finally {
    engine.free();
    // The engine never disposes its main connection, whose session still holds Prisma's migrate
    // advisory lock: left open, the next run would wait for the pool's idle timeout.
    await factory.disposeAll();
  }
}

function poolConfig(databaseUrl: string): pg.PoolConfig {
  const url = new URL(databaseUrl);
  return {
    host: url.hostname,
    port: Number(url.port || 5432),
    user: decodeURIComponent(url.username) || undefined,
    password: decodeURIComponent(url.password) || undefined,
    database: decodeURIComponent(url.pathname.slice(1)),
  };
}

/**
 * Three fixes over the stock adapter, all needed by the WebAssembly engine:
 * - it drops its shadow database before closing the pool that uses it ("being accessed by
 *   other users", and the database leaks); this one closes the pool first;
 * - it cannot map PostgreSQL's internal "char" type (oid 18), which the engine's catalog
 *   queries return; it is a one-character text, so it is read as text;
 * - it splits a migration script at every ";", which breaks function bodies and DO blocks;
 *   this one sends the script whole, as one simple query, as `prisma migrate deploy` does.
 */
class MigrationPrismaPg extends PrismaPg {
  private readonly opened: { dispose(): Promise<void> }[] = [];

  constructor(private readonly base: pg.PoolConfig) {
    super(base);
  }

  async disposeAll() {
    // The migration is over (done or failed, and that is told): a pool that fails to close holds
    // nothing more of it.
    await Promise.all(this.opened.splice(0).map((adapter) => adapter.dispose().catch(() => {})));
  }

  override async connect() {
    const adapter = await super.connect();
    const dispose = once(adapter.dispose.bind(adapter));
    adapter.dispose = dispose;
    this.opened.push(adapter);
    type IO = { fields: { dataTypeID: number }[] };
    const io = adapter as unknown as { performIO: (query: unknown) => Promise<IO> };
    const performIO = io.performIO.bind(adapter);
    io.performIO = async (query) => {
      const result = await performIO(query);
      for (const field of result.fields) if (field.dataTypeID === PG_CHAR_OID) field.dataTypeID = PG_TEXT_OID;
      return result;
    };
    const script = adapter as unknown as { client: pg.Pool; onError(error: unknown): never; executeScript(sql: string): Promise<void> };
    script.executeScript = async (sql) => {
      try {
        await script.client.query(sql);
      } catch (error) {
        script.onError(error);
      }
    };
    return adapter;
  }

  override async connectToShadowDb() {
    const name = `svc_shadow_${randomUUID().replaceAll('-', '')}`;
    await adminQuery(this.base, `CREATE DATABASE "${name}"`);
    const adapter = await new MigrationPrismaPg({ ...this.base, database: name }).connect();
    const closePool = adapter.dispose.bind(adapter);
    adapter.dispose = async () => {
      await closePool();
      await adminQuery(this.base, `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    };
    return adapter;
  }
}
const PG_CHAR_OID = 18;

function once(fn: () => Promise<void>): () => Promise<void> {
  let done: Promise<void> | undefined;
  return () => (done ??= fn());
}
const PG_TEXT_OID = 25;

async function adminQuery(config: pg.PoolConfig, sql: string) {
  const client = new pg.Client(config);
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

async function migrationList(): Promise<MigrationList> {
  const names = (await readdir(MIGRATIONS_DIR, { withFileTypes: true }).catch(() => []))
    .filter((entry) => entry.isDirectory())
    .map((entry) => entry.name)
    .sort();
  // Paths relative to baseDir, as Prisma's CLI gives them: the engine records a migration under its
  // directory's path, which must not depend on where the installation is.
  const migrationDirectories = await Promise.all(
    names.map(async (name) => ({
      path: name,
      migrationFile: {
        path: 'migration.sql',
        content: { tag: 'ok' as const, value: await readFile(path.join(MIGRATIONS_DIR, name, 'migration.sql'), 'utf8') },
      },
    })),
  );
  // No lock file is an answer Prisma's engine takes (null), not a failure.
  const lockContent = await readFile(path.join(MIGRATIONS_DIR, 'migration_lock.toml'), 'utf8').catch(() => null);
  return {
    baseDir: MIGRATIONS_DIR,
    lockfile: { path: 'migration_lock.toml', content: lockContent },
    shadowDbInitScript: '',
    migrationDirectories,
  };
}

/** Creates the database named in the URL when it does not exist yet. */
async function ensureDatabase(databaseUrl: string): Promise<void> {
  const url = new URL(databaseUrl);
  const name = decodeURIComponent(url.pathname.slice(1));
  url.pathname = '/postgres';
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  try {
    const { rowCount } = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (!rowCount) {
      await client.query(`CREATE DATABASE "${name.replaceAll('"', '""')}"`).catch((err: { code?: string }) => {
        // Another process created it meanwhile: 42P04, or 23505 when both inserts raced in the catalog.
        if (err.code !== '42P04' && err.code !== '23505') throw err;
      });
    }
  } finally {
    await client.end();
  }
}

/**
 * Waits for the migration lock by asking again every 200 ms rather than blocking in
 * pg_advisory_lock(): a blocked statement holds a snapshot, and CREATE INDEX CONCURRENTLY in the
 * process that has the lock waits for every older snapshot to end, so the two would wait for each
 * other forever.
 */
async function takeMigrationLock(client: pg.Client): Promise<void> {
  for (;;) {
    const { rows } = await client.query<{ taken: boolean }>('SELECT pg_try_advisory_lock($1) AS taken', [MIGRATION_LOCK_KEY]);
    if (rows[0]?.taken) return;
    await sleep(200);
  }
}

/**
 * Applies pending migrations. A PostgreSQL advisory lock serialises concurrent starts,
 * so a fleet of processes starting at once applies each migration exactly once.
 */
export async function applyMigrations(databaseUrl: string): Promise<string[]> {
  await ensureDatabase(databaseUrl);
  const lock = new pg.Client({ connectionString: databaseUrl });
  await lock.connect();
  try {
    await takeMigrationLock(lock);
    // Earlier versions recorded each migration under the absolute path of the checkout they ran from.
    await lock.query(
      `DO $$ BEGIN
         IF to_regclass('_prisma_migrations') IS NOT NULL THEN
           UPDATE _prisma_migrations SET migration_name = regexp_replace(migration_name, '^.*/', '') WHERE migration_name LIKE '%/%';
         END IF;
       END $$`,
    );
    const migrationsList = await migrationList();
    return await withEngine(databaseUrl, async (engine) => {
      const out = await engine.applyMigrations({ migrationsList, filters: noFilters });
      return out.appliedMigrationNames.map((name) => path.basename(name));
    });
  } finally {
    // Ended with the session just below in any case: the unlock only frees it a moment sooner.
    await lock.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]).catch(() => {});
    await lock.end();
  }
}

/** SQL that takes the migrations directory to the current schema.prisma ('' when in sync). */
export async function pendingSchemaSql(databaseUrl: string): Promise<string> {
  await ensureDatabase(databaseUrl); // the engine creates its shadow database through this one
  const migrationsList = await migrationList();
  const schema = await readFile(SCHEMA_FILE, 'utf8');
  return withEngine(databaseUrl, async (engine) => {
    const from =
      migrationsList.migrationDirectories.length > 0 ? { tag: 'migrations' as const, ...migrationsList } : { tag: 'empty' as const };
    const result = await engine.diff({
      from,
      to: { tag: 'schemaDatamodel', files: [{ path: SCHEMA_FILE, content: schema }] },
      script: true,
      exitCode: null,
      filters: noFilters,
    });
    const sql = result.stdout ?? '';
    return sql.includes('-- This is an empty migration.') ? '' : sql.trim();
  });
}

/** Writes prisma/migrations/<timestamp>_<name>/migration.sql from the schema changes. */
export async function writeMigration(databaseUrl: string, name: string): Promise<string | null> {
  const sql = await pendingSchemaSql(databaseUrl);
  if (!sql) return null;
  const stamp = new Date().toISOString().replace(/\D/g, '').slice(0, 14);
  const dir = path.join(MIGRATIONS_DIR, `${stamp}_${name.replace(/[^a-z0-9_]+/gi, '_')}`);
  await mkdir(dir, { recursive: true });
  await writeFile(path.join(dir, 'migration.sql'), `${sql}\n`);
  await writeFile(path.join(MIGRATIONS_DIR, 'migration_lock.toml'), 'provider = "postgresql"\n');
  return dir;
}
