// The SSH layer's one error: why it failed, in a message meant for the operator (connectSsh's refusals).
import { UserError } from './errors.js';

export type SshFailure =
  | 'auth' // credentials refused
  | 'refused' // nothing listens on the port
  | 'timeout' // no answer in time (connect, handshake or login)
  | 'unreachable' // no route to the host
  | 'dns' // host name unknown
  | 'host_key_changed' // the server presents another host key than the one recorded
  | 'key' // the stored private key cannot be used
  | 'sudo' // sudo asked for but impossible (no password)
  | 'closed' // the connection ended
  | 'protocol'; // anything else the SSH layer reports

/** An SSH failure with a message meant for the operator (answered as 400 user_error). */
export class SshError extends UserError {
  constructor(
    readonly reason: SshFailure,
    message: string,
  ) {
    super(message, { reason });
  }
}

/** What the messages below name of the connection's target (an SshTarget). */
interface ErrorTarget {
  host: string;
  port: number;
  username: string;
  password: string | null;
  privateKey: string | null;
  knownHostKey: string | null;
}

/** The operator-readable error for a failed connection. */
export function describeConnectError(err: Error & { code?: string; level?: string }, target: ErrorTarget, timeoutMs: number): SshError {
  const where = `${target.host}:${target.port}`;
  if (err.level === 'client-authentication') {
    const methods = [target.privateKey && 'private key', target.password && 'password'].filter(Boolean).join(' and ');
    return new SshError('auth', `Authentication failed for ${target.username}@${where}: the server refused the ${methods}`);
  }
  if (err.level === 'client-timeout' || err.code === 'ETIMEDOUT') {
    return new SshError('timeout', `Timed out after ${Math.round(timeoutMs / 1000)} s connecting to ${where} (no SSH answer)`);
  }
  switch (err.code) {
    case 'ECONNREFUSED':
      return new SshError('refused', `Connection refused by ${where}: no SSH server listens on port ${target.port}`);
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
    case 'EHOSTDOWN':
      return new SshError('unreachable', `Host ${target.host} is unreachable (${err.code})`);
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return new SshError('dns', `Host name ${target.host} could not be resolved`);
    case 'ECONNRESET':
    case 'EPIPE':
      return new SshError('closed', `${where} closed the connection during the SSH handshake`);
  }
  return new SshError('protocol', `SSH connection to ${where} failed: ${err.message}`);
}

/** The refusal of a presented host key that differs from the recorded one. */
export function hostKeyChanged(target: ErrorTarget, presented: string): SshError {
  return new SshError(
    'host_key_changed',
    `Host key of ${target.host}:${target.port} has changed: recorded ${target.knownHostKey}, presented ${presented}. ` +
      'The connection was refused. If the server was reinstalled, check the new key on the server ' +
      '(ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub) and accept it by setting host_key on the root server ' +
      '(PATCH host_key to the new value, or to null to trust the key presented at the next connection).',
  );
}
