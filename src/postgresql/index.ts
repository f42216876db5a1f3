// PostgreSQL servers: connection settings and test_connection.
import type { Feature } from '../feature.js';
import { postgresqlServerModel } from './postgresql-models.js';
import { registerPostgresqlRoutes } from './postgresql-routes.js';

export const postgresql: Feature = {
  name: 'postgresql',
  models: [postgresqlServerModel],
  routes: registerPostgresqlRoutes,
};

// What other features use from this one: they import it from here, never from the files.
export { SYSTEM_DATABASES, clusterIdentifier, findDatabase, ownDatabase, sameDatabase } from './database-identity.js';
export type { DatabaseIdentity, FoundDatabase } from './database-identity.js';
export { dataDiskOf } from './data-disk.js';
export { connectPostgresqlServer, quoteIdent } from './postgresql-connection.js';
export type { PostgresqlServerRecord } from './postgresql-connection.js';
export { sessionOptions } from './session-settings.js';
export { scramVerifier } from './role-password.js';
