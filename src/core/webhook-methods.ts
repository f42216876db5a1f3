// The registry of methods a webhook may call: per model, the methods that model
// declares callable by an inbound webhook. A trigger_action outside it is refused when a webhook
// is saved, and the endpoint never calls anything else. Each feature gives its own table in its
// manifest (`webhookMethods`); src/features.ts composes them.
import type { Db, DbTx, InTransaction } from './db.js';
import type { ModelName } from './models.js';

/** A method runs in the transaction the message is posted in; `afterCommit` work runs once it commits. */
export interface WebhookInvocation extends InTransaction {
  /** The JSON body of the call (e.g. a git host's push event); undefined when run from the API. */
  payload: unknown;
}
export type WebhookMethod = (recId: number, call: WebhookInvocation) => Promise<void>;
export type WebhookMethodTable = { [M in ModelName]?: Record<string /* method */, WebhookMethod> };

/**
 * Interactive-transaction options for running a method: some methods wait on a remote API
 * (e.g. a backup server) under their own timeouts, longer than Prisma's 5 s default.
 */
const WEBHOOK_TRANSACTION = { maxWait: 10_000, timeout: 60_000 } as const;

/**
 * Runs a method in one transaction together with `steps` (checks before it, the message after
 * it), then the work the method left for after the commit. `committed`: asked when the transaction
 * failed, whether it committed all the same (a COMMIT whose answer was lost); if so, it is taken
 * as done and the work after the commit runs.
 */
export async function runWebhookMethod(
  db: Db,
  call: { method: WebhookMethod; recId: number; payload: unknown },
  steps: {
    before?: (tx: DbTx) => Promise<unknown>;
    after?: (tx: DbTx) => Promise<unknown>;
    committed?: (err: unknown) => Promise<boolean>;
  } = {},
): Promise<void> {
  const afterCommit: (() => Promise<unknown>)[] = [];
  try {
    await db.$transaction(async (tx) => {
      await steps.before?.(tx);
      await call.method(call.recId, { tx, payload: call.payload, afterCommit: (fn) => afterCommit.push(fn) });
      await steps.after?.(tx);
    }, WEBHOOK_TRANSACTION);
  } catch (err) {
    if (!(await steps.committed?.(err))) throw err;
  }
  for (const fn of afterCommit) await fn();
}

/** Merges feature tables; two features declaring the same method of a model is a programming error. */
export function composeWebhookMethods(...tables: WebhookMethodTable[]): WebhookMethodTable {
  const out: Record<string, Record<string, WebhookMethod>> = {};
  for (const table of tables) {
    for (const [model, methods] of Object.entries(table) as [string, Record<string, WebhookMethod>][]) {
      out[model] ??= {};
      const merged = out[model];
      for (const [name, method] of Object.entries(methods)) {
        if (Object.hasOwn(merged, name)) throw new Error(`Webhook method ${model}.${name} is declared twice`);
        merged[name] = method;
      }
    }
  }
  return out;
}

/** The registered method, or null: own properties only, so no prototype name (`constructor`...) resolves. */
export function findWebhookMethod(table: WebhookMethodTable, model: string, method: string): WebhookMethod | null {
  if (!Object.hasOwn(table, model)) return null;
  const methods = (table as Record<string, Record<string, WebhookMethod>>)[model]!;
  return Object.hasOwn(methods, method) ? methods[method]! : null;
}

/** The callable method names per model, for error messages and the docs. */
export function describeWebhookMethods(table: WebhookMethodTable): Record<string, string[]> {
  return Object.fromEntries(Object.entries(table).map(([model, methods]) => [model, Object.keys(methods ?? {}).sort()]));
}
