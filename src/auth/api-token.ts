import { createHash, randomBytes } from 'node:crypto';

/** A new bearer token: shown once, stored only as its SHA-256. */
export function newApiToken(): { token: string; hash: string; prefix: string } {
  const token = `svc_${randomBytes(32).toString('base64url')}`;
  return { token, hash: hashApiToken(token), prefix: token.slice(0, 10) };
}

export function hashApiToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}
