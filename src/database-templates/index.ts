// Database templates: the databases customer databases are copied from.
import type { Feature } from '../feature.js';
import { databaseTemplateModel } from './database-template-models.js';
import { registerDatabaseTemplateRoutes } from './database-template-routes.js';

export const databaseTemplates: Feature = {
  name: 'database-templates',
  models: [databaseTemplateModel],
  routes: registerDatabaseTemplateRoutes,
};
