// Bearer authentication and the per-route minimum group. Every /api/v1 route must declare
// `config.group`; registering one without it fails at start-up rather than leaving it open.
// Who a token belongs to is the auth feature's business: it gives `authenticate`.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Author } from '../chatter.js';
import { ForbiddenError, UnauthenticatedError } from '../errors.js';
import { groupAllows, type UserGroup } from '../groups.js';

export interface AuthUser {
  id: number;
  email: string;
  group: UserGroup;
}

/** The active user owning a bearer token, or an UnauthenticatedError. */
export type Authenticate = (token: string) => Promise<AuthUser>;

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Minimum group for the route; 'public' for routes without authentication. */
    group?: UserGroup | 'public';
  }
  interface FastifyRequest {
    user: AuthUser | null;
  }
}

/** Routes under this prefix are the REST API: each declares its group, and their input is guarded. */
export const API_PREFIX = '/api/v1';

export function registerAuth(app: FastifyInstance, authenticate: Authenticate) {
  app.decorateRequest('user', null);

  // On the routes that need a user only, first of their onRequest hooks: a public route (the
  // webhook endpoint, at thousands of calls a second) pays nothing for it.
  app.addHook('onRoute', (route) => {
    const group = route.config?.group;
    if (route.url.startsWith(API_PREFIX) && !group) {
      throw new Error(`Route ${route.method} ${route.url} declares no group`);
    }
    if (!group || group === 'public') return;
    const check = async (request: FastifyRequest) => {
      const header = request.headers.authorization ?? '';
      const match = /^Bearer\s+(\S+)$/i.exec(header);
      if (!match) throw new UnauthenticatedError();
      request.user = await authenticate(match[1]!);
      if (!groupAllows(request.user.group, group)) throw new ForbiddenError(`This needs the ${group} group`);
    };
    route.onRequest = [check, ...[route.onRequest ?? []].flat()];
  });
}

/** The caller as the chatter and the action log name them (null on public routes). */
export function authorOf(user: AuthUser | null): Author | null {
  return user ? { id: user.id, name: user.email } : null;
}
