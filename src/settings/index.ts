// Settings: the singleton, domain lookups, key rotation.
import type { Feature } from '../feature.js';
import { settingsModel } from './settings-models.js';
import { registerSettingsRoutes } from './settings-routes.js';
import { settingsJobHandlers } from './settings-jobs.js';

export const settings: Feature = {
  name: 'settings',
  models: [settingsModel],
  routes: registerSettingsRoutes,
  jobs: settingsJobHandlers,
};

// What other features use from this one: they import it from here, never from the files.
export { createDomainLookup } from './domain-lookup.js';
