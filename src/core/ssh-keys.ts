// Private keys as ssh2 can read them: OpenSSH and PEM keys pass as they are; PKCS#8 RSA and
// Ed25519 keys (which ssh2 cannot read) are converted; passphrase-protected keys are refused.
import { createPrivateKey, randomBytes } from 'node:crypto';
import ssh2 from 'ssh2';
import { SshError } from './ssh-error.js';

function sshString(data: Buffer | string): Buffer {
  const body = Buffer.isBuffer(data) ? data : Buffer.from(data);
  const len = Buffer.alloc(4);
  len.writeUInt32BE(body.length);
  return Buffer.concat([len, body]);
}

/** An unencrypted OpenSSH-format private key for an Ed25519 key pair (ssh2 cannot read PKCS#8). */
function ed25519ToOpenssh(seed: Buffer, pub: Buffer): string {
  const publicBlob = Buffer.concat([sshString('ssh-ed25519'), sshString(pub)]);
  const check = randomBytes(4);
  let secret = Buffer.concat([check, check, publicBlob, sshString(Buffer.concat([seed, pub])), sshString('')]);
  const pad = (8 - (secret.length % 8)) % 8;
  secret = Buffer.concat([secret, Buffer.from(Array.from({ length: pad }, (_, i) => i + 1))]);
  const body = Buffer.concat([
    Buffer.from('openssh-key-v1\0', 'latin1'),
    sshString('none'),
    sshString('none'),
    sshString(''),
    Buffer.from([0, 0, 0, 1]),
    sshString(publicBlob),
    sshString(secret),
  ]);
  const lines = body
    .toString('base64')
    .match(/.{1,70}/g)!
    .join('\n');
  return `-----BEGIN OPENSSH PRIVATE KEY-----\n${lines}\n-----END OPENSSH PRIVATE KEY-----\n`;
}

const PASSPHRASE_MESSAGE =
  'The private key is protected by a passphrase; store it without one (svc encrypts it at rest): ssh-keygen -p -N "" -f <file>';

/**
 * Returns the key in a form ssh2 reads, or throws SshError('key') saying what is wrong.
 * OpenSSH and PEM keys pass as they are; PKCS#8 ("BEGIN PRIVATE KEY") RSA and Ed25519 keys are converted.
 */
export function usablePrivateKey(text: string): string {
  const parsed = ssh2.utils.parseKey(text);
  if (!(parsed instanceof Error)) {
    if (!parsed.isPrivateKey()) throw new SshError('key', 'This is a public key; the private key is needed');
    return text;
  }
  if (/passphrase|encrypted/i.test(parsed.message) || text.includes('ENCRYPTED')) throw new SshError('key', PASSPHRASE_MESSAGE);
  let key;
  try {
    key = createPrivateKey(text);
  } catch {
    throw new SshError('key', 'Not a private key in OpenSSH or PEM format');
  }
  if (key.asymmetricKeyType === 'rsa') return key.export({ type: 'pkcs1', format: 'pem' }).toString();
  if (key.asymmetricKeyType === 'ed25519') {
    const jwk = key.export({ format: 'jwk' });
    return ed25519ToOpenssh(Buffer.from(jwk.d!, 'base64url'), Buffer.from(jwk.x!, 'base64url'));
  }
  throw new SshError('key', `Unsupported private key type ${key.asymmetricKeyType}; use RSA, Ed25519 or ECDSA`);
}
