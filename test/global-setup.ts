// Once per `npm test`: a template database with every migration applied. Each test file clones it
// (CREATE DATABASE ... TEMPLATE), and everything this run created is dropped at the end.
import type { TestProject } from 'vitest/node';
import { applyMigrations } from '../src/core/migrate.js';
import { adminQuery, databaseUrl, dropDatabase } from './helpers/pg.js';

declare module 'vitest' {
  export interface ProvidedContext {
    dbRun: string;
  }
}

export default async function setup(project: TestProject) {
  const run = `svc_test_${Date.now().toString(36)}_${process.pid}`;
  await applyMigrations(databaseUrl(`${run}_tpl`));
  project.provide('dbRun', run);

  return async () => {
    const rows = await adminQuery<{ datname: string }>('SELECT datname FROM pg_database WHERE datname LIKE $1', [`${run}%`]);
    for (const { datname } of rows) await dropDatabase(datname);
  };
}
