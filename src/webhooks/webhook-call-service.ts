// One call of POST /svc/webhook/<token>: find the active webhook by token
// (none → 400), check the signature when the webhook has a signing secret (→ 400, nothing runs),
// read the body, call trigger_action and post the message as one transaction, answer 200 {}.
// Any exception → 500 {"error": "Unknown error SSB C/W42"}, the details in the server log only;
// but PostgreSQL or Redis away (a failover, docs/high-availability.md) → 503 with Retry-After:
// the call was not stored (or, rarely, it is not known that it was), so the caller sends it again. A 200 is
// only ever answered once the transaction that stored the call committed.
// Every call of a known webhook is appended to its call log.
//
// Speed (bench/webhook.ts). The webhook is found in a per-process cache kept exact by
// LISTEN/NOTIFY (webhook-cache.ts); the call log is written in batches (webhook-call-log.ts).
// A message (without trigger_action) is posted on a small pg pool of the endpoint's own with
// group commit (webhook-message.ts, group-commit.ts): concurrent calls share one multi-row
// INSERT ... SELECT ... WHERE EXISTS, and each call is answered after its batch committed. A call
// without trigger nor message does nothing to its record, so it does not read it (like the
// reference's browse(), which never fails).
// A trigger_action runs in a Prisma interactive transaction, as the method registry's contract
// requires (`{ tx }`), with the message posted in the same transaction, and a settlement record
// (webhook_deliveries: the caller's delivery id or one of svc's own) written first in it: a retry of
// a delivery already stored runs nothing (200), and a COMMIT whose answer was lost is settled by
// looking for that record (commit-outcome.ts), as a message batch is.
// Contention. A call never updates the webhook's own row: 50 concurrent calls of one webhook
// updating a counter there would queue on its row lock, one commit after the other. The call log
// is append-only; call_count and last_called_at are derived from it when read, and the daily
// retention job folds the calls it deletes into the stored counters in the same transaction.
import { createHmac, randomUUID, timingSafeEqual } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import type { Logger } from 'pino';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { isDatabaseUnavailable } from '../core/db.js';
import { AppError } from '../core/errors.js';
import { isRedisUnavailable } from '../core/redis.js';
import { MessageType, type NewMessage, postMessage, type Subtype, SUBTYPES } from '../core/chatter.js';
import type { ModelName, ModelRegistry } from '../core/models.js';
import { assertRecordExists } from './webhook-service.js';
import { createMessageWriter, type MessageWriter } from './webhook-message.js';
import { findWebhookMethod, runWebhookMethod, type WebhookMethod, type WebhookMethodTable } from '../core/webhook-methods.js';
import { commitOutcome, type HeldTransaction } from './commit-outcome.js';
import type { Registry } from '../feature.js';
import { createWebhookCache, type WebhookCache, type WebhookDefinition } from './webhook-cache.js';
import { createWebhookCallLog, type WebhookCallLog } from './webhook-call-log.js';

export const UNKNOWN_ERROR = { error: 'Unknown error SSB C/W42' } as const;
export const UNAVAILABLE = { error: 'Service unavailable: send the call again later' } as const;
/** Seconds a caller is asked to wait (Retry-After) before sending a call answered 503 again. */
export const RETRY_AFTER_SECONDS = 5;
const TOKEN = /^[0-9a-f]{64}$/;
const MAX_MESSAGE = 100_000;
const MAX_ERROR_SUMMARY = 300;

/** The body: every field optional; other fields (e.g. a git host's push payload) are ignored. */
const callBody = z.object({
  // PostgreSQL text cannot hold U+0000: refused as bad input rather than failing the insert.
  message: z
    .string()
    .max(MAX_MESSAGE)
    .refine((v) => !v.includes('\u0000'), 'must not contain NUL characters')
    .nullish(),
  message_type: z.enum(MessageType).nullish(),
  subtype_xmlid: z.enum(SUBTYPES).nullish(),
});

export interface WebhookCallRequest {
  token: string;
  rawBody: Buffer | undefined;
  /** The X-Hub-Signature-256 header. */
  signature: string | string[] | undefined;
  /** The caller's id of this delivery (Idempotency-Key, else X-GitHub-Delivery): its retries carry the same. */
  delivery?: string | string[] | undefined;
  sourceIp: string;
}

export interface WebhookCallAnswer {
  status: 200 | 400 | 500 | 503;
  body: Record<string, string>;
  /** Retry-After (seconds) of a 503. */
  retryAfter?: number;
}

/** The call could not be stored because PostgreSQL (or Redis) is away; `cause` says how. */
class Unavailable extends Error {}

/**
 * Whether `err` means the database or Redis is away. `fromPg`: it came from the endpoint's own pg
 * pool, where a bare socket error is PostgreSQL's.
 */
function unavailable(err: unknown, fromPg = false): boolean {
  return err instanceof Unavailable || isDatabaseUnavailable(err, { fromPg }) || isRedisUnavailable(err);
}

const UNAVAILABLE_ANSWER: WebhookCallAnswer = { status: 503, body: UNAVAILABLE, retryAfter: RETRY_AFTER_SECONDS };

/** Connections of the endpoint's own pool (bench/webhook.ts measures the raw-SQL ceiling at this size). */
export const WEBHOOK_POOL_SIZE = 10;

/**
 * The endpoint's own small pool: plain pg, short timeouts (every outbound call has one), pipeline
 * mode (a message batch sends BEGIN and its statement together: webhook-message.ts).
 */
function createWebhookPool(databaseUrl: string, log: Logger, max = WEBHOOK_POOL_SIZE): pg.Pool {
  const pool = new pg.Pool({
    connectionString: databaseUrl,
    max,
    pipeline: true,
    connectionTimeoutMillis: 10_000,
    idleTimeoutMillis: 30_000,
    statement_timeout: 10_000,
    application_name: 'svc-webhooks',
  });
  // An idle connection ended by the server (a restart, a terminated backend) is an 'error' on the
  // pool: unheard, it would end the process. The pool drops that connection and opens a new one.
  pool.on('error', (err) => log.warn({ err }, 'an idle connection of the webhook pool was lost'));
  return pool;
}

/** Constant-time check of `sha256=<hex>` against HMAC-SHA256(secret, raw body). */
function signatureMatches(secret: string, rawBody: Buffer, header: string | string[] | undefined): boolean {
  if (typeof header !== 'string') return false;
  const match = /^sha256=([0-9a-f]{64})$/i.exec(header.trim());
  if (!match) return false;
  const given = Buffer.from(match[1]!.toLowerCase(), 'hex');
  const expected = createHmac('sha256', secret).update(rawBody).digest();
  return timingSafeEqual(given, expected);
}

class CallRefused extends Error {}

/** A retry of a delivery whose call was stored before: nothing runs, the answer is 200 again. */
class AlreadyStored extends Error {}

/** A delivery id as a caller may send it: 1 to 255 visible ASCII characters (as the API's Idempotency-Key). */
const DELIVERY = /^[\x21-\x7e]{1,255}$/;

function deliveryOf(header: string | string[] | undefined): string | null {
  if (header === undefined) return null;
  if (typeof header !== 'string' || !DELIVERY.test(header)) {
    throw new CallRefused('Invalid delivery id: Idempotency-Key (or X-GitHub-Delivery) is 1 to 255 visible ASCII characters');
  }
  return header;
}

/** The settlement record as its INSERT answered it, with the transaction that holds it. */
interface StoredDelivery extends HeldTransaction {
  id: string;
  created_at: string;
}

function summary(err: unknown): string {
  const ours = err instanceof AppError || err instanceof CallRefused;
  const text = err instanceof Error ? `${ours ? '' : `${err.name}: `}${err.message}` : String(err);
  return text.length > MAX_ERROR_SUMMARY ? `${text.slice(0, MAX_ERROR_SUMMARY)}…` : text;
}

export type WebhookCallService = ReturnType<typeof createWebhookCallService>;

export interface WebhookCallDeps {
  cache: WebhookCache;
  callLog: WebhookCallLog;
  messages: MessageWriter;
  methods: WebhookMethodTable;
  models: ModelRegistry;
  /** Connection settings for settling a trigger_action's lost COMMIT on fresh connections. */
  settle: pg.ClientConfig;
}

function createWebhookCallService(ctx: Pick<AppContext, 'db' | 'secretBox' | 'log'>, deps: WebhookCallDeps) {
  const { cache, callLog, messages, methods, models } = deps;

  /**
   * The method, the message and the settlement record in one transaction. A delivery stored before
   * (its record there) runs nothing. A transaction that failed with the database away after its
   * record was written is looked for (the COMMIT may have been sent): found, the call is done.
   */
  async function runTrigger(
    hook: WebhookDefinition,
    method: WebhookMethod,
    payload: unknown,
    msg: NewMessage | null,
    delivery: string | null,
  ) {
    const key = delivery ?? `svc:${randomUUID()}`;
    let stored: StoredDelivery | undefined;
    await runWebhookMethod(
      ctx.db,
      { method, recId: hook.rec_id, payload },
      {
        before: async (tx) => {
          [stored] = await tx.$queryRaw<StoredDelivery[]>`
            INSERT INTO webhook_deliveries (webhook_id, delivery) VALUES (${hook.id}, ${key})
            ON CONFLICT (webhook_id, delivery) DO NOTHING
            RETURNING id::text AS id, created_at::text AS created_at, pg_backend_pid() AS pid, xid(pg_current_xact_id())::text AS xid`;
          if (!stored) throw new AlreadyStored();
          await assertRecordExists(models, tx, hook.model_name, hook.rec_id);
        },
        after: async (tx) => {
          if (msg) await postMessage(tx, msg);
        },
        committed: async (err) => {
          if (!stored || err instanceof AlreadyStored || !unavailable(err)) return false;
          const there = {
            text: 'SELECT EXISTS (SELECT 1 FROM webhook_deliveries WHERE id = $1::bigint AND created_at = $2::timestamp) AS there',
            values: [stored.id, stored.created_at],
          };
          return (await commitOutcome(deps.settle, stored, there)) === 'committed';
        },
      },
    ).catch((err: unknown) => {
      if (!(err instanceof AlreadyStored)) throw err;
    });
  }

  async function run(hook: WebhookDefinition, req: WebhookCallRequest): Promise<void> {
    const raw = req.rawBody ?? Buffer.alloc(0);
    if (hook.signing_secret && !signatureMatches(await ctx.secretBox.decrypt(hook.signing_secret), raw, req.signature)) {
      throw new CallRefused('Invalid signature');
    }
    let json: unknown = {};
    if (raw.length > 0) {
      try {
        json = JSON.parse(raw.toString('utf8'));
      } catch {
        throw new CallRefused('Invalid body: not JSON');
      }
    }
    const parsed = callBody.safeParse(json);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      throw new CallRefused(`Invalid body: ${issue.path.join('.') || 'body'}: ${issue.message}`);
    }
    const { message } = parsed.data;
    const model = models.find(hook.model_name);
    if (!model) throw new Error(`Unknown model ${hook.model_name}`);
    // Written out, not spread from a shared ref: on Node 20, `{ ...ref, a, b }` costs ~1 µs for
    // every property added after the spread (a slow path of V8 11), 4.6 µs a message here.
    const msg: NewMessage | null =
      message == null
        ? null
        : {
            model_name: hook.model_name as ModelName,
            rec_id: hook.rec_id,
            body: message,
            message_type: parsed.data.message_type ?? (hook.message_type as MessageType),
            subtype_xmlid: (parsed.data.subtype_xmlid ?? hook.subtype_xmlid) as Subtype,
            author: { id: null, name: `webhook ${hook.id}` },
          };

    if (hook.trigger_action) {
      const delivery = deliveryOf(req.delivery);
      const method = findWebhookMethod(methods, hook.model_name, hook.trigger_action);
      if (!method) throw new Error(`${hook.model_name}.${hook.trigger_action} is not callable by webhooks`);
      await runTrigger(hook, method, json, msg, delivery);
      return;
    }

    if (!msg) return;
    // A batch whose connection broke is not retried here: the caller's retry after the 503 is the
    // retry. A batch whose COMMIT was sent when it broke finds out whether it committed before it
    // settles (webhook-message.ts): committed → 200, else 503; see docs/high-availability.md.
    const posted = await messages.post(model, msg).catch((err: unknown) => {
      throw unavailable(err, true) ? new Unavailable('PostgreSQL unavailable', { cause: err }) : err;
    });
    if (!posted) throw new Error(`${hook.model_name} ${hook.rec_id} does not exist`);
  }

  return {
    async handle(req: WebhookCallRequest): Promise<WebhookCallAnswer> {
      const calledAt = Date.now();
      const started = performance.now();
      if (!TOKEN.test(req.token)) return { status: 400, body: { error: 'Unknown webhook' } };
      let hook: WebhookDefinition | null | undefined = cache.cached(req.token);
      if (hook === undefined) {
        try {
          hook = await cache.get(req.token);
        } catch (err) {
          if (!unavailable(err, true)) throw err;
          ctx.log.warn({ err }, 'webhook call answered 503: the database is unavailable');
          return UNAVAILABLE_ANSWER;
        }
      }
      if (!hook) return { status: 400, body: { error: 'Unknown webhook' } };

      let answer: WebhookCallAnswer = { status: 200, body: {} };
      let error: string | null = null;
      try {
        await run(hook, req);
      } catch (err) {
        if (err instanceof CallRefused) {
          answer = { status: 400, body: { error: err.message } };
        } else if (unavailable(err)) {
          ctx.log.warn({ err, webhook_id: hook.id }, 'webhook call answered 503: the database or Redis is unavailable');
          answer = UNAVAILABLE_ANSWER;
        } else {
          // The token is not logged: the webhook is named by its id.
          ctx.log.error(
            { err, webhook_id: hook.id, model_name: hook.model_name, rec_id: hook.rec_id, trigger_action: hook.trigger_action },
            'webhook call failed',
          );
          answer = { status: 500, body: UNKNOWN_ERROR };
        }
        error = summary(err);
      }

      callLog.add({
        webhook_id: hook.id,
        called_at: calledAt,
        status: answer.status,
        // Tenths of a millisecond: finer is noise, and 0.30000000000000004 reads badly.
        duration_ms: Math.round((performance.now() - started) * 10) / 10,
        source_ip: req.sourceIp,
        body_size: req.rawBody?.length ?? 0,
        error,
      });
      return answer;
    },
  };
}

/**
 * The endpoint's parts that live as long as the process: its pool, the definition cache, the
 * call log, and the call service over them. close() writes the last log lines and ends them.
 */
export async function openWebhookEndpoint(
  ctx: Pick<AppContext, 'db' | 'secretBox' | 'log' | 'config'>,
  registry: Pick<Registry, 'models' | 'webhookMethods'>,
) {
  const pool = createWebhookPool(ctx.config.DATABASE_URL, ctx.log);
  const cache = await createWebhookCache(pool, ctx.config.DATABASE_URL, ctx.log);
  const callLog = createWebhookCallLog(pool, ctx.log);
  const messages = createMessageWriter(pool);
  return {
    calls: createWebhookCallService(ctx, {
      cache,
      callLog,
      messages,
      methods: registry.webhookMethods,
      models: registry.models,
      settle: pool.options,
    }),
    flushCallLog: callLog.flush,
    async close() {
      await messages.close();
      await callLog.close();
      await cache.close();
      await pool.end();
    },
  };
}
