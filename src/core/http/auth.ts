// Bearer authentication and the per-route minimum group. Every /api/v1 route must declare
// `config.group`; registering one without it fails at start-up rather than leaving it open.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { groupAllows, type UserGroup } from '../../auth/groups.js';
import type { AuthService, AuthUser } from '../../auth/auth-service.js';
import { ForbiddenError, UnauthenticatedError } from '../errors.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Minimum group for the route; 'public' for routes without authentication. */
    group?: UserGroup | 'public';
  }
  interface FastifyRequest {
    user: AuthUser | null;
  }
}

const API_PREFIX = '/api/v1';

export function registerAuth(app: FastifyInstance, auth: AuthService) {
  app.decorateRequest('user', null);

  app.addHook('onRoute', (route) => {
    if (route.url.startsWith(API_PREFIX) && !route.config?.group) {
      throw new Error(`Route ${route.method} ${route.url} declares no group`);
    }
  });

  app.addHook('onRequest', async (request: FastifyRequest) => {
    const group = request.routeOptions.config?.group;
    if (!group || group === 'public') return;
    const header = request.headers.authorization ?? '';
    const match = /^Bearer\s+(\S+)$/i.exec(header);
    if (!match) throw new UnauthenticatedError();
    request.user = await auth.authenticate(match[1]!);
    if (!groupAllows(request.user.group, group)) throw new ForbiddenError(`This needs the ${group} group`);
  });
}

/** The authenticated user of a route that declared a group. */
export function actor(request: FastifyRequest): AuthUser {
  if (!request.user) throw new UnauthenticatedError();
  return request.user;
}
