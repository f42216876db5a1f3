// How work on a subscription is recorded: the subscription as the chatter and the action log name
// it, the actor a remote change is done for, and the notices and alerts of its chatter.
import { runLoggedStep } from '../core/action-log.js';
import { postMessage, type Author, type RecordRef } from '../core/chatter.js';
import type { Db, DbTx } from '../core/db.js';

/**
 * Whom a remote change is done for: the user who asked (null: the service itself, e.g. a scheduled
 * run) and the job doing it (null: done within the API request). The action log records both.
 */
export interface Actor {
  userId: number | null;
  jobId: string | null;
}

/** The actor as an action-log row, or the target of an outbound call, records it. */
export const actorFields = (actor: Actor) => ({ user_id: actor.userId, job_id: actor.jobId });

/** The subscription as the chatter and the action log name it. */
export const onSubscription = (id: number) => ({ model_name: 'svc.subscription', rec_id: id }) satisfies RecordRef;

/** A notice in the subscription's chatter: what was done, for the record. */
export function postNotice(db: Db | DbTx, id: number, body: string, author: Author | null) {
  return postMessage(db, { ...onSubscription(id), body, message_type: 'notification', author });
}

/** An alert in the subscription's chatter: something failed or is left for someone to act on. */
export function postAlert(db: Db | DbTx, id: number, body: string, author: Author | null) {
  return postMessage(db, { ...onSubscription(id), body, message_type: 'notification', subtype_xmlid: 'mail.mt_alert', author });
}

/** Who asked for a step on the subscription's database, its job, and the operation it belongs to (`move`, `create_staging`). */
export interface StepAudit {
  user_id: number | null;
  job_id: string | null;
  operation: string;
}

/** One step on the subscription's database in its action log: running, then its outcome (the work's answer when text, else "done"). */
export function databaseStep<T>(db: Db, id: number, audit: StepAudit, input: string, work: () => Promise<T>): Promise<T> {
  const entry = { ...onSubscription(id), action_type: 'database' as const, ...audit, input_text: input };
  return runLoggedStep(db, entry, work, (out) => (typeof out === 'string' ? out : 'done'));
}
