// How work on a subscription is recorded: the subscription as the chatter and the action log name
// it, the actor a remote change is done for, and the notices and alerts of its chatter.
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
