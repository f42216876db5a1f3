// The self-hosted push server's HTTP API (ntfy): health, publish, the admin account
// check and token creation, through the one outbound client.
import { z } from 'zod';
import { UserError } from '../core/errors.js';
import { joinUrl } from '../core/outbound-fields.js';
import type { OutboundHttp } from '../core/outbound-http.js';
import type { OutboundTarget } from '../core/outbound-log.js';
import { readJson } from '../core/outbound-read-json.js';

export type NtfyAuth = { kind: 'basic'; username: string; password: string } | { kind: 'bearer'; token: string } | null;

export interface NtfyMessage {
  topic: string;
  title: string;
  message: string;
  priority: number;
}

/** Basic auth as RFC 7617 defines it for UTF-8 (what ntfy compares): any username and password can be sent. */
function authHeader(auth: NtfyAuth): Record<string, string> {
  if (!auth) return {};
  if (auth.kind === 'bearer') return { Authorization: `Bearer ${auth.token}` };
  return { Authorization: `Basic ${Buffer.from(`${auth.username}:${auth.password}`).toString('base64')}` };
}

const secretsOf = (auth: NtfyAuth) => (!auth ? [] : auth.kind === 'bearer' ? [auth.token] : [auth.password]);

const REFUSED = 'The push server refused the credentials';
const reader = <T extends z.ZodType>(schema: T, what: string) => readJson(schema, { refused: REFUSED, what });

export function createNtfyClient(http: OutboundHttp) {
  return {
    async health(base: string, target: OutboundTarget): Promise<void> {
      const answer = await http.request(
        target,
        { url: joinUrl(base, '/v1/health') },
        { read: reader(z.object({ healthy: z.boolean() }), 'The health answer') },
      );
      if (!answer.healthy) throw new UserError(`The push server at ${base} reports that it is not healthy`);
    },

    /** GET /v1/account with Basic auth: the account the credentials log into. */
    async account(base: string, auth: NtfyAuth & { kind: 'basic' }, target: OutboundTarget) {
      const account = await http.request(
        target,
        { url: joinUrl(base, '/v1/account'), headers: authHeader(auth) },
        { secrets: secretsOf(auth), read: reader(z.object({ username: z.string(), role: z.string().optional() }).loose(), 'The account') },
      );
      // ntfy answers anonymous callers too (username "*"): only the named account proves the credentials.
      if (account.username !== auth.username) {
        throw new UserError(`The push server did not accept the credentials of ${auth.username} (it answered as "${account.username}")`);
      }
      return { username: account.username, role: account.role ?? null };
    },

    async publish(base: string, auth: NtfyAuth, message: NtfyMessage, target: OutboundTarget) {
      const answer = await http.request(
        target,
        { method: 'POST', url: joinUrl(base, '/'), headers: authHeader(auth), json: message },
        { secrets: secretsOf(auth), read: reader(z.object({ id: z.string() }).loose(), 'The publish answer') },
      );
      return { id: answer.id };
    },

    /** POST /v1/account/token with the admin's Basic auth; `expires` is a Unix time in seconds. */
    async createToken(base: string, auth: NtfyAuth & { kind: 'basic' }, label: string, expires: number, target: OutboundTarget) {
      const answer = await http.request(
        target,
        { method: 'POST', url: joinUrl(base, '/v1/account/token'), headers: authHeader(auth), json: { label, expires } },
        { secrets: [auth.password], read: reader(z.object({ token: z.string().min(1) }).loose(), 'The token answer') },
      );
      return answer.token;
    },
  };
}
