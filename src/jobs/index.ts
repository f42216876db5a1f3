// Background jobs as the API shows them, and what happens to them after a crash.
import type { Feature } from '../feature.js';
import { registerJobRoutes } from './job-routes.js';

export const jobs: Feature = {
  name: 'jobs',
  routes: registerJobRoutes,
};

// What other features use from this one: they import it from here, never from the files.
export { INTERRUPTED, LOST_WITH_REDIS, recordInterruption } from './job-interruption.js';
export { createJobService } from './job-service.js';
