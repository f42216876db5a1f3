// Users, groups and API tokens (DESIGN §3).
import type { Feature } from '../feature.js';
import { userModel } from './auth-models.js';
import { registerAuthRoutes } from './auth-routes.js';

export const auth: Feature = {
  name: 'auth',
  models: [userModel],
  routes: registerAuthRoutes,
};
