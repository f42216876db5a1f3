import type { FastifyRequest } from 'fastify';

/**
 * The client address: the socket's, or X-Forwarded-For's when TRUST_PROXY lists the peer (Fastify's
 * trustProxy). IPv4 clients of a dual-stack socket are written without the `::ffff:` prefix.
 */
export function clientIp(request: FastifyRequest): string {
  const ip = request.ip;
  return ip.startsWith('::ffff:') ? ip.replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/, '') : ip;
}
