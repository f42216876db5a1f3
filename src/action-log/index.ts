// The action log's routes.
import type { Feature } from '../feature.js';
import { registerActionLogRoutes } from './action-log-routes.js';

export const actionLog: Feature = {
  name: 'action-log',
  routes: registerActionLogRoutes,
};
