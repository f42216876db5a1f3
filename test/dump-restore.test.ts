// pg_dump | pg_restore (staging copies, moves) on the real PostgreSQL: a restore that stops early (a
// tenant's CHECK that fails on the target, a target that refuses the connection) ends the copy with
// pg_restore's reason, instead of leaving pg_dump blocked on a pipe nobody reads any more.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { dumpAndRestore } from '../src/instances/index.js';
import { useTestApp } from './helpers/app.js';
import { adminQuery, dropDatabase } from './helpers/pg.js';
import { queryIn } from './helpers/odoo-template.js';

const t = useTestApp();
let source: string;

beforeAll(async () => {
  source = `${t.ctx.dbName}_dump_src`;
  await adminQuery(`CREATE DATABASE "${source}"`);
  // Far more than a pipe holds: pg_dump is still writing when pg_restore gives up.
  await queryIn(source, "CREATE TABLE big AS SELECT g AS id, repeat('x', 200) AS filler FROM generate_series(1, 100000) g");
});
afterAll(async () => {
  if (source) await dropDatabase(source);
});

it('a pg_restore that stops at once ends pg_dump too, and the copy fails saying why', async () => {
  const conn = { host: '127.0.0.1', port: 5432, user: 'postgres', password: null };
  await expect(dumpAndRestore(conn, conn, source, `${t.ctx.dbName}_no_such_target`, 10 * 60_000, process.env.PATH ?? '')).rejects.toThrow(
    /pg_restore .*does not exist/s,
  );
});
