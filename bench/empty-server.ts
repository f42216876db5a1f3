// The ceiling for bench/webhook.ts: a Fastify server with the service's logger options and one
// empty POST route, in a process of its own like the service.
import Fastify, { type FastifyBaseLogger } from 'fastify';
import pino from 'pino';
import { loggerOptions } from '../src/core/logger.js';

const app = Fastify({ loggerInstance: pino(loggerOptions(process.env.LOG_LEVEL ?? 'warn')) as FastifyBaseLogger });
app.post('/empty', async () => ({}));
await app.listen({ port: Number(process.env.PORT), host: '127.0.0.1' });
