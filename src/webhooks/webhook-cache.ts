// In-process cache of active webhook definitions by token, so a call usually needs no query to
// find its webhook. It is safe across API processes: a trigger on the webhooks table NOTIFYs
// `svc_webhooks_changed` when any change commits, and every process LISTENs and drops its whole
// cache. While the listening connection is down the cache is not used at all (every call reads
// the database), so a missed notification can never serve a deactivated or deleted webhook; a
// 30 s lifetime per entry is a second safety net. Unknown tokens are not cached (random tokens
// must not fill memory). A read that raced a notification is not stored (generation check).
import pg from 'pg';
import type { Logger } from 'pino';

export interface WebhookDefinition {
  id: number;
  model_name: string;
  rec_id: number;
  trigger_action: string | null;
  message_type: string;
  subtype_xmlid: string;
  /** Ciphertext; decrypted per call. */
  signing_secret: string | null;
}

const CHANNEL = 'svc_webhooks_changed';
const TTL_MS = 30_000;
const MAX_ENTRIES = 10_000;
const RECONNECT_MAX_MS = 30_000;

export type WebhookCache = Awaited<ReturnType<typeof createWebhookCache>>;

export async function createWebhookCache(pool: pg.Pool, databaseUrl: string, log: Logger) {
  const entries = new Map<string, { hook: WebhookDefinition; expires: number }>();
  let generation = 0;
  let listening = false;
  let closed = false;
  let listener: pg.Client | null = null;
  let retryMs = 1_000;

  function clear() {
    generation += 1;
    entries.clear();
  }

  async function listen(): Promise<void> {
    const client = new pg.Client({
      connectionString: databaseUrl,
      keepAlive: true,
      connectionTimeoutMillis: 10_000,
      application_name: 'svc-webhook-cache',
    });
    const lost = (err?: Error) => {
      if (listener !== client) return;
      listening = false;
      listener = null;
      clear();
      // The connection is already lost: closing it is only tidying, and the loss is told below.
      client.end().catch(() => {});
      if (closed) return;
      log.warn({ err }, 'webhook cache: change notifications lost; reading webhooks from the database until reconnected');
      setTimeout(() => void listen(), retryMs).unref();
      retryMs = Math.min(retryMs * 2, RECONNECT_MAX_MS);
    };
    listener = client;
    client.on('notification', clear);
    client.on('error', lost);
    client.on('end', () => lost());
    try {
      await client.connect();
      await client.query(`LISTEN ${CHANNEL}`);
      clear(); // anything cached before (re)connecting may have missed a notification
      listening = true;
      retryMs = 1_000;
    } catch (err) {
      lost(err as Error);
    }
  }

  await listen();

  /** The cached definition of this token, if the cache may be used and holds it. */
  function peek(token: string, now: number): WebhookDefinition | undefined {
    if (!listening) return undefined;
    const hit = entries.get(token);
    return hit && hit.expires > now ? hit.hook : undefined;
  }

  return {
    /** The active webhook with this token when it is cached (no promise to wait on: every call asks), else undefined. */
    cached(token: string): WebhookDefinition | undefined {
      return peek(token, Date.now());
    },

    /** The active webhook with this token, or null. */
    async get(token: string): Promise<WebhookDefinition | null> {
      const now = Date.now();
      const hit = peek(token, now);
      if (hit) return hit;
      const startedAt = generation;
      const { rows } = await pool.query<WebhookDefinition>(
        `SELECT id, model_name, rec_id, trigger_action, message_type::text AS message_type, subtype_xmlid, signing_secret
         FROM webhooks WHERE token = $1 AND active`,
        [token],
      );
      const hook = rows[0] ?? null;
      if (hook && listening && generation === startedAt) {
        if (entries.size >= MAX_ENTRIES) entries.delete(entries.keys().next().value!);
        entries.set(token, { hook, expires: now + TTL_MS });
      }
      return hook;
    },

    async close() {
      closed = true;
      listening = false;
      const client = listener;
      listener = null;
      // Closing a connection the work is done with: a close that fails leaves nothing open (the server ends the session with its socket).
      await client?.end().catch(() => {});
    },
  };
}
