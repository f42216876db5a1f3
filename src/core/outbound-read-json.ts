// The `read` of a JSON API call: the answer judged (status, JSON, shape) before the call is
// logged, so a 200 web page where an API was expected is a failure in the action log too.
import type { z } from 'zod';
import { UserError } from './errors.js';
import { OutboundError } from './outbound-error.js';
import type { OutboundResponse } from './outbound-response.js';

/**
 * 401/403 is a UserError starting with `refused` (the remote refused our credentials), another
 * non-2xx (http_status) or non-JSON answer one starting with `what`, and the JSON must have the
 * shape of `schema`.
 */
export function readJson<T extends z.ZodType>(schema: T, messages: { refused: string; what: string }) {
  return (res: OutboundResponse): z.output<T> => {
    if (res.status === 401 || res.status === 403) {
      throw new UserError(`${messages.refused}: ${res.label} answered HTTP ${res.status}: ${res.excerpt()}`);
    }
    let body: unknown;
    try {
      body = res.okJson();
    } catch (err) {
      const e = err as OutboundError;
      throw new OutboundError(e.reason, `${messages.what}: ${e.message}`);
    }
    const parsed = schema.safeParse(body);
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      throw new UserError(`${messages.what} from ${res.label} is not as expected (${issue.path.join('.') || 'answer'}: ${issue.message})`);
    }
    return parsed.data;
  };
}
