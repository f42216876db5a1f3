// Users, groups and API tokens.
import type { Feature } from '../feature.js';
import { userModel } from './auth-models.js';
import { registerAuthRoutes } from './auth-routes.js';

export const auth: Feature = {
  name: 'auth',
  models: [userModel],
  routes: registerAuthRoutes,
};

// What other features use from this one: they import it from here, never from the files.
export { hashApiToken } from './api-token.js';
export { createAuthService } from './auth-service.js';
