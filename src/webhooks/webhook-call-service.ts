// One call of POST /svc/webhook/<token> (spec §4.2, §7.1): look up the active webhook by token
// (none → 400), check the signature when the webhook has a signing secret (→ 400, nothing runs),
// read the body, resolve the target record, call trigger_action and post the message as one
// transaction, answer 200 {}. Any exception → 500 {"error": "Unknown error SSB C/W42"}, the details
// in the server log only. Every call of a known webhook is appended to its call log.
//
// Speed. A webhook that only posts a message (the common case: monitoring alerts, callbacks)
// takes a fast path on a small pg pool of its own: one indexed SELECT, one INSERT ... SELECT that
// posts the message only if the target record exists (a single statement, so atomic), one INSERT
// into the call log — about three times the throughput of the same work through Prisma.
// A trigger_action runs in a Prisma interactive transaction, as the method registry's contract
// requires (`{ tx }`), with the message posted in the same transaction.
// Contention. A call never updates the webhook's own row: 50 concurrent calls of one webhook
// updating a counter on it would queue on that row lock, one commit after the other. The call
// log is append-only; call_count and last_called_at are derived from it when read, and the daily
// retention job folds the calls it deletes into the stored counters in the same transaction.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { z } from 'zod';
import type { AppContext } from '../context.js';
import { AppError } from '../core/errors.js';
import { isModelName, MODEL_TABLES } from '../core/models.js';
import { MESSAGE_TYPES, postMessage, SUBTYPES } from '../chatter/chatter-service.js';
import { assertRecordExists } from './webhook-service.js';
import { findWebhookMethod, type WebhookMethodTable } from './webhook-methods.js';

export const UNKNOWN_ERROR = { error: 'Unknown error SSB C/W42' } as const;
const TOKEN = /^[0-9a-f]{64}$/;
const MAX_MESSAGE = 100_000;
const MAX_ERROR_SUMMARY = 300;

/** The body: every field optional; other fields (e.g. a git host's push payload) are ignored. */
const callBody = z.object({
  message: z.string().max(MAX_MESSAGE).nullish(),
  message_type: z.enum(MESSAGE_TYPES).nullish(),
  subtype_xmlid: z.enum(SUBTYPES).nullish(),
});

export interface WebhookCallRequest {
  token: string;
  rawBody: Buffer | undefined;
  /** The X-Hub-Signature-256 header. */
  signature: string | string[] | undefined;
  sourceIp: string;
}

export interface WebhookCallAnswer {
  status: 200 | 400 | 500;
  body: Record<string, string>;
}

interface WebhookRow {
  id: number;
  model_name: string;
  rec_id: number;
  trigger_action: string | null;
  message_type: (typeof MESSAGE_TYPES)[number];
  subtype_xmlid: string;
  signing_secret: string | null;
}

/** The endpoint's own small pool: plain pg, short timeouts (every outbound call has one). */
export function createWebhookPool(databaseUrl: string, max = 10): pg.Pool {
  return new pg.Pool({
    connectionString: databaseUrl,
    max,
    connectionTimeoutMillis: 10_000,
    idleTimeoutMillis: 30_000,
    statement_timeout: 10_000,
    application_name: 'svc-webhooks',
  });
}

/** Constant-time check of `sha256=<hex>` against HMAC-SHA256(secret, raw body). */
export function signatureMatches(secret: string, rawBody: Buffer, header: string | string[] | undefined): boolean {
  if (typeof header !== 'string') return false;
  const match = /^sha256=([0-9a-f]{64})$/i.exec(header.trim());
  if (!match) return false;
  const given = Buffer.from(match[1]!.toLowerCase(), 'hex');
  const expected = createHmac('sha256', secret).update(rawBody).digest();
  return timingSafeEqual(given, expected);
}

class CallRefused extends Error {}

function summary(err: unknown): string {
  const ours = err instanceof AppError || err instanceof CallRefused;
  const text = err instanceof Error ? `${ours ? '' : `${err.name}: `}${err.message}` : String(err);
  return text.length > MAX_ERROR_SUMMARY ? `${text.slice(0, MAX_ERROR_SUMMARY)}…` : text;
}

export type WebhookCallService = ReturnType<typeof createWebhookCallService>;

export function createWebhookCallService(ctx: Pick<AppContext, 'db' | 'box' | 'log'>, pool: pg.Pool, methods: WebhookMethodTable) {
  async function run(hook: WebhookRow, req: WebhookCallRequest): Promise<void> {
    const raw = req.rawBody ?? Buffer.alloc(0);
    if (hook.signing_secret && !signatureMatches(await ctx.box.decrypt(hook.signing_secret), raw, req.signature)) {
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
    const messageType = parsed.data.message_type ?? hook.message_type;
    const subtype = (parsed.data.subtype_xmlid ?? hook.subtype_xmlid) as (typeof SUBTYPES)[number];
    const author = { id: null, name: `webhook ${hook.id}` };
    if (!isModelName(hook.model_name)) throw new Error(`Unknown model ${hook.model_name}`);

    if (hook.trigger_action) {
      const method = findWebhookMethod(methods, hook.model_name, hook.trigger_action);
      if (!method) throw new Error(`${hook.model_name}.${hook.trigger_action} is not callable by webhooks`);
      await ctx.db.$transaction(async (tx) => {
        await assertRecordExists(tx, hook.model_name, hook.rec_id);
        await method(hook.rec_id, { tx });
        if (message != null) {
          await postMessage(tx, { model_name: hook.model_name, rec_id: hook.rec_id, body: message, message_type: messageType, subtype_xmlid: subtype, author });
        }
      });
      return;
    }

    const table = MODEL_TABLES[hook.model_name];
    const result =
      message != null
        ? await pool.query(
            `INSERT INTO messages (model_name, rec_id, body, message_type, subtype_xmlid, author_name)
             SELECT $1, $2, $3, $4::"MessageType", $5, $6 WHERE EXISTS (SELECT 1 FROM "${table}" WHERE id = $2)`,
            [hook.model_name, hook.rec_id, message, messageType, subtype, author.name],
          )
        : await pool.query(`SELECT 1 FROM "${table}" WHERE id = $1`, [hook.rec_id]);
    if (result.rowCount === 0) throw new Error(`${hook.model_name} ${hook.rec_id} does not exist`);
  }

  return {
    async handle(req: WebhookCallRequest): Promise<WebhookCallAnswer> {
      const started = performance.now();
      if (!TOKEN.test(req.token)) return { status: 400, body: { error: 'Unknown webhook' } };
      const found = await pool.query<WebhookRow>(
        `SELECT id, model_name, rec_id, trigger_action, message_type::text AS message_type, subtype_xmlid, signing_secret
         FROM webhooks WHERE token = $1 AND active`,
        [req.token],
      );
      const hook = found.rows[0];
      if (!hook) return { status: 400, body: { error: 'Unknown webhook' } };

      let answer: WebhookCallAnswer = { status: 200, body: {} };
      let error: string | null = null;
      try {
        await run(hook, req);
      } catch (err) {
        if (err instanceof CallRefused) {
          answer = { status: 400, body: { error: err.message } };
        } else {
          // The token is not logged: the webhook is named by its id.
          ctx.log.error({ err, webhook_id: hook.id, model_name: hook.model_name, rec_id: hook.rec_id, trigger_action: hook.trigger_action }, 'webhook call failed');
          answer = { status: 500, body: UNKNOWN_ERROR };
        }
        error = summary(err);
      }

      try {
        await pool.query(
          'INSERT INTO webhook_calls (webhook_id, status, duration_ms, source_ip, body_size, error) VALUES ($1, $2, $3, $4, $5, $6)',
          [hook.id, answer.status, performance.now() - started, req.sourceIp, req.rawBody?.length ?? 0, error],
        );
      } catch (err) {
        // The call itself is done (its message committed); a lost log line must not turn it into an error.
        ctx.log.error({ err, webhook_id: hook.id }, 'webhook call log write failed');
      }
      return answer;
    },
  };
}
