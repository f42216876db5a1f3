// The one mapping of errors to HTTP (DESIGN §4, §11): {"error": {"code", "message", "details"}}.
// A validation_error names its fields in details.fields ([{field, message}]); a uniqueness
// conflict names the fields of the violated index (and the existing record when the service
// knows it); a 500 never carries internals.
import type { FastifyError, FastifyInstance } from 'fastify';
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import { isBadValueError, Prisma, violatedIndexOf } from '../db.js';
import { AppError, type FieldError, RateLimitedError } from '../errors.js';

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

/** Prisma's known errors that are the caller's doing; `method` tells a delete from a write. */
function fromPrisma(err: Prisma.PrismaClientKnownRequestError, method: string) {
  switch (err.code) {
    case 'P2002': {
      const table = (err.meta as { driverAdapterError?: { cause?: { table?: string } } } | undefined)?.driverAdapterError?.cause?.table;
      return {
        status: 409,
        ...body('conflict', 'A record with these values already exists', { fields: fieldsOfIndex(violatedIndexOf(err), table) }),
      };
    }
    case 'P2003':
      // A delete of a record others refer to is a conflict; a write naming a missing record is bad input.
      return method === 'DELETE'
        ? { status: 409, ...body('conflict', 'This record is still in use by other records') }
        : { status: 400, ...body('validation_error', 'A referenced record does not exist', { fields: [] }) };
    case 'P2025':
      return { status: 404, ...body('not_found', 'Record not found') };
    default:
      return null;
  }
}

export function registerErrorHandler(app: FastifyInstance) {
  app.setErrorHandler((err: FastifyError, request, reply) => {
    if (err instanceof AppError) {
      if (err instanceof RateLimitedError && err.retryAfterSeconds) {
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
      const mapped = fromPrisma(err, request.method);
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
      return reply.status(status).send(body('validation_error', err.message, { fields: [{ field: 'body', message: err.message }] }));
    }
    request.log.error({ err }, 'unhandled error');
    return reply.status(500).send(body('internal_error', 'Internal server error'));
  });

  app.setNotFoundHandler((request, reply) => {
    reply.status(404).send(body('not_found', `Route ${request.method} ${request.url.split('?')[0]} not found`));
  });
}
