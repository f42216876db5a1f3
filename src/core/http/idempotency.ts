// Idempotency-Key on POST: a client that is not sure its POST arrived (a timeout, a
// dropped connection) sends it again with the same key; the same key, user and route within 24
// hours answers the first answer again, without doing the work twice. The same key with another
// body is a 409, and so is a second request while the first is still being answered. Kept in
// Redis, so every API process sees the same keys; the kept answer is encrypted, as it may hold a
// secret shown once (a new API token).
import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Redis } from 'ioredis';
import type { SecretBox } from '../crypto.js';
import { ConflictError, ValidationError } from '../errors.js';

const HEADER = 'idempotency-key';
const TTL_SECONDS = 24 * 3600;
/** How long a request may take to be answered before its key may be used again (a crash mid-way). */
const PENDING_SECONDS = 300;
const KEY_FORMAT = /^[\x21-\x7e]{1,255}$/;

interface Stored {
  state: 'pending' | 'done';
  body: string;
  status?: number;
  /** The answer's body, encrypted. */
  payload?: string;
  contentType?: string;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The Redis key this request reserved and its body's hash, to store its answer under. */
    idempotency: { key: string; body: string } | null;
  }
}

export function registerIdempotency(app: FastifyInstance, redis: Redis, secretBox: SecretBox, prefix: string) {
  app.decorateRequest('idempotency', null);

  const bodyHash = (req: FastifyRequest) =>
    createHash('sha256')
      .update(JSON.stringify(req.body ?? null))
      .digest('hex');

  const reserve = async (req: FastifyRequest, reply: FastifyReply) => {
    const header = req.headers[HEADER];
    if (req.method !== 'POST' || header === undefined || !req.user) return;
    if (typeof header !== 'string' || !KEY_FORMAT.test(header)) {
      throw new ValidationError('Idempotency-Key must be 1 to 255 visible ASCII characters', 'headers.idempotency-key');
    }
    const path = req.url.split('?')[0];
    const key = `${prefix}:idempotency:${req.user.id}:${createHash('sha256').update(`${path}\n${header}`).digest('hex')}`;
    const body = bodyHash(req);
    const pending: Stored = { state: 'pending', body };
    if (await redis.set(key, JSON.stringify(pending), 'EX', PENDING_SECONDS, 'NX')) {
      req.idempotency = { key, body };
      return;
    }
    const stored = JSON.parse((await redis.get(key)) ?? 'null') as Stored | null;
    if (!stored) throw new ConflictError('This Idempotency-Key has just expired; send the request again');
    if (stored.body !== body) throw new ConflictError('This Idempotency-Key was used with another body on this route');
    if (stored.state === 'pending') throw new ConflictError('A request with this Idempotency-Key is still being answered');
    reply.header('idempotent-replayed', 'true');
    if (stored.contentType) reply.header('content-type', stored.contentType);
    return reply.status(stored.status!).send(await secretBox.decrypt(stored.payload!));
  };

  const keep = async (req: FastifyRequest, reply: FastifyReply, payload: unknown) => {
    if (!req.idempotency) return payload;
    const { key, body } = req.idempotency;
    req.idempotency = null;
    // A server error is not an answer to keep: the same key may try again.
    if (reply.statusCode >= 500 || typeof payload !== 'string') {
      await redis.del(key);
      return payload;
    }
    const done: Stored = {
      state: 'done',
      body,
      status: reply.statusCode,
      payload: await secretBox.encrypt(payload),
      contentType: String(reply.getHeader('content-type') ?? 'application/json; charset=utf-8'),
    };
    await redis.set(key, JSON.stringify(done), 'EX', TTL_SECONDS);
    return payload;
  };

  // Only POSTs of a signed-in user can hold a key: other routes (the public webhook endpoint
  // among them) carry neither hook.
  app.addHook('onRoute', (route) => {
    const group = route.config?.group;
    if (![route.method].flat().includes('POST') || !group || group === 'public') return;
    route.preHandler = [reserve, ...[route.preHandler ?? []].flat()];
    route.onSend = [keep, ...[route.onSend ?? []].flat()];
  });
}
