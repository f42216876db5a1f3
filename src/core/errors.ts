// One error family; src/core/http/error-handler.ts maps it to the API's error shape and status codes.

export class AppError extends Error {
  constructor(
    readonly statusCode: number,
    readonly code: string,
    message: string,
    readonly details?: unknown,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/** What is wrong with one field of the input. */
export interface FieldError {
  field: string;
  message: string;
}

/** Bad input; the spec's ValidationError. Its details always name the fields. */
export class ValidationError extends AppError {
  constructor(message: string, fields: string | readonly FieldError[] = [], extra: Record<string, unknown> = {}) {
    super(400, 'validation_error', message, { fields: typeof fields === 'string' ? [{ field: fields, message }] : fields, ...extra });
  }
}

/** An operation that cannot be done as asked, message meant for the user (spec UserError). */
export class UserError extends AppError {
  constructor(message: string, details?: unknown) {
    super(400, 'user_error', message, details);
  }
}

export class UnauthenticatedError extends AppError {
  constructor(message = 'Missing or invalid bearer token') {
    super(401, 'unauthenticated', message);
  }
}

export class ForbiddenError extends AppError {
  constructor(message = 'Your group may not do this') {
    super(403, 'forbidden', message);
  }
}

export class NotFoundError extends AppError {
  constructor(what = 'Record') {
    super(404, 'not_found', `${what} not found`);
  }
}

/**
 * A uniqueness rule of the spec (details name the fields and, when known, the existing record),
 * or a state that forbids the operation.
 */
export class ConflictError extends AppError {
  constructor(message: string, details?: { fields?: readonly FieldError[]; existing_id?: number; state?: string }) {
    super(409, 'conflict', message, details);
  }
}

/** A conditional write (If-Match) whose condition does not hold for the record as it is. */
export class PreconditionFailedError extends AppError {
  constructor(
    message = 'The record changed since you read it: If-Match does not name its present ETag. GET it again and repeat the change if it still applies',
  ) {
    super(412, 'precondition_failed', message);
  }
}

export class RateLimitedError extends AppError {
  constructor(
    message: string,
    readonly retryAfterSeconds?: number,
  ) {
    super(429, 'rate_limited', message);
  }
}

/**
 * PostgreSQL or Redis cannot be reached for a moment (a failover, a restart): nothing was done
 * that the caller may count on; the same request may be sent again after `retryAfterSeconds`.
 */
export class ServiceUnavailableError extends AppError {
  constructor(
    message = 'The service cannot reach its database or Redis for a moment (a failover or a restart): nothing was done; send the request again after Retry-After seconds',
    readonly retryAfterSeconds = 5,
  ) {
    super(503, 'unavailable', message);
  }
}
