// Input every route refuses the same way, in one place: U+0000 in any string (PostgreSQL text
// cannot hold it), query parameters a route does not know, and a body sent to a POST that takes
// none (each a 400 naming the field); and an API body that is not JSON (415: a form-encoded body,
// curl -d's default, would otherwise be read as a field named after the whole JSON text).
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { ValidationError } from '../errors.js';
import { API_PREFIX } from './auth.js';
import { notJsonError } from './error-handler.js';

const NUL = '\u0000';

/** Where in `value` the first string holding a NUL is, e.g. ".contacts.0.name" ("" for `value` itself), or null. */
function nulIn(value: unknown, depth: number): string | null {
  if (typeof value === 'string') return value.includes(NUL) ? '' : null;
  if (depth > 32 || value === null || typeof value !== 'object' || Buffer.isBuffer(value)) return null;
  // The path is built only for a NUL found: every request passes here (bench:webhook).
  for (const key of Object.keys(value)) {
    if (key.includes(NUL)) return `.${key.replaceAll(NUL, '\\0')}`;
    const found = nulIn((value as Record<string, unknown>)[key], depth + 1);
    if (found !== null) return `.${key}${found}`;
  }
  return null;
}

/** The path of the first string holding a NUL, e.g. "body.contacts.0.name", or null. */
function findNul(value: unknown, path: string): string | null {
  const at = nulIn(value, 0);
  return at === null ? null : `${path}${at}`;
}

/** True for `application/json`, parameters (charset) or not. */
function isJson(contentType: string): boolean {
  return contentType.split(';')[0]!.trim().toLowerCase() === 'application/json';
}

export function registerInputGuards(app: FastifyInstance) {
  // A callback hook, not an async one: every request passes here, and a promise per request is
  // measurable on the webhook endpoint (bench:webhook).
  app.addHook('preValidation', (req, _reply, done) => {
    const type = req.headers['content-type'];
    if (req.url.startsWith(API_PREFIX) && req.body !== undefined && type !== undefined && !isJson(type)) return done(notJsonError());
    const field = findNul(req.params, 'params') ?? findNul(req.query, 'query') ?? findNul(req.body, 'body');
    if (field) return done(new ValidationError('Invalid input', [{ field, message: 'must not contain NUL characters' }]));
    done();
  });

  app.addHook('onRoute', (route) => {
    if (!route.url.startsWith(API_PREFIX)) return;
    // A REST route that declares no query parameters takes none: `?name=x` is refused, not ignored.
    if (!route.schema?.querystring) route.schema = { ...route.schema, querystring: z.object({}).strict() };
    // A POST without a body schema (an action without parameters) takes no body, or an empty one.
    const methods = [route.method].flat();
    if (methods.includes('POST') && !route.schema?.body) {
      route.preValidation = [...[route.preValidation ?? []].flat(), async (req) => refuseBody(req.body)];
    }
  });
}

function refuseBody(body: unknown) {
  if (body === undefined || body === null) return;
  const fields = typeof body === 'object' && !Array.isArray(body) ? Object.keys(body) : [''];
  if (fields.length === 0) return;
  throw new ValidationError(
    'This action takes no parameters',
    fields.map((f) => ({ field: f ? `body.${f}` : 'body', message: 'not a parameter of this action' })),
  );
}
