// The action log's routes (spec §2.12).
import type { Feature } from '../feature.js';
import { registerActionLogRoutes } from './action-log-routes.js';

export const actionLog: Feature = {
  name: 'action-log',
  routes: registerActionLogRoutes,
};
