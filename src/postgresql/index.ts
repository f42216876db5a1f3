// PostgreSQL servers (spec §2.5): connection settings and test_connection.
import type { Feature } from '../feature.js';
import { postgresqlServerModel } from './postgresql-models.js';
import { registerPostgresqlRoutes } from './postgresql-routes.js';

export const postgresql: Feature = {
  name: 'postgresql',
  models: [postgresqlServerModel],
  routes: registerPostgresqlRoutes,
};
