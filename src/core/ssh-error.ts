// The SSH layer's one error: why it failed, in a message meant for the operator.
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
