// The one mapping of errors to HTTP (DESIGN §4): {"error": {"code", "message", "details"}}.
import type { FastifyError, FastifyInstance } from 'fastify';
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import { Prisma } from '../db.js';
import { AppError, RateLimitedError } from '../errors.js';

function body(code: string, message: string, details?: unknown) {
  return { error: { code, message, ...(details === undefined ? {} : { details }) } };
}

/** Prisma's known errors that are the caller's doing. */
function fromPrisma(err: Prisma.PrismaClientKnownRequestError) {
  switch (err.code) {
    case 'P2002': {
      const target = (err.meta as { target?: unknown } | undefined)?.target;
      return { status: 409, ...body('conflict', 'A record with these values already exists', { fields: target }) };
    }
    case 'P2003':
      return { status: 400, ...body('validation_error', 'A referenced record does not exist or is still in use') };
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
      const details = err.validation.map((v) => ({
        field: [err.validationContext, ...v.instancePath.split('/').filter(Boolean)].join('.'),
        message: v.message,
      }));
      return reply.status(400).send(body('validation_error', 'Invalid input', details));
    }
    if (err instanceof Prisma.PrismaClientKnownRequestError) {
      const mapped = fromPrisma(err);
      if (mapped) return reply.status(mapped.status).send({ error: mapped.error });
    }
    const status = err.statusCode ?? 500;
    if (status >= 400 && status < 500) {
      // Fastify's own client errors: bad JSON, wrong content type, body too large...
      const code = status === 404 ? 'not_found' : status === 429 ? 'rate_limited' : 'validation_error';
      return reply.status(status).send(body(code, err.message));
    }
    request.log.error({ err }, 'unhandled error');
    return reply.status(500).send(body('internal_error', 'Internal server error'));
  });

  app.setNotFoundHandler((request, reply) => {
    reply.status(404).send(body('not_found', `Route ${request.method} ${request.url.split('?')[0]} not found`));
  });
}
