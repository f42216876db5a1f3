// Cloud push (FCM). HTTP v1 with an OAuth2 access token obtained from the service account (a
// signed JWT posted to its token_uri) and cached until shortly before it expires; the legacy
// server-key API only when no service account is configured.
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { UserError } from '../core/errors.js';
import type { OutboundHttp } from '../core/outbound-http.js';
import type { OutboundTarget } from '../core/outbound-log.js';
import { readJson } from '../core/outbound-read-json.js';
import { parseServiceAccount, signAssertion } from './service-account.js';

/** A token is not reused in its last minute, so it cannot expire on the way to FCM. */
const EXPIRY_MARGIN_MS = 60_000;

export interface FcmCredentials {
  project_id: string | null;
  service_account_json: string | null;
  server_key: string | null;
}

export interface FcmMessage {
  title: string;
  message: string;
  priority: number;
  /** A device registration token; without one the message goes to `topic`. */
  token?: string;
  topic: string;
}

const reader = <T extends z.ZodType>(schema: T, what: string) =>
  readJson(schema, { refused: `${what}: the cloud push service refused the credentials`, what });

export function createFcmClient(http: OutboundHttp, apiUrl: string) {
  // Per process, keyed by a hash of the service account: a cache, not shared state (another
  // process simply fetches its own token).
  const tokens = new Map<string, { token: string; validUntil: number }>();

  async function accessToken(json: string, target: OutboundTarget): Promise<{ token: string; cacheKey: string }> {
    const cacheKey = createHash('sha256').update(json).digest('hex');
    const cached = tokens.get(cacheKey);
    if (cached && cached.validUntil > Date.now()) return { token: cached.token, cacheKey };

    const account = parseServiceAccount(json);
    const assertion = signAssertion(account);
    const answer = await http.request(
      target,
      { method: 'POST', url: account.token_uri, form: { grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer', assertion } },
      {
        secrets: [assertion],
        read: reader(z.object({ access_token: z.string().min(1), expires_in: z.coerce.number().positive().default(3600) }), 'OAuth2 token'),
      },
    );
    tokens.set(cacheKey, { token: answer.access_token, validUntil: Date.now() + answer.expires_in * 1000 - EXPIRY_MARGIN_MS });
    return { token: answer.access_token, cacheKey };
  }

  function projectOf(creds: FcmCredentials): string {
    const project = creds.project_id || (creds.service_account_json && parseServiceAccount(creds.service_account_json).project_id);
    if (!project) throw new UserError('No cloud push project: set fcm_project_id (or a service account with project_id)');
    return project;
  }

  async function sendV1(
    creds: FcmCredentials & { service_account_json: string },
    msg: FcmMessage,
    target: OutboundTarget,
    validateOnly: boolean,
  ) {
    const project = projectOf(creds);
    const { token, cacheKey } = await accessToken(creds.service_account_json, target);
    const body = {
      ...(validateOnly ? { validate_only: true } : {}),
      message: {
        ...(msg.token ? { token: msg.token } : { topic: msg.topic }),
        notification: { title: msg.title, body: msg.message },
        android: { priority: msg.priority >= 4 ? 'HIGH' : 'NORMAL' },
      },
    };
    const read = reader(z.object({ name: z.string() }), 'Cloud push');
    const answer = await http.request(
      target,
      {
        method: 'POST',
        url: `${apiUrl}/v1/projects/${encodeURIComponent(project)}/messages:send`,
        headers: { Authorization: `Bearer ${token}` },
        json: body,
      },
      {
        secrets: [token],
        read: (res) => {
          if (res.status === 401) tokens.delete(cacheKey); // a revoked token is not reused
          return read(res);
        },
      },
    );
    return { id: answer.name };
  }

  async function sendLegacy(serverKey: string, msg: FcmMessage, target: OutboundTarget, dryRun: boolean) {
    const answer = await http.request(
      target,
      {
        method: 'POST',
        url: `${apiUrl}/fcm/send`,
        headers: { Authorization: `key=${serverKey}` },
        json: {
          to: msg.token ?? `/topics/${msg.topic}`,
          notification: { title: msg.title, body: msg.message },
          priority: msg.priority >= 4 ? 'high' : 'normal',
          ...(dryRun ? { dry_run: true } : {}),
        },
      },
      {
        secrets: [serverKey],
        read: reader(
          z.object({
            message_id: z.union([z.string(), z.number()]).optional(),
            failure: z.number().optional(),
            results: z.array(z.object({ message_id: z.string().optional(), error: z.string().optional() })).optional(),
          }),
          'Cloud push (legacy)',
        ),
      },
    );
    const error = answer.results?.find((r) => r.error)?.error;
    if (error || answer.failure) throw new UserError(`Cloud push (legacy) refused the message: ${error ?? 'failure'}`);
    return { id: String(answer.message_id ?? answer.results?.[0]?.message_id ?? '') };
  }

  /** Sends (or, with validateOnly, only validates) through v1 when a service account is set, else legacy. */
  async function send(
    creds: FcmCredentials,
    msg: FcmMessage,
    target: OutboundTarget,
    validateOnly = false,
  ): Promise<{ id: string; api: 'v1' | 'legacy' }> {
    if (creds.service_account_json) {
      return { ...(await sendV1({ ...creds, service_account_json: creds.service_account_json }, msg, target, validateOnly)), api: 'v1' };
    }
    if (creds.server_key) return { ...(await sendLegacy(creds.server_key, msg, target, validateOnly)), api: 'legacy' };
    throw new UserError('No cloud push credentials: set fcm_service_account_json (or the legacy fcm_server_key)');
  }

  return { send };
}
