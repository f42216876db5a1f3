// GET /healthz.
import type { Feature } from '../feature.js';
import { registerHealthRoutes } from './health-routes.js';

export const health: Feature = {
  name: 'health',
  routes: registerHealthRoutes,
};
