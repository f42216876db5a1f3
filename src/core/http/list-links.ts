// `Link: <…>; rel="next"` on every list answer that has a next page, whichever route made it: a
// list is recognised by its envelope ({items, total, limit, offset}). nextPageUrl() is the one place
// that knows how a list pages: by its next_cursor when the answer has one, else by offset (and by
// offset always for a route that says `paging: 'offset'`, whose next_cursor is always null).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { API_PREFIX } from './auth.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The list pages by offset only (its next_cursor is always null): Link names the next offset. */
    paging?: 'offset';
  }
}

/** A list answer as every list route gives it. */
interface ListAnswer {
  items: unknown[];
  total: number;
  limit: number;
  offset: number;
  /** The next page's ?cursor= (null on the last page), in answers of lists that page by cursor. */
  next_cursor?: string | null;
}

function isListAnswer(payload: unknown): payload is ListAnswer {
  const p = payload as Partial<ListAnswer> | null;
  return (
    typeof p === 'object' &&
    p !== null &&
    Array.isArray(p.items) &&
    typeof p.total === 'number' &&
    typeof p.limit === 'number' &&
    typeof p.offset === 'number'
  );
}

/**
 * The absolute URL of the page after `answer` (the request's own URL, its filters kept), or null
 * on the last page. `requestUrl` is the path and query the service received; `baseUrl` the public
 * BASE_URL, so a prefix added by a proxy in front is kept; `paging` the route's (its config).
 */
export function nextPageUrl(baseUrl: string, requestUrl: string, answer: ListAnswer, paging?: 'offset'): string | null {
  const url = new URL(`${baseUrl}${requestUrl}`);
  url.searchParams.set('limit', String(answer.limit));
  if (answer.next_cursor !== undefined && paging !== 'offset') {
    if (answer.next_cursor === null) return null;
    url.searchParams.delete('offset');
    url.searchParams.set('cursor', answer.next_cursor);
    return url.toString();
  }
  const offset = answer.offset + answer.limit;
  if (offset >= answer.total) return null;
  url.searchParams.set('offset', String(offset));
  return url.toString();
}

export function registerListLinks(app: FastifyInstance, baseUrl: string) {
  const link = async (req: FastifyRequest, reply: FastifyReply, payload: unknown) => {
    if (req.method !== 'GET' || reply.statusCode !== 200 || !isListAnswer(payload)) return payload;
    const next = nextPageUrl(baseUrl, req.url, payload, req.routeOptions.config.paging);
    if (next) reply.header('link', `<${next}>; rel="next"`);
    return payload;
  };
  // On the API's GET routes only: no other route answers a list.
  app.addHook('onRoute', (route) => {
    if (!route.url.startsWith(API_PREFIX) || ![route.method].flat().includes('GET')) return;
    route.preSerialization = [...[route.preSerialization ?? []].flat(), link];
  });
}
