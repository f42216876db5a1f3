// The one action-log row (type api_call) each outbound call writes on the record it is made for.
import { writeActionLog } from './action-log.js';
import type { Db } from './db.js';
import type { ModelName } from './models.js';
import type { Secrets } from './outbound-options.js';

/** The record a call is made for, as the action log names it. */
export interface OutboundTarget {
  model_name: ModelName;
  rec_id: number;
  user_id?: number | null;
  job_id?: string | null;
}

/** `input_text` and `output_text` are already redacted; `secrets` are masked wherever they appear. */
export function logCall(db: Db, target: OutboundTarget, ok: boolean, input_text: string, output_text: string, secrets?: Secrets) {
  return writeActionLog(db, {
    model_name: target.model_name,
    rec_id: target.rec_id,
    user_id: target.user_id ?? null,
    job_id: target.job_id ?? null,
    action_type: 'api_call',
    status: ok ? 'success' : 'failure',
    input_text,
    output_text,
    secrets,
  });
}
