// Real PostgreSQL: migrations applied from an empty database by the WebAssembly schema engine,
// concurrently, and in sync with prisma/schema.prisma.
import { readdir } from 'node:fs/promises';
import { afterAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import pg from 'pg';
import { applyMigrations, MIGRATIONS_DIR, pendingSchemaSql } from '../src/core/migrate.js';
import { databaseUrl, dropDatabase } from './helpers/pg.js';

const created: string[] = [];
function freshName(tag: string) {
  const name = `${inject('dbRun')}_${tag}_${created.length}`;
  created.push(name);
  return name;
}

async function query<R extends pg.QueryResultRow>(db: string, sql: string, params: unknown[] = []) {
  const client = new pg.Client({ connectionString: databaseUrl(db) });
  await client.connect();
  try {
    return (await client.query<R>(sql, params)).rows;
  } finally {
    await client.end();
  }
}

afterAll(async () => {
  for (const name of created) await dropDatabase(name);
});

describe('migrations', () => {
  it('are recorded by their folder name, as Prisma does: an installation moved to another directory applies nothing again', async () => {
    const db = freshName('moved');
    await applyMigrations(databaseUrl(db));
    const names = (await query<{ migration_name: string }>(db, 'SELECT migration_name FROM _prisma_migrations')).map(
      (r) => r.migration_name,
    );
    expect(names.every((n) => /^\d{14}_[a-z0-9_]+$/.test(n))).toBe(true);
    // As versions that recorded the path of the checkout they ran from left them.
    await query(db, `UPDATE _prisma_migrations SET migration_name = '/srv/svc-old-release/prisma/migrations/' || migration_name`);
    expect(await applyMigrations(databaseUrl(db))).toEqual([]);
    const after = (await query<{ migration_name: string }>(db, 'SELECT migration_name FROM _prisma_migrations')).map(
      (r) => r.migration_name,
    );
    expect(after.sort()).toEqual(names.sort());
  });

  it('apply from nothing (the database is created), then are a no-op', async () => {
    const db = freshName('empty');
    const dirs = (await readdir(MIGRATIONS_DIR, { withFileTypes: true })).filter((d) => d.isDirectory()).map((d) => d.name);

    const first = await applyMigrations(databaseUrl(db));
    expect(first.map((p) => p.split('/').pop()).sort()).toEqual(dirs.sort());
    expect(await applyMigrations(databaseUrl(db))).toEqual([]);

    const tables = (await query<{ tablename: string }>(db, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")).map(
      (r) => r.tablename,
    );
    for (const table of [
      'trial_requests',
      'trial_verifications',
      'webhooks',
      'root_servers',
      'action_logs',
      'encryption_keys',
      'messages',
    ]) {
      expect(tables).toContain(table);
    }
    const recorded = await query<{ migration_name: string; finished_at: Date | null }>(db, 'SELECT * FROM _prisma_migrations');
    expect(recorded).toHaveLength(dirs.length);
    expect(recorded.every((r) => r.finished_at !== null)).toBe(true);
    // Seeds of the first migration: the default company and the settings singleton.
    expect(await query(db, 'SELECT id FROM companies')).toEqual([{ id: 1 }]);
    expect(await query(db, 'SELECT keep_root_server_log_period, dns_resolver FROM settings')).toEqual([
      { keep_root_server_log_period: 2, dns_resolver: 'cloudflare' },
    ]);
  });

  it('concurrent starts apply each migration exactly once', async () => {
    const db = freshName('race');
    const results = await Promise.all([1, 2, 3, 4].map(() => applyMigrations(databaseUrl(db))));
    const applied = results.flat();
    const dirs = (await readdir(MIGRATIONS_DIR, { withFileTypes: true })).filter((d) => d.isDirectory());
    expect(applied).toHaveLength(dirs.length);
    const recorded = await query(db, 'SELECT migration_name FROM _prisma_migrations');
    expect(recorded).toHaveLength(dirs.length);
  });

  it('prisma/migrations matches prisma/schema.prisma (no pending diff)', async () => {
    const db = freshName('diff');
    expect(await pendingSchemaSql(databaseUrl(db))).toBe('');
  });

  it('the spec constraints are database constraints', async () => {
    const db = freshName('constraints');
    await applyMigrations(databaseUrl(db));
    const indexes = (await query<{ indexdef: string }>(db, "SELECT indexdef FROM pg_indexes WHERE schemaname = 'public'")).map(
      (r) => r.indexdef,
    );
    const unique = (fragment: string) => indexes.some((d) => d.startsWith('CREATE UNIQUE INDEX') && d.includes(fragment));
    expect(unique('ON public.trial_requests USING btree (email, trial_package_id)')).toBe(true);
    expect(unique('ON public.webhooks USING btree (token)')).toBe(true);
    expect(unique('ON public.root_servers USING btree (uuid)')).toBe(true);
    expect(unique('ON public.notification_servers USING btree (company_id, is_default)')).toBe(true);
    expect(unique('ON public.api_tokens USING btree (token_hash)')).toBe(true);
  });
});
