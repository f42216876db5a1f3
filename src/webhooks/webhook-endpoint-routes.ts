// POST /svc/webhook/<token>: public (the token is the secret), CSRF-exempt (no cookie is used).
// Registered in its own scope so its content-type parser keeps the raw body for the signature
// and its error handler answers every failure in the spec's shape, never with internals.
import type { FastifyInstance } from 'fastify';
import { clientIp } from '../core/http/client-ip.js';
import { UNKNOWN_ERROR, type WebhookCallService } from './webhook-call-service.js';

const BODY_LIMIT = 1024 * 1024;

export async function registerWebhookEndpoint(parent: FastifyInstance, service: WebhookCallService) {
  await parent.register(async (app) => {
    // Any content type: the body is kept as bytes and parsed as JSON by the service.
    app.removeAllContentTypeParsers();
    app.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: BODY_LIMIT }, (_req, body, done) => done(null, body));

    app.setErrorHandler((err: Error & { statusCode?: number }, req, reply) => {
      const status = err.statusCode ?? 500;
      if (status >= 400 && status < 500) return reply.code(status).send({ error: 'Bad request' });
      req.log.error({ err }, 'webhook endpoint failed');
      return reply.code(500).send(UNKNOWN_ERROR);
    });

    const config = { group: 'public' as const };

    app.post<{ Params: { token: string } }>('/svc/webhook/:token', { config }, async (req, reply) => {
      const answer = await service.handle({
        token: req.params.token,
        rawBody: Buffer.isBuffer(req.body) ? req.body : undefined,
        signature: req.headers['x-hub-signature-256'],
        sourceIp: clientIp(req),
      });
      return reply.code(answer.status).send(answer.body);
    });

    // Any other shape under /svc/webhook/ matches no webhook either (DESIGN §8).
    app.post('/svc/webhook/*', { config }, async (_req, reply) => reply.code(400).send({ error: 'Unknown webhook' }));
  });
}
