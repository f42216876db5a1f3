// Once per `npm test`: a template database with every migration applied. Each test file clones it
// (CREATE DATABASE ... TEMPLATE), and everything this run created is dropped at the end: its svc
// databases and what they recorded as made on the cluster (cluster-cleanup.ts), also after a failure.
import type { TestProject } from 'vitest/node';
import { applyMigrations } from '../src/core/migrate.js';
import { clusterSnapshot, dropWhatWasMade } from './helpers/cluster-cleanup.js';
import { TENANT_ROLE } from './helpers/odoo-template.js';
import { adminQuery, databaseUrl } from './helpers/pg.js';

declare module 'vitest' {
  export interface ProvidedContext {
    dbRun: string;
  }
}

export default async function setup(project: TestProject) {
  const run = `svc_test_${Date.now().toString(36)}_${process.pid}`;
  const before = await clusterSnapshot();
  await applyMigrations(databaseUrl(`${run}_tpl`));
  project.provide('dbRun', run);

  return async () => {
    const rows = await adminQuery<{ datname: string }>('SELECT datname FROM pg_database WHERE datname LIKE $1', [`${run}%`]);
    // Files drop what they made when they end (createTestContext); this is for a file that could not.
    const problems = await dropWhatWasMade(
      rows.map((r) => r.datname),
      before,
    );
    // The tests' shared tenant role, unless it was there before (or a run beside this one still uses it).
    if (!before.roles.has(TENANT_ROLE)) {
      await adminQuery(`DROP ROLE IF EXISTS "${TENANT_ROLE}"`).catch((err: Error & { code?: string }) => {
        if (err.code !== '2BP01') problems.push(`role ${TENANT_ROLE}: ${err.message}`); // 2BP01: a run beside this one owns objects with it
      });
    }
    if (problems.length > 0) console.error(`The test run could not drop what it made on PostgreSQL:\n  ${problems.join('\n  ')}`);
  };
}
