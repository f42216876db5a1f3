// The cloud push service-account JSON (the modern FCM credential): its required structure, and
// the signed JWT (RS256) exchanged at its token_uri for an OAuth2 access token.
import { createPrivateKey, sign, type KeyObject } from 'node:crypto';
import { urlProblem } from '../core/outbound-fields.js';

const FCM_SCOPE = 'https://www.googleapis.com/auth/firebase.messaging';

export interface ServiceAccount {
  client_email: string;
  private_key: KeyObject;
  private_key_id: string | null;
  token_uri: string;
  project_id: string | null;
}

/** Parses the JSON; the error message says what is wrong, never what the key is. */
export function parseServiceAccount(json: string): ServiceAccount {
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch {
    throw new Error('is not valid JSON');
  }
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) throw new Error('must be a JSON object');
  const o = raw as Record<string, unknown>;
  if (o.type !== undefined && o.type !== 'service_account') throw new Error('has a "type" other than "service_account"');
  for (const field of ['client_email', 'private_key', 'token_uri'] as const) {
    if (typeof o[field] !== 'string' || o[field] === '') throw new Error(`lacks "${field}"`);
  }
  if (!/^https?:\/\//i.test(o.token_uri as string) || !URL.canParse(o.token_uri as string))
    throw new Error('has a "token_uri" that is not an http(s) URL');
  const tokenUriProblem = urlProblem(o.token_uri as string, { base: false });
  if (tokenUriProblem) throw new Error(`has a "token_uri" that ${tokenUriProblem}`);
  let key: KeyObject;
  try {
    key = createPrivateKey(o.private_key as string);
  } catch {
    throw new Error('has a "private_key" that is not a PEM private key');
  }
  if (key.asymmetricKeyType !== 'rsa') throw new Error('has a "private_key" that is not an RSA key');
  return {
    client_email: o.client_email as string,
    private_key: key,
    private_key_id: typeof o.private_key_id === 'string' ? o.private_key_id : null,
    token_uri: o.token_uri as string,
    project_id: typeof o.project_id === 'string' && o.project_id ? o.project_id : null,
  };
}

const b64url = (data: Buffer | string) => Buffer.from(data).toString('base64url');

/** The JWT bearer assertion of RFC 7523 for the service account, valid one hour. */
export function signAssertion(account: ServiceAccount, now = Math.floor(Date.now() / 1000)): string {
  const header = { alg: 'RS256', typ: 'JWT', ...(account.private_key_id ? { kid: account.private_key_id } : {}) };
  const claims = { iss: account.client_email, scope: FCM_SCOPE, aud: account.token_uri, iat: now, exp: now + 3600 };
  const input = `${b64url(JSON.stringify(header))}.${b64url(JSON.stringify(claims))}`;
  return `${input}.${b64url(sign('RSA-SHA256', Buffer.from(input), account.private_key))}`;
}
