// The one mapping of errors to HTTP: {"error": {"code", "message", "details"}}. A validation_error
// names its fields in details.fields ([{field, message}]), a reference to a missing record
// included; a uniqueness conflict names the fields of the violated index (and the existing record
// when the service knows it); a 500 never carries internals.
import type { FastifyError, FastifyInstance } from 'fastify';
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import { isBadValueError, isDatabaseUnavailable, Prisma, violatedIndexOf } from '../db.js';
import { AppError, type FieldError, RateLimitedError, ServiceUnavailableError } from '../errors.js';
import { isRedisUnavailable } from '../redis.js';

function body(code: string, message: string, details?: unknown) {
  return { error: { code, message, ...(details === undefined ? {} : { details }) } };
}

/** `partners_email_key` → `email`: the index's fields as far as its name tells. */
function fieldsOfIndex(index: string | null, table: string | undefined): FieldError[] {
  if (!index) return [];
  const name = index.replace(/_(key|idx)$/, '');
  const field = table && name.startsWith(`${table}_`) ? name.slice(table.length + 1) : name;
  return [{ field, message: 'already used by another record' }];
}

/**
 * The body fields a violated foreign key names: Prisma calls it `<table>_<column>_fkey`, and the
 * column is the body field that holds the missing id.
 */
function fieldsOfForeignKey(err: Prisma.PrismaClientKnownRequestError, requestBody: unknown): FieldError[] {
  const constraint = (err.meta as { driverAdapterError?: { cause?: { constraint?: { index?: string } } } } | undefined)?.driverAdapterError
    ?.cause?.constraint?.index;
  if (!constraint || !requestBody || typeof requestBody !== 'object') return [];
  return Object.keys(requestBody)
    .filter((key) => constraint.endsWith(`_${key}_fkey`))
    .map((key) => ({ field: `body.${key}`, message: 'names no existing record' }));
}

/** The answer to a body that is not JSON (415): the API takes nothing else. */
export function notJsonError(): AppError {
  const message = 'The body must be JSON: send it with Content-Type: application/json';
  return new AppError(415, 'validation_error', message, { fields: [{ field: 'body', message }] });
}

/** Prisma's known errors that are the caller's doing; `method` tells a delete from a write. */
function fromPrisma(err: Prisma.PrismaClientKnownRequestError, method: string, requestBody: unknown) {
  switch (err.code) {
    case 'P2002': {
      const table = (err.meta as { driverAdapterError?: { cause?: { table?: string } } } | undefined)?.driverAdapterError?.cause?.table;
      return {
        status: 409,
        ...body('conflict', 'A record with these values already exists', { fields: fieldsOfIndex(violatedIndexOf(err), table) }),
      };
    }
    case 'P2003': {
      // A delete of a record others refer to is a conflict; a write naming a missing record is bad input.
      if (method === 'DELETE') return { status: 409, ...body('conflict', 'This record is still in use by other records') };
      const fields = fieldsOfForeignKey(err, requestBody);
      const message =
        fields.length === 1 ? `Invalid input: ${fields[0]!.field} names no existing record` : 'A referenced record does not exist';
      return { status: 400, ...body('validation_error', message, { fields }) };
    }
    case 'P2025':
      return { status: 404, ...body('not_found', 'Record not found') };
    default:
      return null;
  }
}

export function registerErrorHandler(app: FastifyInstance) {
  app.setErrorHandler((err: FastifyError, request, reply) => {
    // PostgreSQL or Redis away for a moment (a failover): 503 with Retry-After, never a 500 (and
    // never a success: the error stopped the request before it answered).
    const unavailable = isDatabaseUnavailable(err) || isRedisUnavailable(err);
    if (unavailable) {
      request.log.warn({ err }, 'a dependency is unavailable: answered 503');
      const busy = new ServiceUnavailableError();
      reply.header('Retry-After', String(busy.retryAfterSeconds));
      return reply.status(busy.statusCode).send(body(busy.code, busy.message));
    }
    if (err instanceof AppError) {
      if ((err instanceof RateLimitedError || err instanceof ServiceUnavailableError) && err.retryAfterSeconds) {
        reply.header('Retry-After', String(err.retryAfterSeconds));
      }
      return reply.status(err.statusCode).send(body(err.code, err.message, err.details));
    }
    if (hasZodFastifySchemaValidationErrors(err)) {
      const fields = err.validation.flatMap((v) => {
        const at = [err.validationContext, ...v.instancePath.split('/').filter(Boolean)].join('.');
        // An unknown parameter or field is named by itself, not by its parent.
        if (v.keyword === 'unrecognized_keys') {
          return ((v.params as { keys?: string[] }).keys ?? []).map((key) => ({
            field: `${at}.${key}`,
            message: 'is not a known parameter or field',
          }));
        }
        return [{ field: at, message: v.message }];
      });
      const message = fields.length === 1 ? `Invalid input: ${fields[0]!.field} ${fields[0]!.message}` : 'Invalid input';
      return reply.status(400).send(body('validation_error', message, { fields }));
    }
    if (err instanceof Prisma.PrismaClientKnownRequestError) {
      const mapped = fromPrisma(err, request.method, request.body);
      if (mapped) return reply.status(mapped.status).send({ error: mapped.error });
    }
    if (isBadValueError(err)) {
      // A value the schemas let through but the database cannot hold: still the caller's input.
      request.log.warn({ err }, 'database refused a value');
      return reply.status(400).send(body('validation_error', 'A value is out of range or not valid text', { fields: [] }));
    }
    const status = err.statusCode ?? 500;
    if (status >= 400 && status < 500) {
      // Fastify's own client errors: bad JSON, wrong content type, body too large...
      if (status === 404) return reply.status(404).send(body('not_found', err.message));
      if (status === 429) return reply.status(429).send(body('rate_limited', err.message));
      if (err.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
        const notJson = notJsonError();
        return reply.status(notJson.statusCode).send(body(notJson.code, notJson.message, notJson.details));
      }
      return reply.status(status).send(body('validation_error', err.message, { fields: [{ field: 'body', message: err.message }] }));
    }
    request.log.error({ err }, 'unhandled error');
    return reply.status(500).send(body('internal_error', 'Internal server error'));
  });

  app.setNotFoundHandler((request, reply) => {
    reply.status(404).send(body('not_found', `Route ${request.method} ${request.url.split('?')[0]} not found`));
  });
}
