// POST /svc/webhook/<token>: public (the token is the secret), CSRF-exempt (no cookie is used).
// Registered in its own scope so its content-type parser keeps the raw body for the signature
// and its error handler answers every failure in the spec's shape, never with internals.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { MessageType, SUBTYPES } from '../core/chatter.js';
import { clientIp } from '../core/http/client-ip.js';
import { RETRY_AFTER_SECONDS, UNAVAILABLE, UNKNOWN_ERROR, type WebhookCallService } from './webhook-call-service.js';

const BODY_LIMIT = 1024 * 1024;

// The endpoint's answers: its own shape (the reference module's), not the REST API's error shape.
const DONE = z.object({}).strict().meta({ example: {} });
const callError = (example: string) => z.object({ error: z.string() }).meta({ example: { error: example } });

export async function registerWebhookEndpoint(parent: FastifyInstance, service: WebhookCallService) {
  await parent.register(async (app) => {
    // Any content type: the body is kept as bytes and parsed as JSON by the service. JSON, the
    // usual one, is also named: Fastify caches the parser found for a named type, while the
    // catch-all is looked up again, its Content-Type parsed, on every call (1.5 µs in the CPU profile of bench:webhook).
    app.removeAllContentTypeParsers();
    const keepBytes = { parseAs: 'buffer', bodyLimit: BODY_LIMIT } as const;
    const asBytes = (_req: unknown, body: Buffer, done: (err: null, body: Buffer) => void) => done(null, body);
    app.addContentTypeParser('application/json', keepBytes, asBytes);
    app.addContentTypeParser('*', keepBytes, asBytes);

    app.setErrorHandler((err: Error & { statusCode?: number }, req, reply) => {
      // Every client error is a 400: an oversized body to an unknown token must not
      // answer differently from any other call to an unknown token (413 would tell it apart).
      const status = err.statusCode ?? 500;
      if (status >= 400 && status < 500) return reply.code(400).send({ error: 'Bad request' });
      req.log.error({ err }, 'webhook endpoint failed');
      return reply.code(500).send(UNKNOWN_ERROR);
    });

    const config = { group: 'public' as const };

    const endpoint = {
      schema: {
        tags: ['inbound webhooks'],
        operationId: 'webhooks.call',
        summary: 'Call a webhook',
        description:
          "Runs the webhook's trigger_action on its record and posts `message` to the record's chatter. The token in the path is the secret. " +
          'When the webhook has a signing secret, X-Hub-Signature-256: sha256=<HMAC-SHA256 of the raw body> is required. ' +
          'A call that runs a trigger_action may name its delivery (Idempotency-Key, else X-GitHub-Delivery: 1 to 255 visible ASCII characters): ' +
          'a retry of a delivery already stored runs nothing and answers 200.',
      },
      config: {
        ...config,
        openapi: {
          params: z.object({
            token: z
              .string()
              .describe("The webhook's token (64 hex characters): GET /api/v1/webhooks/{id} shows it")
              .meta({ example: 'ab'.repeat(32) }),
          }),
          body: z
            .object({
              message: z.string().optional(),
              message_type: z.enum(MessageType).optional(),
              subtype_xmlid: z.enum(SUBTYPES).optional(),
            })
            .meta({ example: { message: 'Backup of acme_prod done', message_type: 'notification', subtype_xmlid: 'mail.mt_note' } }),
          responses: {
            200: { description: 'Done: trigger_action called (if any) and message posted (if any), as one transaction', body: DONE },
            400: {
              description:
                'Nothing ran: "Unknown webhook" (no active webhook has this token), "Invalid signature", "Invalid body: …", "Invalid delivery id: …" ' +
                '(not a JSON object, wrong types, message too long) or "Bad request" (e.g. a body over 1 MiB; an oversized call to ' +
                'an unknown token must not answer differently from any other)',
              body: callError('Unknown webhook'),
            },
            500: {
              description:
                'The method failed, the target record is gone or its trigger_action is no longer callable; details go to the log',
              body: callError(UNKNOWN_ERROR.error),
            },
            503: {
              description:
                `Not stored: the service's database (or Redis) is unavailable for a moment, e.g. during a failover. Send the same call again after Retry-After seconds (${RETRY_AFTER_SECONDS}); ` +
                'a 200 is only ever answered for a call that was stored',
              body: callError(UNAVAILABLE.error),
            },
          },
        },
      },
    };
    app.post<{ Params: { token: string } }>('/svc/webhook/:token', endpoint, async (req, reply) => {
      const answer = await service.handle({
        token: req.params.token,
        rawBody: Buffer.isBuffer(req.body) ? req.body : undefined,
        signature: req.headers['x-hub-signature-256'],
        delivery: req.headers['idempotency-key'] ?? req.headers['x-github-delivery'],
        sourceIp: clientIp(req),
      });
      // The body is returned, not `reply.send()`: an async handler that returns the reply makes its
      // promise wait on the reply (a thenable) until the response has been written, per call.
      reply.code(answer.status);
      if (answer.retryAfter) reply.header('Retry-After', String(answer.retryAfter));
      return answer.body;
    });

    // Any other shape under /svc/webhook/ matches no webhook either.
    app.post('/svc/webhook/*', { config, schema: { hide: true } }, async (_req, reply) =>
      reply.code(400).send({ error: 'Unknown webhook' }),
    );
  });
}
