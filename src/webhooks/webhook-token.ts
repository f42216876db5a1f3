// A webhook's token and public URL: the token is the only secret of an inbound webhook.
import { randomBytes } from 'node:crypto';

/** 32 random bytes as 64 lowercase hex characters. */
export function newWebhookToken(): string {
  return randomBytes(32).toString('hex');
}

export function webhookUrl(baseUrl: string, token: string): string {
  return `${baseUrl}/svc/webhook/${token}`;
}
