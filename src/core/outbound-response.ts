// A fully read answer of an outbound call. Non-2xx statuses are answers too: callers decide what
// they mean.
import { maskSecrets } from './action-log.js';
import { OutboundError } from './outbound-error.js';
import type { Secrets } from './outbound-options.js';
import { excerpt, LOGGED_ANSWER_CHARS, redactBody } from './outbound-redaction.js';

export const isRedirect = (status: number) => [301, 302, 303, 307, 308].includes(status);

export class OutboundResponse {
  constructor(
    /** "GET http://host/path", for messages */
    readonly label: string,
    readonly status: number,
    readonly headers: Headers,
    readonly body: Uint8Array,
    /** Values masked in the excerpts that error messages quote. */
    private readonly secrets: Secrets = [],
  ) {}

  /** A short, secret-free quote of the body for error messages. */
  excerpt(): string {
    return excerpt(maskSecrets(redactBody(this.text(), this.contentType), this.secrets));
  }

  /** The answer as the action log keeps it: the status and the start of the redacted body. */
  logged(): string {
    return `HTTP ${this.status}\n${redactBody(this.text(), this.contentType, LOGGED_ANSWER_CHARS)}`;
  }

  get ok(): boolean {
    return this.status >= 200 && this.status < 300;
  }

  private get contentType(): string {
    return this.headers.get('content-type') ?? '';
  }

  text(): string {
    return new TextDecoder().decode(this.body);
  }

  /** The body of a 2xx answer as JSON; another status fails with reason http_status and an excerpt. */
  okJson(): unknown {
    if (!this.ok) throw new OutboundError('http_status', `${this.label} answered HTTP ${this.status}: ${this.excerpt()}`);
    return this.json();
  }

  /** The body as JSON; anything else fails with reason not_json and a short excerpt. */
  json(): unknown {
    const text = this.text();
    try {
      return JSON.parse(text);
    } catch {
      throw new OutboundError('not_json', `${this.label} answered HTTP ${this.status} with something that is not JSON: ${this.excerpt()}`);
    }
  }
}
